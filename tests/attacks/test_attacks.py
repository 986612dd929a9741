"""Code attacks (issue #4): the thesis's worked examples, attack specs and composition, dataset-level
renamings, determinism, and property tests on real code in seven languages."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
from corpora import (
    THESIS_ORDERED_ID,
    THESIS_SNIPPET,
    AstRenamer,
    local_functions,
    shared_functions,
    thesis_renamed,
)

from csbench.attacks import ATTACKS, RENAMING_COLUMN, parse_spec, run_attack
from csbench.attacks import renaming as R
from csbench.code.comments import parse_snippet, remove_comments
from csbench.code.identifiers import IMPLEMENTED, rename, snippet_identifiers
from csbench.code.parsing import leaves
from csbench.registry import UnknownNameError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the specs the benchmark runs
from attack_specs import ADVTEST_NORMALIZE_SCOPED, RENAMINGS

THESIS = THESIS_SNIPPET  # section 3.3, verbatim, with its comment; THESIS_ORDERED_ID is 3.3.6


# Section 3.3.4 (3-shift snippet, listing joined where the PDF breaks lines),
# 3.3.5 (Most Popular with the thesis's dataset ranking), 3.3.7 (random permutation with k = 1),
# 3.3.3 (k-shift dataset with the donor identifiers user, reach, flow, difference, time_in_zone).
THESIS_K_SHIFT_SNIPPET_3 = thesis_renamed("s", "timezone", "tz", "_check_series_localize_t")
THESIS_MOST_POPULAR = thesis_renamed("name", "data", "i", "os")
THESIS_RANDOM_PERMUTATION_K1 = thesis_renamed("tz", "_check_series_localize_t", "s", "timezone")
THESIS_K_SHIFT_DATASET = thesis_renamed("user", "reach", "flow", "difference")
THESIS_RANKING = ["data", "i", "os", "name", "x"]  # section 3.3.5, the Python dataset's top five


def frame(codes: list[str], language: str = "python") -> pd.DataFrame:
    return pd.DataFrame({"id": [f"r{i}" for i in range(len(codes))], "language": language, "code": codes})


def attacked(spec: str, codes: list[str], language: str = "python", params: dict | None = None, **kw) -> list[str]:
    out, _ = run_attack(spec, {"test": frame(codes, language)}, params, progress=False, **kw)
    return out["test"]["code"].tolist()


# ------------------------------------------------------------------------------ thesis worked examples


def test_thesis_ordered_id():
    assert attacked("ordered_id", [THESIS]) == [THESIS_ORDERED_ID]


def test_thesis_k_shift_snippet_3():
    assert attacked("k_shift_snippet-3", [THESIS]) == [THESIS_K_SHIFT_SNIPPET_3]
    assert attacked("k_shift_snippet", [THESIS], params={"k_shift_snippet": {"k": 3}}) == [THESIS_K_SHIFT_SNIPPET_3]


def test_thesis_most_popular_with_the_thesis_ranking():
    assert attacked("most_popular", [THESIS], params={"most_popular": {"ranking": THESIS_RANKING}}) == [
        THESIS_MOST_POPULAR
    ]
    # the snippet's own ranking: s 4, then timezone and tz (2 each; the thesis's table says 3),
    # tied and ordered by first occurrence, then the function name
    no_comment = remove_comments(THESIS, "python")
    assert R.snippet_ranking(snippet_identifiers(no_comment, "python")) == [
        "s",
        "timezone",
        "tz",
        "_check_series_localize_t",
    ]


def test_thesis_random_permutation_shift_of_one():
    ids = snippet_identifiers(remove_comments(THESIS, "python"), "python")
    mapping = R.rotate(ids.names, 1)
    assert mapping == {
        "_check_series_localize_t": "tz",
        "s": "_check_series_localize_t",
        "timezone": "s",
        "tz": "timezone",
    }
    from csbench.code.identifiers import rename

    assert rename(remove_comments(THESIS, "python"), "python", mapping, ids) == THESIS_RANDOM_PERMUTATION_K1


def test_thesis_k_shift_dataset_takes_the_donors_names_in_order():
    donor = "def user(reach, flow):\n    difference = reach + flow\n"
    donor += "    time_in_zone = difference * 2\n    return time_in_zone\n"
    out = attacked("k_shift_dataset-1", [donor, THESIS])
    assert out[1] == THESIS_K_SHIFT_DATASET  # 'time_in_zone' is surplus and unused
    # the donor takes the thesis snippet's four names; its fifth keeps its own
    assert out[0].startswith("def _check_series_localize_t(s, timezone):\n    tz = s + timezone\n")
    assert "time_in_zone = tz * 2" in out[0]


def test_full_hash_is_role_prefix_plus_sha1_of_the_name():
    (code,) = attacked("full_hash", [THESIS])
    # the thesis prints `var1412349a` for tz: the first 8 hex digits of sha1("tz")
    assert "var1412349a82c226a911210073a6d89e7328a5d261 = arg" in code
    for role, name in [("fun", "_check_series_localize_t"), ("arg", "s"), ("arg", "timezone"), ("var", "tz")]:
        assert role + hashlib.sha1(name.encode()).hexdigest() in code
    assert "_get_local_timezone()" in code and "is_datetime64tz_dtype" in code  # free names stay


def test_advtest_normalize_scoped_follows_the_codexglue_naming_scheme():
    # (CodeXGLUE's own token-based advtest_normalize: tests/attacks/test_advtest_normalize.py)
    (code,) = attacked("advtest_normalize_scoped", [THESIS])
    assert code.startswith("def Func(arg_0, arg_1):\n")
    assert "arg_2 = arg_1 or _get_local_timezone()" in code
    (ruby,) = attacked(
        "advtest_normalize_scoped",
        ["def total(items)\n  sum = 0\n  items.each { |x| sum += x }\n  sum\nend\n"],
        "ruby",
    )
    assert ruby.startswith("def func(arg_0)")  # a Ruby method name cannot start upper-case


# -------------------------------------------------------------------------------- specs and params


def test_registry_has_every_spec_attack():
    assert set(ATTACKS.names()) == {
        "none",
        "no_comment",
        "translation",
        "full_hash",
        "k_shift_dataset",
        "k_shift_snippet",
        "random_permutation",
        "most_popular",
        "ordered_id",
        "advtest_normalize",
        "advtest_normalize_scoped",
    }


def test_spec_variants_params_and_composition():
    (c,) = parse_spec("k_shift_snippet-64")
    assert c.attack.name == "k_shift_snippet" and c.params == {"k": 64}
    (c,) = parse_spec("k_shift_dataset", {"k_shift_dataset": {"k": 7}})
    assert c.params == {"k": 7}
    (c,) = parse_spec("k_shift_dataset-64", {"k_shift_dataset": {"k": 7}})
    assert c.params == {"k": 64}  # the suffix wins
    names = [c.attack.name for c in parse_spec("ordered_id+translation")]
    assert names == ["ordered_id", "translation"]
    (c,) = parse_spec("random_permutation")
    assert c.params == {"seed": 0, "min_k": 1, "max_k": 20}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ordered_id-3", "takes no `-<integer>` variant"),
        ("none+ordered_id", "`none` does not compose"),
        ("no_comment+translation", "at most one of no_comment and translation"),
        ("ordered_id+ordered_id", "appears twice"),
        ("k_shift_snippet-x", "is not `name` or `name-<integer>`"),
        ("ordered_id+", "is not `name` or `name-<integer>`"),
    ],
)
def test_invalid_specs_are_refused(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_spec(spec, where="grid.attacks[0]")


def test_unknown_attack_suggests_the_close_name():
    with pytest.raises(UnknownNameError, match="Did you mean 'ordered_id'"):
        parse_spec("orderd_id+translation", where="grid.attacks[2]")


def test_invalid_parameters_are_refused():
    with pytest.raises(ValueError, match="min_k <= max_k"):
        parse_spec("random_permutation", {"random_permutation": {"min_k": 5, "max_k": 2}})


def test_unsupported_language_fails_before_any_work():
    with pytest.raises(ValueError, match="not for c"):
        run_attack("ordered_id", {"test": frame(["int f(int a) { return a; }"], "c")}, progress=False)


@pytest.mark.parametrize("language", ["c", "sql"])
def test_none_takes_any_language_and_leaves_its_code(language: str):
    """A BEIR dataset of a language csbench does not parse (CoIR's SQL, C++) runs clean: ``none`` is the
    code as it is, whatever the language (it was refused with the renaming attacks' languages)."""
    codes = ["int f(int a) { return a; }", "SELECT a FROM t WHERE b = 1"]
    out, report = run_attack("none", {"test": frame(codes, language)}, progress=False)
    assert out["test"]["code"].tolist() == codes
    assert report.as_dict()["per_language"][language]["changed"] == 0


# ------------------------------------------------------------------------- settling and capture


def test_ordered_id_never_captures_a_name_the_snippet_reads():
    code = "def f(a, b):\n    c = a + id3\n    return c * b\n"
    (out,) = attacked("ordered_id", [code])
    assert out == "def id1(id2, id3_1):\n    id4 = id2 + id3\n    return id4 * id3_1\n"


def test_borrowed_names_never_capture_and_kept_names_win():
    donor = "def g(os, c):\n    return os + c\n"  # donor names: g, os, c
    code = "import os\ndef f(a, b, c, d, e):\n    return os.path.join(a, b, c, d, e)\n"
    out = attacked("k_shift_dataset-1", [donor, code])
    # f->g, a->os (imported here: os_1), b->c (c keeps its own name: c_1), c d e keep theirs
    assert out[1] == "import os\ndef g(os_1, c_1, c, d, e):\n    return os.path.join(os_1, c_1, c, d, e)\n"


def test_most_popular_skips_ranked_names_the_snippet_reads():
    code = "def f(a):\n    return os.sep + a + a\n"
    (out,) = attacked("most_popular", [code], params={"most_popular": {"ranking": ["os", "data", "i"]}})
    assert out == "def i(data):\n    return os.sep + data + data\n"


def test_most_popular_dataset_ranking_counts_occurrences_over_the_dataset():
    codes = [
        "def f(x, y):\n    return x + x + y\n",  # x 3, y 2, f 1
        "def g(y):\n    return y\n",  # y 2, g 1
        "def h(z, w):\n    return z + w + w\n",  # z 2, w 3, h 1
    ]
    items = [R.Item("python", c, snippet_identifiers(c, "python")) for c in codes]
    assert R.frequency_ranking(items)["python"] == ["y", "x", "w", "z", "f", "g", "h"]
    out = attacked("most_popular", codes)
    # snippet ranks: x 3, y 2, f 1 -> the dataset's y, x, w
    assert out[0] == "def w(y, x):\n    return y + y + x\n"
    # w 3, z 2, h 1 -> y, x, w
    assert out[2] == "def w(x, y):\n    return x + y + y\n"


# ---------------------------------------------------------------------- dataset order, splits, record


def test_same_function_in_test_and_codebase_is_attacked_identically():
    codes = [f"def f{i}(a{i}, b):\n    c = a{i} * b + {i}\n    return c\n" for i in range(30)]
    splits = {"train": frame(codes[:20]), "test": frame(codes[20:25]), "codebase": frame(codes[20:][::-1])}
    for spec in ("k_shift_dataset-3", "random_permutation", "most_popular"):
        out, _ = run_attack(spec, splits, progress=False)
        test = dict(zip(splits["test"]["code"], out["test"]["code"], strict=True))
        pool = dict(zip(splits["codebase"]["code"], out["codebase"]["code"], strict=True))
        assert all(pool[code] == new for code, new in test.items()), spec


def test_k_shift_dataset_is_cyclic_over_the_dataset_in_split_order():
    codes = [f"def f{i}(a{i}):\n    return a{i}\n" for i in range(5)]
    out, _ = run_attack("k_shift_dataset-2", {"train": frame(codes[:3]), "test": frame(codes[3:])}, progress=False)
    # snippet 0 takes the names of snippet 5 - 2 = 3 (the first test record)
    assert out["train"]["code"][0] == "def f3(a3):\n    return a3\n"
    assert out["test"]["code"].tolist() == ["def f1(a1):\n    return a1\n", "def f2(a2):\n    return a2\n"]


def test_every_record_keeps_its_renaming():
    out, report = run_attack("ordered_id", {"test": frame([THESIS, "x = 1\n"])}, progress=False)
    maps = [json.loads(text) for text in out["test"][RENAMING_COLUMN]]
    assert maps[0] == {"_check_series_localize_t": "id1", "s": "id2", "timezone": "id3", "tz": "id4"}
    assert list(maps[0]) == ["_check_series_localize_t", "s", "timezone", "tz"]  # first-occurrence order
    assert report.as_dict()["per_language"]["python"]["renamed"] == 2  # `x` at module level is defined too
    out, _ = run_attack("no_comment", {"test": frame([THESIS])}, progress=False)
    assert out["test"][RENAMING_COLUMN].tolist() == ["{}"]
    assert list(out["test"].columns) == ["id", "language", "code", RENAMING_COLUMN]


def test_the_renaming_column_is_exactly_json_dumps():
    """The column is written by one reused C encoder (``attacks._RENAMING_JSON``), not ``json.dumps``:
    both must give the same text, non-ASCII names and names that need escaping included."""
    from csbench.attacks.engine import _RENAMING_JSON

    mappings = [{}, {"a": "b"}, {"größe": "id1", "名前": "id2"}, {'q"uote': "back\\slash", "tab\t": "nl\n"}]
    assert [_RENAMING_JSON(m) for m in mappings] == [json.dumps(m, ensure_ascii=False) for m in mappings]
    code = "def größe(名前):\n    return 名前\n"
    out, _ = run_attack("ordered_id", {"test": frame([code])}, progress=False)
    assert out["test"][RENAMING_COLUMN][0] == json.dumps({"größe": "id1", "名前": "id2"}, ensure_ascii=False)


def test_php_renaming_is_recorded_without_the_dollar():
    code = "function add($a, $b) {\n    $sum = $a + $b; // total\n    return $sum;\n}\n"
    out, _ = run_attack("ordered_id", {"test": frame([code], "php")}, progress=False)
    assert out["test"]["code"][0] == "function id1($id2, $id3) {\n    $id4 = $id2 + $id3;\n    return $id4;\n}\n"
    assert json.loads(out["test"][RENAMING_COLUMN][0]) == {"add": "id1", "a": "id2", "b": "id3", "sum": "id4"}


def test_composition_of_two_renamings_records_old_to_final():
    out, _ = run_attack("ordered_id+k_shift_snippet-1", {"test": frame([THESIS])}, progress=False)
    mapping = json.loads(out["test"][RENAMING_COLUMN][0])
    assert mapping == {"_check_series_localize_t": "id4", "s": "id1", "timezone": "id2", "tz": "id3"}
    assert out["test"]["code"][0].startswith("def id4(id1, id2):\n")


@pytest.mark.skipif(shutil.which("apertium") is None, reason="apertium is not installed (scripts/setup.sh)")
def test_ordered_id_plus_translation_renames_and_keeps_translated_comments():
    out, _ = run_attack("ordered_id+translation", {"test": frame([THESIS])}, progress=False)
    code = out["test"]["code"][0]
    assert code.startswith("def id1(id2, id3):\n")
    comment = [line for line in code.splitlines() if line.strip().startswith("#")]
    assert len(comment) == 1 and "handle nested time case" not in comment[0] and "tiempo" in comment[0]
    without_comment = "\n".join(line for line in code.splitlines() if not line.strip().startswith("#")) + "\n"
    assert without_comment == THESIS_ORDERED_ID


def test_analysis_failure_keeps_the_comment_free_code_and_is_reported(monkeypatch):
    real = R.analyse

    def flaky(code, language, keep_comments=False, snippet=None):
        if "boom" in code:
            raise RecursionError("maximum recursion depth exceeded")
        return real(code, language, keep_comments, snippet=snippet)

    monkeypatch.setattr(R, "analyse", flaky)
    out, report = run_attack(
        "ordered_id", {"test": frame(["def boom(a):  # c\n    return a\n", THESIS])}, progress=False
    )
    assert out["test"]["code"][0] == "def boom(a):\n    return a\n"
    assert out["test"][RENAMING_COLUMN][0] == "{}"
    assert out["test"]["code"][1] == THESIS_ORDERED_ID
    summary = report.as_dict()
    assert summary["per_language"]["python"]["analysis_failed"] == 1
    assert summary["failures"][0]["error"].startswith("RecursionError")


# ------------------------------------------------------------------------ real code, seven languages

# (advtest_normalize does not preserve meaning, on purpose: see its own tests)
RENAMING_SPECS = [*RENAMINGS, ADVTEST_NORMALIZE_SCOPED]
LIMITS = {"python": 700, "php": 400, "go": 400, "javascript": 400, "java": 400, "ruby": 400, "r": 400}


def _corpus(language: str) -> list[str]:
    codes = local_functions(language, LIMITS[language]) + shared_functions(language)
    return list(dict.fromkeys(codes))


@pytest.fixture(scope="module", params=IMPLEMENTED)
def corpus(request) -> tuple[str, list[str], list[str]]:
    """(language, codes, their no_comment versions)."""
    language = request.param
    codes = _corpus(language)
    return language, codes, [remove_comments(code, language) for code in codes]


def test_one_parse_analysis_equals_analysis_of_the_comment_free_code(corpus):
    """The fused path (one parse; comment edits and renaming spliced into the original code at once)
    gives what the plain two passes give: identifiers of ``remove_comments(code)`` and
    ``rename(remove_comments(code), ...)``."""
    language, codes, stripped = corpus
    differ = []
    for code, plain in zip(codes, stripped, strict=True):
        analysis = R.analyse(code, language)
        ids = snippet_identifiers(plain, language)
        fused = analysis.identifiers
        same = analysis.text == plain and analysis.shifted_identifiers() == ids
        same = same and (fused.names, fused.roles, fused.reserved) == (ids.names, ids.roles, ids.reserved)
        same = same and all(len(fused.occurrences[n]) == len(ids.occurrences[n]) for n in ids.names)
        if same:
            for mapping in (
                R.settle(ids, language, {name: f"id{j}" for j, name in enumerate(ids.names, 1)}),
                R.settle(ids, language, R.rotate(ids.names, 1)),
            ):
                same = same and analysis.renamed(mapping) == rename(plain, language, mapping, ids)
        if not same:
            differ.append(code[:80])
    print(f"{language}: one-parse analysis equals two-pass on {len(codes) - len(differ)}/{len(codes)}")
    assert len(differ) <= 0.005 * len(codes), differ[:3]


def test_fused_renaming_of_the_thesis_snippet_removes_the_comment_once():
    analysis = R.analyse(THESIS, "python")
    assert analysis.edits and "#handle" in analysis.data.decode("utf-8")
    mapping = R.settle(analysis.identifiers, "python", {"s": "id2"})
    assert analysis.renamed(mapping) == rename(remove_comments(THESIS, "python"), "python", mapping)
    with pytest.raises(ValueError, match="capture"):
        analysis.renamed({"s": "is_datetime64tz_dtype"})


def _shape(code: str, language: str) -> tuple[bool, list[str]]:
    tree = parse_snippet(code, language).tree.root_node
    return tree.has_error, [leaf.type for leaf in leaves(tree)]


def test_renaming_attacks_preserve_syntax_and_are_one_to_one_on_real_code(corpus):
    language, codes, stripped = corpus
    clean = [i for i, plain in enumerate(stripped) if not _shape(plain, language)[0]]
    assert len(clean) >= 100, f"only {len(clean)} clean {language} snippets"
    shapes = {i: _shape(stripped[i], language)[1] for i in clean}
    before = {i: snippet_identifiers(stripped[i], language) for i in clean}
    for spec in RENAMING_SPECS:
        out, report = run_attack(spec, {"test": frame(codes, language)}, progress=False)
        bad = []
        for i in clean:
            new_code = out["test"]["code"][i]
            mapping = json.loads(out["test"][RENAMING_COLUMN][i])
            ids = before[i]
            assert list(mapping) == list(ids.names), (spec, codes[i][:80])
            finals = list(mapping.values())
            assert len(set(finals)) == len(finals), (spec, "not one-to-one", mapping)
            moved = {new for old, new in mapping.items() if new != old}
            assert not moved & ids.reserved, (spec, "captures", moved & ids.reserved)
            error, shape = _shape(new_code, language)
            again = snippet_identifiers(new_code, language)
            if error or shape != shapes[i] or again.names != tuple(finals):
                bad.append((codes[i][:80], error, shape == shapes[i], again.names[:4], finals[:4]))
        share = 1 - len(bad) / len(clean)
        print(f"{language} {spec}: {len(clean) - len(bad)}/{len(clean)} clean snippets stay clean and consistent")
        assert share >= 0.995, (spec, bad[:3])
        assert report.failed.get(language, 0) == 0, report.failures


def test_python_attacks_compile_and_equal_no_comment_up_to_renaming():
    codes = _corpus("python")
    stripped = [remove_comments(code, "python") for code in codes]
    clean = []
    for i, plain in enumerate(stripped):
        try:
            clean.append((i, ast.dump(ast.parse(plain))))
        except SyntaxError:
            continue
    for spec in RENAMING_SPECS:
        out, _ = run_attack(spec, {"test": frame(codes)}, progress=False)
        bad = []
        for i, _dump in clean:
            new_code = out["test"]["code"][i]
            mapping = json.loads(out["test"][RENAMING_COLUMN][i])
            try:
                compile(new_code, "<attacked>", "exec")
                tree = ast.parse(new_code)
            except SyntaxError as err:
                bad.append((codes[i][:80], str(err)))
                continue
            # canonical renaming: rename the no_comment AST by the mapping and compare the dumps
            if ast.dump(tree) != ast.dump(AstRenamer(mapping).visit(ast.parse(stripped[i]))):
                bad.append((codes[i][:80], "ast differs"))
        print(f"python {spec}: {len(clean) - len(bad)}/{len(clean)} compile and equal no_comment up to renaming")
        assert not bad, (spec, bad[:3])


@pytest.mark.parametrize(
    "spec",
    # renamings the workers finish on their own, dataset-wide ones, and a composition of both kinds
    ["random_permutation", "k_shift_dataset-3", "most_popular", "full_hash", "ordered_id+k_shift_dataset-3"],
)
def test_same_seed_gives_identical_output_whatever_the_workers(spec):
    codes = list(dict.fromkeys(local_functions("python", 300)))
    splits = {"train": frame(codes[:200]), "test": frame(codes[200:])}
    one, one_report = run_attack(spec, splits, workers=1, progress=False)
    two, two_report = run_attack(spec, splits, workers=2, progress=False)
    for split in splits:
        pd.testing.assert_frame_equal(one[split], two[split])
    assert one_report.as_dict()["per_language"] == two_report.as_dict()["per_language"]
    if spec == "random_permutation":
        other, _ = run_attack(spec, splits, {"random_permutation": {"seed": 1}}, progress=False)
        assert not other["test"]["code"].equals(one["test"]["code"])


def test_random_permutation_draws_k_uniformly_from_1_to_20():
    draws = [R.random_shift(0, "python", f"def f{i}(): pass") for i in range(20_000)]
    assert set(draws) == set(range(1, 21))
    counts = pd.Series(draws).value_counts()
    assert counts.min() > 850 and counts.max() < 1150  # 1,000 expected each; 5 sigma is about 150
    assert R.random_shift(0, "python", "x") == R.random_shift(0, "python", "x")
    assert [R.random_shift(s, "python", "x") for s in range(50)] != [R.random_shift(0, "python", "x")] * 50
