"""CodeXGLUE AdvTest's normalisation (issue #21, item 4).

``advtest_normalize`` must give CodeXGLUE's released normalised test code back. The release has no
original code, so each released record is mapped back first (``reconstruct``): ``Func`` -> the record's
``identifier`` (its last component), the ``arg_<i>`` of the parameter list -> the names of the record's
``parameters`` (token by token), the docstring -> the record's ``docstring`` (the original text: it
still has the function name where the release has ``Func``). The numbered locals have no original
name in the record: they become ``local_<i>``; and ``Func`` outside the docstring is mapped back to the
function name, so rule 1 is checked independently only inside docstrings. The normalisation of the
reconstruction must equal the released ``function`` byte for byte: the release is the original text
with substitutions, not re-tokenised, so no whitespace normalisation is needed.

Then each rule of ``csbench.attacks.advtest`` on small snippets, including the cases no released
record decides (marked "not decided by the release").
"""

from __future__ import annotations

import io
import json
import keyword
import re
import tokenize
from pathlib import Path

import pandas as pd
import pytest
from corpora import THESIS_SNIPPET, local_functions

from csbench.attacks import ATTACKS, RENAMING_COLUMN, parse_spec, run_attack
from csbench.attacks import advtest as A
from csbench.code.comments import remove_comments
from csbench.code.identifiers import IMPLEMENTED

RELEASE = Path("advtest") / "test_sample_normalized.jsonl"
_ARG = re.compile(r"\barg_(\d+)\b")
_DOC = "\0docstring\0"


# ------------------------------------------------------------------------------ the released records


@pytest.fixture(scope="module")
def records(shared_data: Path) -> list[dict]:
    path = shared_data / RELEASE
    if not path.is_file():
        pytest.skip(f"{path} is absent (CodeXGLUE AdvTest's released test records)")
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _names(text: str) -> list[str]:
    """The identifier tokens of the parenthesised list that opens ``text`` (Python's tokenizer)."""
    names, depth = [], 0
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
            if depth == 0:
                return names
        elif token.type == tokenize.NAME and not keyword.iskeyword(token.string):
            names.append(token.string)
    raise ValueError(f"no closed parameter list in {text[:80]!r}")


def reconstruct(record: dict) -> str:
    """The record's code with its original function name, parameter list and docstring (module docstring)."""
    name = record["identifier"].rsplit(".", 1)[-1]
    code = record["function"]
    assert "local_" not in code, "the names given to locals must be new"
    doc = record["docstring"]
    if doc:
        assert doc.replace(name, "Func") in code, "the released docstring is the original with Func"
        code = code.replace(doc.replace(name, "Func"), _DOC, 1)
    opening = re.match(r"\s*def\s+Func\s*", code)
    assert opening, code[:80]
    released, original = _names(code[opening.end() :]), _names(record["parameters"])
    assert len(released) == len(original), (released, original)
    params: dict[str, str] = {}
    for new, old in zip(released, original, strict=True):
        if new.startswith("arg_"):
            assert params.setdefault(new, old) == old, (new, old, params[new])
        else:
            assert new == old.replace(name, "Func"), (new, old)
    code = _ARG.sub(lambda m: params.get(m[0], f"local_{m[1]}"), code).replace("Func", name)
    return code.replace(_DOC, doc, 1)


def _changed_names(before: str, after: str) -> dict[str, str]:
    """old -> new of the identifier tokens (Python's tokenizer) that differ between two codes of the
    same token structure, first change of a name first (what the ``renaming`` record must hold)."""
    pairs = zip(
        tokenize.generate_tokens(io.StringIO(before).readline),
        tokenize.generate_tokens(io.StringIO(after).readline),
        strict=True,
    )
    changed: dict[str, str] = {}
    for old, new in pairs:
        assert old.type == new.type, (old, new)
        if old.type == tokenize.NAME and old.string != new.string:
            changed.setdefault(old.string, new.string)
    return changed


def test_reconstruction_restores_each_records_name_parameters_and_docstring(records):
    assert len(records) == 30
    for record in records:
        code = reconstruct(record)
        name = record["identifier"].rsplit(".", 1)[-1]
        assert code.lstrip().startswith(f"def {name}{record['parameters']}"), (record["identifier"], code[:120])
        assert record["docstring"] in code
        assert not _ARG.search(code)


