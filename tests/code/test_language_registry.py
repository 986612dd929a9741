"""The language registry (``csbench.code.languages``): every language is one module defining
``LANGUAGE`` plus one registry line, and every engine reads the registry (nothing else lists the
languages). A toy language added the documented way works in extraction, comment removal and the
identifier analysis."""

from __future__ import annotations

import dataclasses
import re
import sys
import types

import pytest

from csbench.code import identifiers, languages, parsing
from csbench.code.comments import remove_comments
from csbench.code.extract import extract_functions
from csbench.code.languages import LANGUAGES, Documentation, Language, all_languages, language_spec


@pytest.mark.parametrize("name", LANGUAGES)
def test_each_registered_module_defines_its_language(name: str) -> None:
    spec = language_spec(name)
    assert isinstance(spec, Language) and spec.name == name and spec.grammar
    assert spec.extensions and all(ext.startswith(".") for ext in spec.extensions)
    assert spec.comment_types and spec.string_types and spec.line_comment_markers and spec.statement_lists
    assert spec.documentation.style in ("docstring", "doc_block", "line_block")
    assert callable(spec.definitions) and callable(spec.identifiers.analysis)
    assert spec.identifiers.is_valid_name("x") and not spec.identifiers.is_valid_name("1x")
    if spec.identifiers.query is not None:  # the query compiles against the grammar
        assert "function" in identifiers._analysis_query(name)[1]
    assert parsing.get_parser(name).parse(b"x").root_node is not None


def test_an_unknown_language_is_refused_with_the_registered_ones() -> None:
    with pytest.raises(NotImplementedError, match="supported: go, java, javascript, php, python, r, ruby"):
        language_spec("cobol")
    with pytest.raises(ValueError, match="unsupported language 'cobol'"):
        parsing.get_parser("cobol")
    with pytest.raises(ValueError, match="unsupported language 'cobol'"):
        identifiers.snippet_identifiers("x", "cobol")


def test_the_engines_read_the_registry() -> None:
    from csbench.datasets.local import SUFFIXES
    from csbench.models.dataflow import GRAMMARS

    specs = all_languages()
    assert tuple(specs) == LANGUAGES == parsing.LANGUAGES == identifiers.IMPLEMENTED
    assert {name: spec.extensions for name, spec in specs.items()} == SUFFIXES
    assert {name: spec.dataflow for name, spec in specs.items() if spec.dataflow is not None} == GRAMMARS
    assert set(GRAMMARS) == set(LANGUAGES) - {"r"}


TOY_SOURCE = """\
# Add two numbers and return
# their sum to the caller.
def add(first, second):
    total = first + second  # the sum
    return total
"""


@pytest.fixture
def toy_language(monkeypatch: pytest.MonkeyPatch) -> Language:
    """A language added as the docs say: a module ``csbench.code.languages.toy`` defining ``LANGUAGE``
    (Python's grammar and analysis, documented by ``#`` comment blocks above the definition) and one
    more name in ``LANGUAGES``."""
    python = language_spec("python")
    toy = dataclasses.replace(
        python,
        name="toy",
        grammar="python",
        extensions=(".toy",),
        documentation=Documentation(style="line_block", prefixes=("#",), line_marker=re.compile(r"^[ \t]*# ?")),
    )
    module = types.ModuleType("csbench.code.languages.toy")
    module.LANGUAGE = toy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(languages, "LANGUAGES", (*LANGUAGES, "toy"))
    language_spec.cache_clear()
    yield toy
    language_spec.cache_clear()


def test_a_new_language_is_one_module_and_one_registry_line(toy_language: Language) -> None:
    assert language_spec("toy") is toy_language
    [function] = extract_functions(TOY_SOURCE, "toy")
    assert function.func_name == "add" and function.language == "toy"
    assert function.query == "Add two numbers and return their sum to the caller."
    assert (
        "# the sum" not in function.code_no_comment
        and remove_comments(function.code, "toy") == function.code_no_comment
    )
    ids = identifiers.snippet_identifiers(function.code, "toy")
    assert ids == identifiers.snippet_identifiers(function.code, "python")
    assert ids.names == ("add", "first", "second", "total")
    renamed = identifiers.rename(function.code, "toy", {"total": "result"})
    assert "result = first + second" in renamed and "return result" in renamed
