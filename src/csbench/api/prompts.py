"""GeCS's zero-shot matching prompts (GenCodeSearchNet, Appendix A.3.2) as data, and the answer parser.

The prompts live in ``csbench/api/prompts/<name>.txt`` (package data), one per dataset family, each the
appendix text exactly, with its two placeholders written ``{language}`` (the appendix's "{Add the
programming language name}") and ``{input}`` (the appendix's "{Input}"); a file's one final newline is
not part of the prompt.

===========================  ==========================================================================
prompt                       text
===========================  ==========================================================================
``gecs-matching``            Appendix A.3.2 "Matching StatCodeSearch, CodeSearchNet and CodeSearchNet
                             AdvTest": a code *comment* and a ``{language}`` snippet
``gecs-cosqa``               Appendix A.3.2 "CoSQA": a *search query* and a Python snippet (no
                             ``{language}`` placeholder: the appendix writes "Python")
``gecs-cosqa-notebook``      the CoSQA prompt as GeCS's notebook ``experiments/GPT3.5_API_for_matching_
                             calculation.ipynb`` (commit 90a0473) sent it, for users who want the
                             request byte for byte: it differs from the appendix in small ways (curly
                             apostrophes ``code’s`` and ``’True’`` / ``’False’``, "matches the *search*
                             query", the format written ``'search query' '[CODESPLIT]' 'code'`` in single
                             quotes, and a colon with no space before the input: ``...'code':<input>``)
===========================  ==========================================================================

The appendix text is what csbench sends by default (the paper is the reference a reader checks); the
notebook's variant is there to choose with a model's ``prompt: gecs-cosqa-notebook``.

The input is GeCS's ``query [CODESPLIT] code`` (their ``input`` field: ``data[i]['input']`` appended to
the prompt; e.g. ``'Writes a Boolean to the stream . [CODESPLIT] def writeBoolean ( self , n ) : ...'``).
GeCS's CodeSearchNet sample files separate with ``[SEP]``, but the prompts declare ``[CODESPLIT]``,
so every pair is rendered with ``[CODESPLIT]``.

Which prompt a dataset gets: :func:`prompt_for_dataset` (the CoSQA family: ``gecs-cosqa``; every other
dataset, whose queries are code comments or docstrings: ``gecs-matching``), overridden by an ``llm``
model's ``prompt`` parameter. The language is named as GeCS writes it (:data:`LANGUAGE_NAMES`: Python, R,
Ruby, Go, Java, JavaScript, PHP).

No import beyond the standard library (no torch).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

PROMPT_DIR = "prompts"  # under the csbench.api package
PLACEHOLDERS = ("{language}", "{input}")
CODESPLIT = "[CODESPLIT]"

DEFAULT_PROMPT = "gecs-matching"
COSQA_PROMPT = "gecs-cosqa"
# dataset family (a dataset name's prefix up to its first "-", or the whole name) -> prompt name;
# datasets of no family listed get DEFAULT_PROMPT (comment / docstring queries, as GeCS's comment prompt)
DATASET_PROMPTS: dict[str, str] = {
    "cosqa": COSQA_PROMPT,  # cosqa, cosqa-retrieval, cosqa-webquerytest: web search queries
    "statcodesearch": DEFAULT_PROMPT,
    "advtest": DEFAULT_PROMPT,
    "csn": DEFAULT_PROMPT,  # csn-<lang>, csn-filtered-<lang>
    "gecs": DEFAULT_PROMPT,  # gecs-csn-<lang>: GeCS's CodeSearchNet samples
}

# csbench's language codes -> the names GeCS's prompts use ("a Python programming language code snippet")
LANGUAGE_NAMES: dict[str, str] = {
    "python": "Python",
    "r": "R",
    "ruby": "Ruby",
    "go": "Go",
    "java": "Java",
    "javascript": "JavaScript",
    "php": "PHP",
}


def prompt_names() -> list[str]:
    """The shipped prompts, by name (``<name>.txt`` under ``csbench/api/prompts``)."""
    folder = resources.files("csbench.api").joinpath(PROMPT_DIR)
    return sorted(entry.name[: -len(".txt")] for entry in folder.iterdir() if entry.name.endswith(".txt"))


@cache
def load_prompt(name: str) -> str:
    """The template of the shipped prompt ``name`` (its file less one final newline); a KeyError names
    the shipped ones."""
    names = prompt_names()
    if name not in names:
        raise KeyError(f"unknown prompt {name!r}; shipped prompts: {', '.join(names)}")
    text = resources.files("csbench.api").joinpath(PROMPT_DIR).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    return text[:-1] if text.endswith("\n") else text


def prompt_for_dataset(dataset: str | None, override: str | None = None) -> str:
    """The prompt name for ``dataset``: ``override`` (an ``llm`` model's ``prompt``) when given, else its
    family's (:data:`DATASET_PROMPTS`), else :data:`DEFAULT_PROMPT`. The name is checked."""
    if override is not None:
        load_prompt(override)
        return override
    if dataset is None:
        return DEFAULT_PROMPT
    family = dataset.split("-", 1)[0]
    return DATASET_PROMPTS.get(dataset, DATASET_PROMPTS.get(family, DEFAULT_PROMPT))


def language_name(language: str) -> str:
    """``language`` as GeCS names it (``python`` -> ``Python``); a language GeCS did not use is kept as
    given."""
    return LANGUAGE_NAMES.get(language.lower(), language)


def gecs_input(query: str, code: str) -> str:
    """GeCS's ``input`` field: ``query [CODESPLIT] code``."""
    return f"{query} {CODESPLIT} {code}"


_PLACEHOLDER = re.compile(r"\{language\}|\{input\}")


def render(prompt_name: str, language: str, query: str, code: str) -> str:
    """The prompt ``prompt_name`` for one pair: ``{language}`` -> GeCS's name of ``language``, ``{input}``
    -> ``query [CODESPLIT] code``. One pass over the template, so braces (or a literal ``{input}``) in the
    query or the code are left as they are."""
    values = {"{language}": language_name(language), "{input}": gecs_input(query, code)}
    return _PLACEHOLDER.sub(lambda match: values[match.group(0)], load_prompt(prompt_name))


# ------------------------------------------------------------------------------------------ answers
_QUOTES = "'\"`‘’“”«»"
_EDGE = f"{_QUOTES}*_"  # stripped from both ends of the answer and of its first word (markdown emphasis too)
_TRAILING = ".,;:!?)]}"  # stripped from the end of the first word
_LABELS = {"true": True, "false": False}


def parse_answer(text: str | None) -> bool | None:
    """A chat answer to GeCS's prompt as a decision: True (match), False (no match), None (unparseable).

    GeCS (``GPT3.5_Matching_Accuracy_Evaluation.ipynb``) mapped the exact strings ``'True'`` / ``'False'``
    and asked again, by hand, for every other answer. Here, with no one to ask again, the rule is:

    1. strip surrounding whitespace, then quotes (straight and curly), backticks, ``*`` and ``_`` from
       both ends (``'True'``, ``**False**``, ```` `True` ````);
    2. the first whitespace-delimited word, less those characters and trailing punctuation
       (``.,;:!?)]}``), compared case-insensitively, must be ``true`` or ``false``
       (``True.``, ``FALSE``, ``False, the comment describes...`` are parsed);
    3. the other label must not appear as a word anywhere in the answer (``True or False``, an echo of
       the instruction, is unparseable).

    Anything else is None: ``Yes`` / ``No`` included, on purpose. The prompt asks for 'True' or 'False';
    a model that answers otherwise did not follow it, and counting those answers as unparseable (reported
    as such) keeps that visible instead of guessing what "No, but..." or "Not sure" meant; GeCS did not map
    them either. ``Answer: True`` and ``The answer is False`` are None as well (first word).
    """
    if text is None:
        return None
    answer = text.strip().strip(_EDGE).strip()
    if not answer:
        return None
    first = answer.split(None, 1)[0].strip(_EDGE).rstrip(_TRAILING).strip(_EDGE).lower()
    if first not in _LABELS:
        return None
    other = "false" if first == "true" else "true"
    if re.search(rf"\b{other}\b", answer, flags=re.IGNORECASE):
        return None
    return _LABELS[first]