def test_every_released_record_is_normalised_to_the_released_text(records):
    wrong = []
    for i, record in enumerate(records):
        got = A.normalize(reconstruct(record)).text
        if got != record["function"]:
            lines = zip(got.splitlines(), record["function"].splitlines(), strict=False)
            line = next((n for n, (a, b) in enumerate(lines, 1) if a != b), "past the shorter text's end")
            wrong.append(f"#{i} {record['identifier']}: first difference on line {line}")
    print(f"advtest_normalize: {len(records) - len(wrong)}/{len(records)} released records identical")
    assert not wrong, wrong


def test_the_attack_gives_the_released_code_without_comments_and_its_renaming(records):
    """``advtest_normalize`` in the pipeline: comment-free like every renaming attack on its own, so it
    must give ``remove_comments`` of the released text; its ``renaming`` record names each identifier
    whose text changed (checked against the tokens of reconstruction and release)."""
    codes = [reconstruct(record) for record in records]
    out, report = run_attack(
        "advtest_normalize", {"test": pd.DataFrame({"language": "python", "code": codes})}, progress=False
    )
    attacked = out["test"]
    wrong = [
        f"#{i} {record['identifier']}"
        for i, record in enumerate(records)
        if attacked["code"][i] != remove_comments(record["function"], "python")
    ]
    print(f"advtest_normalize (pipeline): {len(records) - len(wrong)}/{len(records)} released records identical")
    assert not wrong, wrong
    for i, (code, record) in enumerate(zip(codes, records, strict=True)):
        expected = _changed_names(code, record["function"])
        assert json.loads(attacked[RENAMING_COLUMN][i]) == expected, record["identifier"]
    assert report.failed == {}


def test_dropping_comments_in_the_same_pass_equals_removing_them_afterwards(records):
    for record in records:
        code = reconstruct(record)
        kept = A.normalize(code)
        assert A.normalize(code, keep_comments=False) == (remove_comments(kept.text, "python"), kept.renaming)


# ----------------------------------------------------------------------------- the rules, one by one


def normalized(code: str) -> str:
    return A.normalize(code).text


def test_rule_1_the_function_name_becomes_func_as_text_everywhere():
    code = '''def cos(x):
    """Generates cosine waves; see Cos and cos."""
    # cos again
    y = _sampled_cos_pulse(x, label="cos")
    return self.cos(y) + Cos
'''
    result = A.normalize(code)
    expected = '''def Func(arg_0):
    """Generates Funcine waves; see Cos and Func."""
    # Func again
    arg_1 = _sampled_Func_pulse(arg_0, label="Func")
    return self.Func(arg_1) + Cos
'''
    assert result.text == expected
    assert result.renaming == {"cos": "Func", "x": "arg_0", "y": "arg_1", "_sampled_cos_pulse": "_sampled_Func_pulse"}


def test_rule_1_a_method_and_its_recursive_call():
    code = "def get(self, key):\n        return self.get_all()[key] or get(key)\n"
    assert normalized(code) == "def Func(arg_0, arg_1):\n        return arg_0.Func_all()[arg_1] or Func(arg_1)\n"
    assert A.function_name(code) == "get"


def test_rule_1_is_plain_text_replacement_even_inside_keywords():
    # not decided by the release (no record has so short a name): str.replace also rewrites the `f` of `def`
    assert normalized("def f(a):\n    return a\n") == "deFunc Func(arg_0):\n    return arg_0\n"


def test_rule_2_every_identifier_of_the_parameter_lists_in_order():
    code = "def norm(self, a: int, *args, b=DEFAULT, c: str = None, d=os.sep, **kw) -> Result:\n    return a, int\n"
    assert normalized(code) == (
        "def Func(arg_0, arg_1: arg_2, *arg_3, arg_4=arg_5, arg_6: arg_7 = None, arg_8=arg_9.sep, **arg_11)"
        " -> Result:\n    return arg_1, arg_2\n"
    )  # os.sep numbers `sep` (arg_10): a name after a dot is numbered, never replaced


