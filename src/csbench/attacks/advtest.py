"""CodeXGLUE AdvTest's normalisation of Python functions: the ``advtest_normalize`` attack.

CodeXGLUE released AdvTest's normalised valid and test code (``test_code.jsonl`` in
``Text-Code/NL-code-search-Adv/dataset.zip``) but not the program that normalised it. The rules
below are inferred from the released records (``../shared/data/advtest/test_sample_normalized.jsonl``:
normalised ``function``, original ``identifier``, ``parameters`` and ``docstring``) and from the
original functions of some of them; ``tests/attacks/test_advtest_normalize.py`` normalises every released
record again and compares the text exactly. The normalisation works on the tokens of the code, not
on its scopes (``advtest_normalize_scoped`` in ``csbench.attacks.renaming`` is the scope-aware,
meaning-preserving variant for all seven languages).

Rules
-----
1. **Function name -> ``Func``, as text.** Every occurrence of the function's name in the code is
   replaced by ``Func``, wherever it is: the ``def`` line, recursive calls, ``self.name`` and
   ``module.name`` attributes, *and inside other identifiers, strings, comments and the docstring*
   (``str.replace``, case-sensitive): ``def cos`` turns ``_sampled_cos_pulse`` into
   ``_sampled_Func_pulse`` and "Generates cosine wave" into "Generates Funcine wave"; ``def init``
   turns "could not initialize" into "could not Funcialize". The name is that of the snippet's first
   (outermost) ``def``; the record's ``identifier`` (``Class.method``) names the same method. Being
   plain text replacement, it also rewrites keywords that hold a short name (``def f`` gives
   ``deFunc Func``).
2. **Numbered names.** The identifiers of the *definition sites*, in document order, are numbered
   from 0 in order of first appearance (after rule 1). Definition sites are
   - the parameter list of every ``def`` in the snippet (the function's and nested functions'): every
     identifier in it -- parameter names including ``self`` / ``cls``, ``*args`` and ``**kwargs``,
     *and the names in annotations and default values* (``duration: int`` numbers ``int``,
     ``base_level=DEFAULT_LEVEL`` numbers ``DEFAULT_LEVEL``); the return annotation is not in it;
   - the target of an assignment ``=`` (not its annotation), of an augmented assignment ``+=`` and of a
     ``for`` statement, anywhere in the snippet (nested functions and class bodies included): every
     identifier in it, attribute names and subscript indices included
     (``root.tag = ...`` numbers ``tag``; ``PythonFile.Class = ...`` numbers the global class
     ``PythonFile`` and ``Class``; ``registry[key] = f`` numbers the global ``registry``).
   Not definition sites: the names of the function, of nested functions and classes, lambda
   parameters, comprehension variables, ``except ... as``, ``with ... as``, imports, ``global``,
   walrus targets.
3. **Replacement by token.** Every identifier token whose text is a numbered name becomes
   ``arg_<i>``, wherever it stands: bare uses (of globals too), call keywords ``f(name=name)`` (of
   calls to anything), nested functions, lambdas and comprehensions; except identifiers after a dot
   (attribute names ``x.name``, ``import a.name``, ``from .name import x``) and text inside strings
   (f-string interpolations included) and comments. A numbered name that only ever appears after a
   dot (``tag`` above) keeps its number unused: the released records skip it (``arg_0``, ``arg_2``).
4. **Layout.** Everything else is the original text byte for byte: whitespace, line breaks, comments
   and the docstring (apart from rule 1); nothing is re-tokenised.

Nothing is checked for capture or meaning: ``Func`` or ``arg_<i>`` may clash with a name the code
already has, a renamed global or builtin (``int`` in an annotation, ``PythonFile``) or a renamed
keyword of a call to another function changes what the code does, and so does rule 1 inside
strings -- as in CodeXGLUE's release. The ``renaming`` record of the attack lists every identifier
whose text changed, old -> new, in order of first occurrence (the function name -> ``Func``, each
numbered name that was replaced somewhere -> its ``arg_<i>``, and identifiers that only contained the
function name, ``_sampled_cos_pulse`` -> ``_sampled_Func_pulse``); the first change of a name wins
where the same text changed two ways (a numbered name that also contains the function name and
appears after a dot).

Evidence. In the 30 released records: rule 1 inside identifiers, strings, comments and docstrings
(``cos``, ``init``, ``cinder``, ``path_enhance``); annotations, defaults, ``*args`` / ``**kwargs``, nested
functions' parameters and ``self`` numbered; assignment targets' objects numbered (``PythonFile``,
the global dicts of ``cinder``) and attribute names numbered but left (``strip_xml_namespace``'s
missing ``arg_1``); call keywords renamed (``register_ca(arg_0=arg_0)``), ``except ... as``,
comprehension variables, lambda parameters, imported names and nested function names left; the
layout kept byte for byte. Cases no record has are decided by the simplest token rule and marked
"not decided by the release" in ``tests/attacks/test_advtest_normalize.py``: ``with ... as`` (left, as issue
#21 reports from the full release); a name used before its first definition site (numbered at the
site); walrus targets (left) and annotations of assignments (not numbered); names after the dots
of imports; rule 1 inside keywords; and the order of rules 1 and 2 (rule 1 first: in ``def cos`` the
names ``cos_x`` and ``Func_x`` would share a number).

Python only: AdvTest is a Python benchmark and its rules name Python constructs; the attack refuses
other languages (``csbench.attacks.check_languages``).
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from tree_sitter import Node

from csbench.attacks.spec import Attack, register
from csbench.code.comments import Edit, Snippet, comment_edits, parse_snippet
from csbench.code.parsing import captures_by_name, get_query

LANGUAGES = ("python",)
FUNC = b"Func"
ARG = "arg_"

# One query over the snippet: every identifier, the identifiers after a dot, strings (one token each),
# the function names, the definition sites, and what comment removal needs (comments and the nodes
# that may hold a docstring), so that an attack parses and queries each snippet once.
_CAPTURES = ("id", "attr", "dotted", "relative", "str", "name", "site", "comment", "owner")
_QUERY = """
(identifier) @id
(attribute attribute: (identifier) @attr)
(dotted_name) @dotted
(relative_import) @relative
(string) @str
(function_definition name: (identifier) @name parameters: (parameters) @site)
(assignment left: (_) @site)
(augmented_assignment left: (_) @site)
(for_statement left: (_) @site)
(comment) @comment
(module) @owner
(function_definition) @owner
(class_definition) @owner
"""


class Normalised(NamedTuple):
    """The normalised code and its renaming (old -> new identifier text, in order of first occurrence)."""

    text: str
    renaming: dict[str, str]


class _Tokens(NamedTuple):
    """What the rules need of one parse, as byte spans over the snippet's code."""

    identifiers: list[tuple[int, int]]  # outside strings, in document order
    after_dot: set[int]  # starts of the identifiers that are attribute names
    sites: list[tuple[int, int]]  # definition sites, in document order
    name: bytes | None  # the first def's name
    comments: list[Node]  # comment nodes and docstring owners, for comment_edits


