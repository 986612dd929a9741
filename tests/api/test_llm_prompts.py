"""GeCS's matching prompts as shipped data (csbench.api.prompts): equal to the paper's Appendix A.3.2,
rendered with GeCS's ``query [CODESPLIT] code`` input; and the answer parser."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from csbench.api import prompts
from csbench.api.prompts import gecs_input, language_name, load_prompt, parse_answer, prompt_for_dataset, render

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
PAPER = SHARED / "papers" / "gencodesearchnet.txt"
DATA = SHARED / "data"

# The appendix's placeholders, which the shipped files write {language} and {input}
APPENDIX_PLACEHOLDERS = {"{language}": "{Add the programming language name}", "{input}": "{Input}"}
APPENDIX_SECTIONS = {  # shipped prompt -> the heading of its appendix section
    "gecs-matching": "## A.3.2 Matching StatCodeSearch, CodeSearchNet and CodeSearchNet AdvTest",
    "gecs-cosqa": "## CoSQA",
}
# The prompt string of GeCS's experiments/GPT3.5_API_for_matching_calculation.ipynb (drndr/gencodesearchnet,
# commit 90a0473), to which the notebook appends data[i]['input']
NOTEBOOK_COSQA = (
    "Given a search query and a Python programming language code snippet, determine if the query accurately "
    "represents the code’s function. Respond with ’True’ if the code matches the search query and ’False’ if it "
    "does not. The input format is defined as 'search query' '[CODESPLIT]' 'code':"
)


def appendix_prompt(heading: str) -> str:
    """The paragraph after ``heading`` in the paper's text."""
    lines = PAPER.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    return next(line for line in lines[start:] if line.strip()).strip()


def as_appendix(template: str) -> str:
    for ours, theirs in APPENDIX_PLACEHOLDERS.items():
        template = template.replace(ours, theirs)
    return template


def test_shipped_prompts() -> None:
    assert prompts.prompt_names() == ["gecs-cosqa", "gecs-cosqa-notebook", "gecs-matching"]
    for name in prompts.prompt_names():
        template = load_prompt(name)
        assert template.endswith("{input}"), name  # a cut prompt loses only the end of the code
        assert template.count("{input}") == 1 and template.count("{language}") <= 1, name
        assert not template.endswith("\n") and "\n" not in template, name
    assert "{language}" not in load_prompt("gecs-cosqa")  # the appendix writes "Python"
    assert "{language}" in load_prompt("gecs-matching")


@pytest.mark.skipif(not PAPER.is_file(), reason=f"the GeCS paper's text is not at {PAPER}")
@pytest.mark.parametrize("name", sorted(APPENDIX_SECTIONS))
def test_prompt_equals_the_appendix(name: str) -> None:
    assert as_appendix(load_prompt(name)) == appendix_prompt(APPENDIX_SECTIONS[name])


def test_notebook_variant_equals_the_notebook() -> None:
    assert load_prompt("gecs-cosqa-notebook") == NOTEBOOK_COSQA + "{input}"
    rendered = render("gecs-cosqa-notebook", "python", "python sort dict", "def f(d): return sorted(d)")
    assert rendered == NOTEBOOK_COSQA + "python sort dict [CODESPLIT] def f(d): return sorted(d)"


def test_prompt_files_are_package_data() -> None:
    """Every prompt file is read through importlib.resources and covered by pyproject's package-data
    (else a wheel would ship csbench.api without its prompts)."""
    folder = resources.files("csbench.api").joinpath("prompts")
    files = sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".txt"))
    assert files == sorted(f"{name}.txt" for name in prompts.prompt_names())
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["csbench"]
    for file in files:
        assert any(fnmatch.fnmatch(f"api/prompts/{file}", pattern) for pattern in patterns), (
            f"pyproject.toml [tool.setuptools.package-data] csbench does not ship api/prompts/{file}"
        )