def test_rule_2_every_identifier_of_assignment_and_for_targets():
    code = """def norm(node):
    node.tag = node.tag.lower()
    Registry.items = []
    cache[key] = node
    x, (y, *z) = 1, (2, 3)
    total += 1
    for i, j in pairs:
        pass
    return tag, items, Registry, cache, key, total
"""
    expected = """def Func(arg_0):
    arg_0.tag = arg_0.tag.lower()
    arg_2.items = []
    arg_4[arg_5] = arg_0
    arg_6, (arg_7, *arg_8) = 1, (2, 3)
    arg_9 += 1
    for arg_10, arg_11 in pairs:
        pass
    return arg_1, arg_3, arg_2, arg_4, arg_5, arg_9
"""
    assert normalized(code) == expected


def test_rule_2_a_name_only_ever_after_a_dot_keeps_its_number_unused():
    # the released strip_xml_namespace: `root.tag = ...` numbers tag; the loop variable is arg_2
    code = "def strip(root):\n    root.tag = 1\n    for e in root:\n        strip(e)\n"
    result = A.normalize(code)
    assert result.text == "def Func(arg_0):\n    arg_0.tag = 1\n    for arg_2 in arg_0:\n        Func(arg_2)\n"
    assert result.renaming == {"strip": "Func", "root": "arg_0", "e": "arg_2"}


def test_rule_2_what_is_not_a_definition_site():
    code = """def norm(items):
    def helper(v):
        return v
    g = lambda q: q
    squares = [n * n for n in items]
    try:
        pass
    except ValueError as err:
        pass
    with open(items) as fh:
        pass
    import os
    if (m := 3):
        pass
    return helper, q, n, err, fh, os, m
"""
    expected = """def Func(arg_0):
    def helper(arg_1):
        return arg_1
    arg_2 = lambda q: q
    arg_3 = [n * n for n in arg_0]
    try:
        pass
    except ValueError as err:
        pass
    with open(arg_0) as fh:
        pass
    import os
    if (m := 3):
        pass
    return helper, q, n, err, fh, os, m
"""
    assert normalized(code) == expected  # (with ... as, walrus: not decided by the release)


def test_rule_2_a_name_is_numbered_at_its_first_definition_site():
    # not decided by the release: a name read before it is assigned takes the number of its assignment
    code = "def norm():\n    print(total)\n    x = 1\n    total = 2\n"
    assert normalized(code) == "def Func():\n    print(arg_1)\n    arg_0 = 1\n    arg_1 = 2\n"


def test_rule_2_an_annotated_assignment_numbers_its_target_not_its_annotation():
    # not decided by the release
    expected = "def Func():\n    arg_0: int = 5\n    return arg_0\n"
    assert normalized("def norm():\n    w: int = 5\n    return w\n") == expected


def test_rule_3_numbered_names_are_replaced_as_tokens_wherever_they_stand():
    code = """def norm(name, value):
    # name and value here
    other(name=name, value=value)
    global counter
    counter = [name for _ in value], lambda: name, [name for name in value], lambda value: value
    return f"{name}", "name", obj.name
"""
    expected = """def Func(arg_0, arg_1):
    # name and value here
    other(arg_0=arg_0, arg_1=arg_1)
    global arg_2
    arg_2 = [arg_0 for _ in arg_1], lambda: arg_0, [arg_0 for arg_0 in arg_1], lambda arg_1: arg_1
    return f"{name}", "name", obj.name
"""
    assert normalized(code) == expected


def test_rule_3_names_after_the_dots_of_imports_are_attributes_too():
    # not decided by the release
    code = "def norm(a, b, mod, c):\n    import a.b.c\n    from .mod import c\n    from ..mod.b import a\n"
    expected = "def Func(arg_0, arg_1, arg_2, arg_3):\n    import arg_0.b.c\n    from .mod import arg_3\n"
    assert normalized(code) == expected + "    from ..mod.b import arg_0\n"