def _spans(nodes: Sequence[Node], offset: int) -> list[tuple[int, int]]:
    return sorted((node.start_byte - offset, node.end_byte - offset) for node in nodes)


def _outside(spans: list[tuple[int, int]], blocks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of ``spans`` (sorted) that lie in none of ``blocks`` (sorted; nested ones allowed)."""
    if not blocks:
        return spans
    merged: list[tuple[int, int]] = []
    for start, end in blocks:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    starts = [start for start, _ in merged]
    kept = []
    for span in spans:
        i = bisect_right(starts, span[0]) - 1
        if i < 0 or span[0] >= merged[i][1]:
            kept.append(span)
    return kept


def tokens(snippet: Snippet) -> _Tokens:
    """The identifiers, attribute names, definition sites and function name of a parsed snippet."""
    found = captures_by_name(get_query("python", _QUERY), _CAPTURES, snippet.tree.root_node)
    offset = snippet.offset
    identifiers = _outside(_spans(found["id"], offset), _spans(found["str"], offset))
    after_dot = {node.start_byte - offset for node in found["attr"]}
    if found["dotted"]:  # in imports: `import a.b.c` (b and c), `from .a.b import c` (a and b)
        starts = [start for start, _ in identifiers]
        relative = _spans(found["relative"], offset)
        for start, end in _spans(found["dotted"], offset):
            first = start if not any(low <= start < high for low, high in relative) else -1
            i = bisect_right(starts, start - 1)
            while i < len(starts) and starts[i] < end:
                if starts[i] != first:
                    after_dot.add(starts[i])
                i += 1
    names = sorted(found["name"], key=lambda node: node.start_byte)
    return _Tokens(
        identifiers=identifiers,
        after_dot=after_dot,
        sites=_spans(found["site"], offset),
        name=names[0].text if names else None,
        comments=found["comment"] + found["owner"],
    )


def function_name(code: str) -> str | None:
    """The name rule 1 replaces: the snippet's first ``def``'s (``None`` without one)."""
    name = tokens(parse_snippet(code, "python")).name
    return name.decode("utf-8") if name is not None else None


def numbered_names(data: bytes, found: _Tokens) -> dict[bytes, int]:
    """Rule 2: identifier text (after rule 1) -> its number, over the definition sites in document order."""
    numbers: dict[bytes, int] = {}
    starts = [start for start, _ in found.identifiers]
    name = found.name
    for site_start, site_end in found.sites:
        i = bisect_right(starts, site_start - 1)  # first identifier at or after the site
        while i < len(starts) and starts[i] < site_end:
            start, end = found.identifiers[i]
            text = data[start:end]
            if name and name in text:
                text = text.replace(name, FUNC)
            numbers.setdefault(text, len(numbers))
            i += 1
    return numbers


def token_edits(data: bytes, found: _Tokens, numbers: dict[bytes, int]) -> tuple[list[Edit], dict[str, str]]:
    """Rule 3: the edits that put ``arg_<i>`` in place of each identifier token with a numbered text
    (after rule 1), and the renaming record: every identifier whose text changes, old -> new, in order
    of first occurrence (the first change of a name wins)."""
    edits: list[Edit] = []
    changed: dict[bytes, bytes] = {}
    name = found.name
    after_dot = found.after_dot
    for start, end in found.identifiers:
        old = data[start:end]
        text = old.replace(name, FUNC) if name and name in old else old
        if start not in after_dot:
            number = numbers.get(text)
            if number is not None:
                new = _arg(number)
                edits.append((start, end, new))
                changed.setdefault(old, new)
                continue
        if text is not old:
            changed.setdefault(old, text)
    return edits, {old.decode("utf-8"): new.decode("utf-8") for old, new in changed.items()}


@functools.cache
def _arg(number: int) -> bytes:
    return f"{ARG}{number}".encode()


def _splice(data: bytes, edits: list[Edit], name: bytes | None) -> bytes:
    """``data`` with the sorted, non-overlapping ``edits`` applied and rule 1 applied to the text the
    edits leave (not to what they insert: ``arg_<i>`` stands for a whole token after rule 1, and the
    ``pass`` that comment removal may leave is not part of the code)."""
    pieces = []
    cursor = 0
    for start, end, replacement in edits:
        kept = data[cursor:start]
        pieces.append(kept.replace(name, FUNC) if name else kept)
        pieces.append(replacement)
        cursor = end
    kept = data[cursor:]
    pieces.append(kept.replace(name, FUNC) if name else kept)
    return b"".join(pieces)


def normalize(code: str, keep_comments: bool = True, snippet: Snippet | None = None) -> Normalised:
    """CodeXGLUE AdvTest's normalisation of the Python ``code`` (module docstring). ``keep_comments``:
    False removes the comments and docstrings too (as ``no_comment`` does), in the same pass.
    ``snippet``: ``parse_snippet(code, "python")`` if the caller has it."""
    snippet = snippet if snippet is not None else parse_snippet(code, "python")
    data = snippet.data
    found = tokens(snippet)
    edits, renaming = token_edits(data, found, numbered_names(data, found))
    if not keep_comments:
        _, removed = comment_edits(code, "python", snippet, found.comments)
        if removed:  # identifiers are never inside a comment or a docstring: no edit overlaps another
            edits = sorted(edits + removed)
    return Normalised(_splice(data, edits, found.name).decode("utf-8"), renaming)


def rewrite(code: str, language: str, keep_comments: bool, snippet: Snippet | None = None) -> Normalised:
    """The attack's per-snippet function (``Attack.rewrite``): ``normalize`` for Python, a
    ``ValueError`` naming the languages for any other."""
    if language not in LANGUAGES:
        raise ValueError(
            f"advtest_normalize reproduces CodeXGLUE AdvTest's normalisation, defined for"
            f" {', '.join(LANGUAGES)} only, not {language}; advtest_normalize_scoped renames all seven languages"
        )
    return normalize(code, keep_comments, snippet)


register(
    Attack(
        "advtest_normalize",
        "CodeXGLUE AdvTest's normalisation (Python), by tokens: the function name -> Func everywhere in the"
        " text, the names of parameter lists and assignment / for targets -> arg_i wherever they stand as"
        " tokens (call keywords included, attribute names and strings excepted); meaning not preserved",
        LANGUAGES,
        "renaming",
        rewrite=rewrite,
        preserves_meaning=False,
        other_languages="advtest_normalize_scoped",
    )
)
