"""What a summarization model is fed: the source text made from a record's code, and the target text
made from its reference summary, as CodeXGLUE code-to-text feeds them.

CodeXGLUE's ``Code-Text/code-to-text/code/run.py`` (``read_examples``, microsoft/CodeXGLUE commit
ac74a62802a0dd159b3258c78a2df8ad36cdf2b9, file last changed in bac029c) reads each jsonl line as::

    code = ' '.join(js['code_tokens']).replace('\\n', ' ');  code = ' '.join(code.strip().split())
    nl = ' '.join(js['docstring_tokens']).replace('\\n', ''); nl = ' '.join(nl.strip().split())

A prepared record of ``csn-filtered-<lang>`` (and ``csn-<lang>``) holds ``query = ' '.join(docstring_tokens)``
(stripped) and ``code`` = the release's ``code`` field, the function as written (line breaks,
indentation, comments), because attacks parse and rewrite it. Hence:

- target: :func:`codexglue_target` of the record's ``query`` is CodeXGLUE's target exactly (the same
  string for every token list, :func:`codexglue_target_from_tokens`; on the 2,661 records of the
  Ruby test and valid files, all equal);
- source: CodeXGLUE's source is made from ``code_tokens``, which a prepared record does not keep (and
  an attacked code has none). :func:`codexglue_source` re-tokenises the (attacked) code the way
  CodeSearchNet's ``function_parser`` made ``code_tokens``: tree-sitter leaves in order, string
  literals and comments whole, a Python function's docstring left out, joined as ``run.py`` joins
  them. It reproduces ``run.py``'s source for 2,253 of the 2,661 Ruby records (84.7 %) and for 93 of
  the 100 Python records of AdvTest's training sample; the rest differ where the 2019 grammars split
  differently (Ruby regex literals ``/\\./`` into ``/ \\. /``, ``&block`` / ``*args`` parameters,
  Python's ``**`` into ``* *``). Applied to every attack's code alike, it changes the input's layout,
  never what an attack did to it. Exactly CodeXGLUE's source needs the release's ``code_tokens``
  (:func:`codexglue_source_from_tokens`), which exist for unattacked code only.

``source_format`` ``raw`` feeds the code as it is (TL-CodeSum's records are its released tokens
already; Funcom's the raw methods); ``codexglue`` feeds :func:`codexglue_source`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tree_sitter import Node

from csbench.code.comments import parse_snippet
from csbench.code.languages import language_spec
from csbench.code.parsing import LANGUAGES

SOURCE_FORMATS = ("raw", "codexglue")


def _collapse(text: str) -> str:
    return " ".join(text.strip().split())


def codexglue_source_from_tokens(code_tokens: Sequence[str]) -> str:
    """``run.py``'s source from a jsonl line's ``code_tokens``."""
    return _collapse(" ".join(code_tokens).replace("\n", " "))


def codexglue_target_from_tokens(docstring_tokens: Sequence[str]) -> str:
    """``run.py``'s target from a jsonl line's ``docstring_tokens``."""
    return _collapse(" ".join(docstring_tokens).replace("\n", ""))


def codexglue_target(summary: str) -> str:
    """``run.py``'s target from a prepared record's ``query`` (``' '.join(docstring_tokens)``, stripped):
    equal to :func:`codexglue_target_from_tokens` of those tokens; other text gets the same treatment
    (line breaks removed, white space collapsed)."""
    return _collapse(summary.replace("\n", ""))


def source_tokens(code: str, language: str) -> list[str]:
    """The tokens of ``code`` as CodeSearchNet's ``code_tokens``: tree-sitter leaves in document order,
    string literals and comments whole, a Python function's own docstring left out (of the wrapper a
    lone method needs, nothing). A language without a parser gives its white-space separated words."""
    if language not in LANGUAGES:
        return code.split()
    snippet = parse_snippet(code, language)
    spec = language_spec(language)
    whole = spec.string_types | spec.comment_types
    lo, hi = snippet.offset, snippet.end
    tokens: list[str] = []
    skip = _python_docstring(snippet.tree.root_node) if language == "python" else None
    stack = [snippet.tree.root_node]
    while stack:
        node = stack.pop()
        if skip is not None and node == skip:
            continue
        if node.child_count == 0 or node.type in whole:
            start, end = node.start_byte, node.end_byte
            text = snippet.data[max(start, lo) - lo : max(min(end, hi), lo) - lo]
            if start >= lo and end <= hi and text.strip() and not node.is_missing and node.type != "line_continuation":
                tokens.append(text.decode("utf-8", "replace"))
            continue
        stack.extend(reversed(node.children))
    return tokens


def _python_docstring(root: Node) -> Node | None:
    """The docstring statement of the first function in a Python tree (function_parser excludes it from
    ``code_tokens``; a nested function's docstring and other bare strings stay)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "function_definition":
            body = node.child_by_field_name("body")
            first = body.named_children[0] if body is not None and body.named_children else None
            statement = first is not None and first.type == "expression_statement" and first.named_child_count == 1
            if statement and first.named_children[0].type in ("string", "concatenated_string"):
                return first
            return None
        stack.extend(reversed(node.children))
    return None


def codexglue_source(code: str, language: str) -> str:
    """CodeXGLUE's source text for (possibly attacked) ``code``: :func:`source_tokens` joined as
    ``run.py`` joins ``code_tokens``."""
    return codexglue_source_from_tokens(source_tokens(code, language))


def source_text(code: str, language: str, source_format: str) -> str:
    """The text a model is fed for ``code`` in ``source_format`` (one of :data:`SOURCE_FORMATS`)."""
    if source_format == "raw":
        return code
    if source_format == "codexglue":
        return codexglue_source(code, language)
    raise ValueError(f"source_format must be one of {', '.join(SOURCE_FORMATS)}, not {source_format!r}")