def test_rule_4_the_layout_is_kept_byte_for_byte():
    code = "def norm( a ,\tb ) :\r\n\tc  =  a+b  # sum\r\n\treturn c\r\n"
    assert normalized(code) == "def Func( arg_0 ,\targ_1 ) :\r\n\targ_2  =  arg_0+arg_1  # sum\r\n\treturn arg_2\r\n"


def test_code_without_a_def_numbers_its_targets_and_has_no_func():
    assert A.function_name("x = 1\ny = x\n") is None
    assert normalized("x = 1\ny = x\n") == "arg_0 = 1\narg_1 = arg_0\n"


# -------------------------------------------------------------------------------- in the pipeline


def test_registered_python_only_and_beside_the_scoped_variant():
    exact, scoped = ATTACKS.get("advtest_normalize"), ATTACKS.get("advtest_normalize_scoped")
    assert exact.languages == ("python",) and exact.rewrite is not None and not exact.preserves_meaning
    assert scoped.languages == IMPLEMENTED and scoped.strategy is not None and scoped.preserves_meaning
    for name in ("advtest_normalize", "advtest_normalize_scoped"):
        assert re.fullmatch(r"[a-z_]+", name) and parse_spec(name)[0].attack.name == name


def test_other_languages_are_refused_naming_the_languages_and_the_scoped_variant():
    frame = pd.DataFrame({"language": ["python", "go"], "code": ["def f(a):\n    return a\n", "func f() {}\n"]})
    with pytest.raises(ValueError, match=r"implemented for python, not for go; advtest_normalize_scoped covers"):
        run_attack("advtest_normalize", {"test": frame}, progress=False)
    with pytest.raises(ValueError, match="defined for python only, not ruby"):
        A.rewrite("def f(a)\n  a\nend\n", "ruby", False)
    (code,) = run_attack("advtest_normalize_scoped", {"test": frame[1:]}, progress=False)[0]["test"]["code"]
    assert code.startswith("func Func(")


def test_the_scoped_variant_is_the_former_attack():
    frame = pd.DataFrame({"language": ["python"], "code": [THESIS_SNIPPET]})
    out, _ = run_attack("advtest_normalize_scoped", {"test": frame}, progress=False)
    code = out["test"]["code"][0]
    assert code.startswith("def Func(arg_0, arg_1):\n") and "arg_2 = arg_1 or _get_local_timezone()" in code
    assert "#handle" not in code


def test_on_its_own_the_attack_drops_comments_and_with_translation_it_keeps_them():
    code = 'def norm(a):\n    """Norm of a."""\n    # the norm\n    return norm(a)\n'
    frame = pd.DataFrame({"language": ["python"], "code": [code]})
    out, _ = run_attack("advtest_normalize", {"test": frame}, progress=False)
    assert out["test"]["code"][0] == "def Func(arg_0):\n    return Func(arg_0)\n"
    kept = 'def Func(arg_0):\n    """Norm of a."""\n    # the Func\n    return Func(arg_0)\n'
    assert A.rewrite(code, "python", True).text == kept  # (the `translation` composition's input)


def test_composition_records_the_renaming_from_the_original_names():
    code = "def norm(a, b):\n    c = a + b\n    return c\n"
    frame = pd.DataFrame({"language": ["python"], "code": [code]})
    out, _ = run_attack("advtest_normalize+ordered_id", {"test": frame}, progress=False)
    assert out["test"]["code"][0] == "def id1(id2, id3):\n    id4 = id2 + id3\n    return id4\n"
    assert json.loads(out["test"][RENAMING_COLUMN][0]) == {"norm": "id1", "a": "id2", "b": "id3", "c": "id4"}


def test_same_output_whatever_the_workers():
    codes = list(dict.fromkeys(local_functions("python", 300)))
    frame = pd.DataFrame({"language": "python", "code": codes})
    one, one_report = run_attack("advtest_normalize", {"test": frame}, workers=1, progress=False)
    two, two_report = run_attack("advtest_normalize", {"test": frame}, workers=2, progress=False)
    pd.testing.assert_frame_equal(one["test"], two["test"])
    assert one_report.as_dict()["per_language"] == two_report.as_dict()["per_language"]
    assert one_report.failed == {} and one_report.renamed["python"] == len(codes)