def test_prompt_for_dataset() -> None:
    from csbench.datasets import DATASETS

    names = list(DATASETS)
    assert {"cosqa", "statcodesearch", "advtest", "csn-ruby", "gecs-csn-go"} <= set(names)
    for name in names:
        expected = "gecs-cosqa" if name.startswith("cosqa") else "gecs-matching"
        assert prompt_for_dataset(name) == expected, name
    assert prompt_for_dataset(None) == "gecs-matching"
    assert prompt_for_dataset("statcodesearch", "gecs-cosqa-notebook") == "gecs-cosqa-notebook"
    with pytest.raises(KeyError, match="gecs-matching"):
        prompt_for_dataset("cosqa", "gecs-cosqa-v2")


def test_language_names_as_gecs_writes_them() -> None:
    assert [language_name(code) for code in ("python", "r", "ruby", "go", "java", "javascript", "php")] == [
        "Python", "R", "Ruby", "Go", "Java", "JavaScript", "PHP"
    ]
    assert language_name("kotlin") == "kotlin"  # a language GeCS did not use: as given


def test_render() -> None:
    rendered = render("gecs-matching", "r", "fit a {model}", 'lm(y ~ x, data = d) # "{input}" {language}')
    expected = load_prompt("gecs-matching").replace("{language}", "R").replace(
        "{input}", 'fit a {model} [CODESPLIT] lm(y ~ x, data = d) # "{input}" {language}'
    )
    assert rendered == expected  # one pass: the braces of the query and the code stay as they are
    assert "a R programming language code snippet" in rendered  # the appendix's grammar, kept
    cosqa = render("gecs-cosqa", "python", "python read file", "def f(p): return open(p).read()")
    assert cosqa.endswith('"code". python read file [CODESPLIT] def f(p): return open(p).read()')


@pytest.mark.skipif(not DATA.is_dir(), reason=f"the shared GeCS samples are not at {DATA}")
def test_input_is_gecs_input_field() -> None:
    """GeCS's ``input`` field is ``query [CODESPLIT] code``: splitting a released line and rendering it
    gives the line's input back, inside the appendix prompt."""
    lines = (DATA / "statcodesearch" / "sample_gecs_format.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        record = json.loads(line)
        query, code = record["input"].split(" [CODESPLIT] ", 1)
        assert gecs_input(query, code) == record["input"]
        rendered = render("gecs-matching", "r", query, code)
        assert rendered == load_prompt("gecs-matching").replace("{language}", "R").replace("{input}", record["input"])


@pytest.mark.parametrize(
    ("answer", "parsed"),
    [
        ("True", True),
        ("False", False),
        (" True", True),  # what a tokenizer's leading space leaves
        ("False.", False),
        ("True\n", True),
        ("'True'", True),
        ("’False’", False),  # the notebook's own quotes, echoed back
        ('"True."', True),
        ("**False**", False),
        ("`True`", True),
        ("TRUE", True),
        ("false", False),
        ("True, the comment accurately describes", True),
        ("False. The code computes a mean, not a", False),
        ("True\n\nExplanation: the code fits a", True),
        ("True (the code matches the comment)", True),
        # unparseable: None
        ("", None),
        ("   ", None),
        ("True or False", None),  # an echo of the instruction
        ("True/False", None),
        ("Yes", None),  # deliberately not mapped: the prompt asks for True / False
        ("No, the code does not", None),
        ("Answer: True", None),
        ("The answer is False", None),
        ("Not true", None),
        ("Truely", None),
        ("I'm sorry, but I cannot", None),
        ("�r�W���V", None),  # a random model's bytes
    ],
)
def test_parse_answer(answer: str, parsed: bool | None) -> None:
    assert parse_answer(answer) is parsed


def test_parse_answer_of_none() -> None:
    assert parse_answer(None) is None


def test_prompts_module_imports_no_torch() -> None:
    source = Path(prompts.__file__).read_text(encoding="utf-8")
    assert not re.search(r"^\s*(import|from)\s+(torch|transformers|numpy)\b", source, flags=re.MULTILINE)
