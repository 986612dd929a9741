"""Identifier-renaming attacks (SPEC "Code attacks"; thesis section 3.3): the renaming strategies.

A strategy maps every snippet of a dataset to an old -> new renaming of the identifiers the snippet
defines (``csbench.code.identifiers``), as a pure function of the dataset's snippets in dataset order
and the attack's parameters. ``csbench.attacks`` runs the analysis (in parallel) and applies the
renamings. Each strategy registers its attack beside it (``@renaming_attack``, ``csbench.attacks.spec``).
Every strategy returns, per snippet, a mapping that ``identifiers.rename`` accepts:

* new names are valid identifiers of the snippet's language;
* the renaming is one-to-one on the snippet's defined names;
* no new name is a name the snippet uses without defining it (``Identifiers.reserved``), and the
  function's new name is none it may not take (``Identifiers.fun_may_take``: a member of its class
  that a method reaches through its receiver, a keyword for a PHP function).

Where a proposed name breaks one of these rules (``ordered_id``'s ``id3`` is a global the snippet
reads, ``k_shift_dataset`` borrows ``os`` from another snippet while this one imports ``os``, a donor
name equals a name this snippet keeps) the proposal is made unique with the smallest suffix ``_1``,
``_2``, ... that satisfies all three rules (``settle``). A proposal that is not a valid identifier of the
language is first made one (``_valid_base``: ``Func`` for a Ruby method becomes ``func``, a Ruby
method name ``add!`` given to a variable becomes ``add``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from csbench.attacks.spec import Survey, renaming_attack
from csbench.code.comments import Edit, Snippet, apply_edits, comment_edits, parse_snippet
from csbench.code.identifiers import (
    Identifiers,
    identifiers_and_comments,
    is_valid_name,
    receiver_names,
    rename_edits,
    splice,
)

Mapping = dict[str, str]


class Item(NamedTuple):
    """One distinct snippet of a dataset, in dataset order: its language, the code the attack was given,
    and the identifiers of the code the renaming applies to (spans: see ``Analysis``)."""

    language: str
    source: str
    identifiers: Identifiers


# ------------------------------------------------------------------------------------------ analysis


class Analysis(NamedTuple):
    """What a renaming attack needs of one snippet, from one parse: ``data``, the UTF-8 code given;
    ``edits``, the comment edits that turn it into the code the renaming applies to (none when the
    comments are kept); ``identifiers``, the identifiers of that code with their spans over ``data``
    (occurrences inside a comment edit are left out, and so are names left without one)."""

    language: str
    data: bytes
    edits: tuple[Edit, ...]
    identifiers: Identifiers

    @property
    def text(self) -> str:
        """The code the renaming applies to: ``data`` with the comment edits applied."""
        return apply_edits(self.data, list(self.edits)).decode("utf-8")

    def renamed(self, mapping: Mapping) -> str:
        """``text`` renamed by ``mapping`` (validated as ``identifiers.rename`` does): the comment
        edits and the renaming spliced into ``data`` at once."""
        return splice(self.data, rename_edits(self.language, mapping, self.identifiers, self.edits)).decode("utf-8")

    def shifted_identifiers(self) -> Identifiers:
        """``identifiers`` with spans over ``text`` (what ``snippet_identifiers(text)`` gives)."""
        return shift_identifiers(self.identifiers, self.edits)


def analyse(code: str, language: str, keep_comments: bool = False, snippet: Snippet | None = None) -> Analysis:
    """The code a renaming applies to and its identifiers, from one parse.

    ``keep_comments=False`` (every renaming attack on its own): the ``no_comment`` version of ``code``
    (``Analysis.text``) with the identifiers ``snippet_identifiers(remove_comments(code, language),
    language)`` finds, computed from the one parse of ``code``: the spans stay over ``code`` and a
    renaming is spliced in together with the comment edits (tests/attacks/test_attacks.py checks the equality
    on real code in all seven languages). ``keep_comments=True`` (composed with ``translation``):
    ``code`` itself and its identifiers. ``snippet``: ``parse_snippet(code, language)`` if the caller
    has it.
    """
    snippet = snippet if snippet is not None else parse_snippet(code, language)
    ids, found = identifiers_and_comments(code, language, snippet)
    if keep_comments:
        return Analysis(language, snippet.data, (), ids)
    data, edits = comment_edits(code, language, snippet, found)
    if not edits:
        return Analysis(language, data, (), ids)
    return Analysis(language, data, tuple(edits), _without_edited(ids, edits))


def _without_edited(ids: Identifiers, edits: Sequence[Edit]) -> Identifiers:
    """``ids`` without the occurrences inside an edit (and names left without any), spans unchanged."""
    if not edits:
        return ids
    occurrences = ids.occurrences
    # usually no occurrence is inside an edit (comments and docstrings hold none): checked at once on
    # all the spans in document order (two spans never overlap, so their ends are in order too)
    ordered = sorted([span for found in occurrences.values() for span in found])
    if all((k := bisect_left(ordered, (end,))) == 0 or ordered[k - 1][1] <= start for start, end, _ in edits):
        return ids
    starts = [start for start, _, _ in edits]
    ends = [end for _, end, _ in edits]
    kept: dict[str, tuple[tuple[int, int], ...]] = {}
    changed = False
    for name in ids.names:
        spans = occurrences[name]
        moved = []
        for span in spans:
            i = bisect_right(ends, span[0])  # edits that end at or before the span
            if i < len(starts) and starts[i] < span[1]:  # overlaps the next edit: removed with it
                continue
            moved.append(span)
        if len(moved) != len(spans):
            changed = True
            if not moved:
                continue
            spans = tuple(moved)
        kept[name] = spans
    if not changed:
        return ids
    names = tuple(sorted(kept, key=lambda name: kept[name][0]))
    roles = {name: ids.roles[name] for name in names}
    return Identifiers(
        names=names,
        roles=roles,
        occurrences=kept,
        reserved=ids.reserved,
        members=ids.members,
        fun_keywords=ids.fun_keywords,
    )


def shift_identifiers(ids: Identifiers, edits: Sequence[Edit]) -> Identifiers:
    """``ids`` with every span moved through ``edits`` (sorted, non-overlapping, as ``comment_edits``
    gives them). An occurrence inside an edited range is gone with it; so is a name left without any."""
    if not edits:
        return ids
    ends = [end for _, end, _ in edits]
    deltas = []  # cumulative length change of the edits up to and including i
    total = 0
    for start, end, repl in edits:
        total += len(repl) - (end - start)
        deltas.append(total)
    occurrences: dict[str, tuple[tuple[int, int], ...]] = {}
    for name in ids.names:
        moved = []
        for start, end in ids.occurrences[name]:
            i = bisect_right(ends, start)  # edits that end at or before the span
            if i < len(edits) and edits[i][0] < end:  # overlaps the next edit: removed with it
                continue
            shift = deltas[i - 1] if i else 0
            moved.append((start + shift, end + shift))
        if moved:
            occurrences[name] = tuple(moved)
    names = tuple(sorted(occurrences, key=lambda name: occurrences[name][0]))
    return Identifiers(
        names=names,
        roles={name: ids.roles[name] for name in names},
        occurrences=occurrences,
        reserved=ids.reserved,
        members=ids.members,
        fun_keywords=ids.fun_keywords,
    )


# ------------------------------------------------------------------------------------------ settling


_NONE: frozenset[str] = frozenset()


def settle(ids: Identifiers, language: str, proposals: Mapping, analysed_again: bool = False) -> Mapping:
    """The renaming ``old -> new`` for every defined name, from ``proposals`` (names not proposed keep
    theirs), with each proposal made valid, unique and capture-free (module docstring). Names that keep
    theirs are fixed first; proposals are settled in identifier order. ``analysed_again``: the renamed
    code is analysed again (by a later renaming of a composed spec), so it must read as the original did:
    only a receiver then takes a receiver's name (``IdentifierRules.receivers``, Python's ``self`` / ``cls``:
    a plain function whose first parameter became ``self`` would be analysed as a method)."""
    names = ids.names
    proposed = list(map(proposals.get, names, names))
    reserved = ids.reserved  # taken too, without copying it for every snippet
    members, roles = ids.members, ids.roles  # (members: names a method must not take)
    taken = {name for name, new in zip(names, proposed, strict=True) if new == name}
    receivers = receiver_names(language) if analysed_again else _NONE
    final: Mapping = {}
    for name, new in zip(names, proposed, strict=True):
        if new != name:
            refused = receivers if name not in receivers else _NONE  # (the fresh name may not be one either)
            if new in reserved or new in taken or new in refused or not is_valid_name(new, language):
                new = _fresh(new, language, taken | reserved | refused)
            if roles[name] == "fun" and not ids.fun_may_take(new):  # a member it uses, a PHP keyword
                new = _fresh(new, language, taken | reserved | members | {new})
            taken.add(new)
        final[name] = new
    return final


def _fresh(candidate: str, language: str, taken: set[str]) -> str:
    if not is_valid_name(candidate, language):
        candidate = _valid_base(candidate, language)
    if is_valid_name(candidate, language) and candidate not in taken:
        return candidate
    i = 1
    while not is_valid_name(f"{candidate}_{i}", language) or f"{candidate}_{i}" in taken:
        i += 1
        if i > 10_000:  # pragma: no cover - a name no suffix makes valid (not produced by any strategy)
            raise ValueError(f"no valid {language} identifier derived from {candidate!r}")
    return f"{candidate}_{i}"


def _valid_base(name: str, language: str) -> str:
    """A valid identifier of ``language`` close to ``name``: a Ruby method name ``add!`` or ``empty?``
    given to a variable loses its ``!`` / ``?``, ``Func`` for a Ruby method becomes ``func``, a name
    that still does not fit gets a ``v_`` prefix."""
    base = re.sub(r"\W", "", name) or "v"
    for option in (base, base[:1].lower() + base[1:], f"v_{base}"):
        if is_valid_name(option, language):
            return option
    return "v"


# ---------------------------------------------------------------------------------------- strategies
# Each: (items in dataset order, params) -> one proposal mapping per item (settled by the caller).

Strategy = Callable[[Sequence[Item], dict[str, Any]], list[Mapping]]


def check_shift(name: str, params: dict[str, Any]) -> str | None:
    """A shift of 0 renames nothing: ``k_shift_*-0`` would silently be ``no_comment``, so ``k`` starts at
    1 (as the ``-<k>`` variant and in ``attack_params``)."""
    k = params["k"]
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        return (
            f"{name}.k must be an integer >= 1, not {k!r} "
            "(a shift of 0 renames nothing: the attack would be no_comment)"
        )
    return None


def check_shift_range(name: str, params: dict[str, Any]) -> str | None:
    """``random_permutation``'s range of shifts: 1 <= min_k <= max_k (a shift of 0 renames nothing)."""
    if not 1 <= params["min_k"] <= params["max_k"]:
        return (
            f"{name} needs 1 <= min_k <= max_k, not {params['min_k']}..{params['max_k']} (a shift of 0 renames nothing)"
        )
    return None


def _shift(unit: str) -> dict[str, Any]:
    """The ``Attack`` fields of a shift by ``k`` (``unit``: what it shifts over): default 3, ``-<k>``."""
    description = f"shift in {unit} when the spec has no -<k> suffix (default 3); 0 would rename nothing"
    schema = {"k": {"type": "integer", "minimum": 1, "description": description}}
    return {"defaults": {"k": 3}, "variant": "k", "params_schema": schema, "check": check_shift}


@renaming_attack("full_hash", "each identifier -> role prefix (fun/arg/var) + SHA1 hex digest of its name")
def full_hash(items: Sequence[Item], params: dict[str, Any]) -> list[Mapping]:
    """Each identifier -> its role prefix (``fun`` / ``arg`` / ``var``) + the SHA1 hex digest of its name."""
    out = []
    for it in items:
        roles = it.identifiers.roles
        out.append({name: _hashed_name(roles[name], name) for name in it.identifiers.names})
    return out


@functools.lru_cache(maxsize=1 << 16)
def _hashed_name(role: str, name: str) -> str:
    """``role`` + the SHA1 hex digest of ``name``. Cached for the whole process, not per call: a dataset
    repeats its names (i, x, data, ...) and the workers call ``full_hash`` once per batch of snippets;
    the one string object per name also keeps its hash for settling and renaming."""
    return role + hashlib.sha1(name.encode("utf-8")).hexdigest()


def rotate(names: Sequence[str], k: int) -> Mapping:
    """Cyclic rotation by ``k``: the i-th name becomes name ``(i - k) mod n`` (the thesis's 3-shift maps
    ``[f, s, timezone, tz]`` to ``{f: s, s: timezone, timezone: tz, tz: f}``)."""
    n = len(names)
    return {name: names[(i - k) % n] for i, name in enumerate(names)} if n else {}


@renaming_attack(
    "k_shift_snippet",
    "cyclic rotation of the snippet's own identifier list by k",
    **_shift("identifiers"),
)
def k_shift_snippet(items: Sequence[Item], params: dict[str, Any]) -> list[Mapping]:
    """Cyclic rotation of each snippet's own identifier list by ``k``."""
    k = int(params["k"])
    return [rotate(it.identifiers.names, k) for it in items]


def random_shift(seed: int, language: str, code: str, low: int = 1, high: int = 20) -> int:
    """The shift ``random_permutation`` draws for one snippet: uniform in ``low..high``, determined by
    (seed, language, code), so a snippet gets the same shift in every split and on every machine."""
    digest = hashlib.sha256(f"{seed}\0{language}\0{code}".encode()).digest()
    return low + int.from_bytes(digest[:8], "big") % (high - low + 1)


@renaming_attack(
    "random_permutation",
    "k_shift_snippet with k drawn per snippet uniformly from min_k..max_k (default 1..20), seeded",
    defaults={"seed": 0, "min_k": 1, "max_k": 20},
    params_schema={
        "seed": {
            "type": "integer",
            "minimum": 0,
            "description": "the shift of a snippet is drawn from (seed, language, code)",
        },
        "min_k": {"type": "integer", "minimum": 1, "description": "a shift of 0 would rename nothing"},
        "max_k": {"type": "integer", "minimum": 1},
    },
    check=check_shift_range,
)
def random_permutation(items: Sequence[Item], params: dict[str, Any]) -> list[Mapping]:
    """Like ``k_shift_snippet`` with ``k`` drawn per snippet uniformly from ``min_k..max_k`` (seeded)."""
    seed, low, high = int(params["seed"]), int(params["min_k"]), int(params["max_k"])
    return [rotate(it.identifiers.names, random_shift(seed, it.language, it.source, low, high)) for it in items]


@renaming_attack("ordered_id", "the j-th identifier -> id<j>")
def ordered_id(items: Sequence[Item], params: dict[str, Any]) -> list[Mapping]:
    """The j-th identifier (1-based, order of first occurrence) -> ``id<j>``."""
    return [{name: f"id{j}" for j, name in enumerate(it.identifiers.names, 1)} for it in items]


@renaming_attack(
    "advtest_normalize_scoped",
    "AdvTest's naming scheme on the identifier analysis: the function name -> Func, the parameters and"
    " locals the snippet defines -> arg_i in order of first occurrence (scope-aware, capture-free)",
)
def advtest_normalize_scoped(items: Sequence[Item], params: dict[str, Any]) -> list[Mapping]:
    """AdvTest's naming scheme on the identifier analysis (``advtest_normalize_scoped``): the function
    name -> ``Func``, every parameter and local the snippet defines, in order of first occurrence ->
    ``arg_0``, ``arg_1``, ... (nested functions' names are locals). Scope-aware and capture-free, in all
    seven languages; CodeXGLUE's own token-based normalisation is ``csbench.attacks.advtest``."""
    out = []
    for it in items:
        mapping: Mapping = {}
        i = 0
        for name in it.identifiers.names:
            if it.identifiers.roles[name] == "fun" and "Func" not in mapping.values():
                mapping[name] = "Func"
            else:
                mapping[name] = f"arg_{i}"
                i += 1
        out.append(mapping)
    return out


def _by_language(items: Sequence[Item]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.language, []).append(i)
    return groups


# k_shift_dataset over chunks (Survey): a chunk's statistics are, per language, its number of snippets and
# the names of its last k; a chunk's context, per language of the chunk, (the position of its first snippet
# among the language's, the language's number of snippets, the names of the k snippets before the chunk,
# the names of the language's last k snippets): every donor of the chunk is in the chunk or among these.
ShiftContext = dict[str, tuple[int, int, tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]]


def _shift_gather(items: Sequence[Item], params: dict[str, Any]) -> dict[str, tuple[int, list[tuple[str, ...]]]]:
    k = int(params["k"])
    return {
        language: (len(indices), [tuple(items[i].identifiers.names) for i in indices[-k:]])
        for language, indices in _by_language(items).items()
    }


def _shift_contexts(statistics: list[dict[str, tuple[int, list]]], params: dict[str, Any]) -> list[ShiftContext]:
    k = int(params["k"])
    totals: dict[str, int] = {}
    tails: dict[str, deque] = {}
    for chunk in statistics:
        for language, (count, last) in chunk.items():
            totals[language] = totals.get(language, 0) + count
            tails.setdefault(language, deque(maxlen=k)).extend(last)
    tail = {language: tuple(names) for language, names in tails.items()}
    seen: dict[str, int] = {}
    windows: dict[str, deque] = {}
    out: list[ShiftContext] = []
    for chunk in statistics:
        window = {language: windows.setdefault(language, deque(maxlen=k)) for language in chunk}
        out.append(
            {
                language: (seen.get(language, 0), totals[language], tuple(window[language]), tail[language])
                for language in chunk
            }
        )
        for language, (count, last) in chunk.items():
            seen[language] = seen.get(language, 0) + count
            window[language].extend(last)
    return out


def _shift_propose(items: Sequence[Item], params: dict[str, Any], context: ShiftContext) -> list[Mapping]:
    k = int(params["k"])
    out: list[Mapping] = [{} for _ in items]
    for language, indices in _by_language(items).items():
        start, n, window, tail = context[language]
        m = len(indices)
        for j, i in enumerate(indices):
            d = (start + j - k) % n  # the donor's position among the language's snippets
            if start <= d < start + m:
                donor = items[indices[d - start]].identifiers.names
            elif start - len(window) <= d < start:
                donor = window[d - start + len(window)]
            elif d >= n - len(tail):
                donor = tail[d - n + len(tail)]
            else:  # pragma: no cover - the context always holds every donor
                raise RuntimeError(f"k_shift_dataset: donor {d} of snippet {start + j} is in no chunk context")
            out[i] = dict(zip(items[i].identifiers.names, donor, strict=False))
    return out


@renaming_attack(
    "k_shift_dataset",
    "identifiers of snippet i take, in order, those of snippet i-k (cyclically over the dataset)",
    survey=Survey(_shift_gather, _shift_contexts, _shift_propose),
    **_shift("snippets"),
)
def k_shift_dataset(items: Sequence[Item], params: dict[str, Any]) -> list[Mapping]:
    """The identifiers of snippet i take, in order, those of snippet i - k (cyclically over the snippets
    of the same language, in dataset order); surplus donor names are unused, missing ones keep theirs."""
    return _shift_propose(items, params, _shift_contexts([_shift_gather(items, params)], params)[0])


def _name_counts(items: Sequence[Item]) -> dict[str, dict[str, int]]:
    """Per language: each identifier's number of occurrences over ``items``, in order of first sight."""
    out: dict[str, dict[str, int]] = {}
    for language, indices in _by_language(items).items():
        counts: dict[str, int] = {}  # (a plain dict: ``Counter``'s missing keys cost a Python call each)
        count = counts.get
        for i in indices:
            ids = items[i].identifiers
            occurrences = ids.occurrences
            for name in ids.names:
                counts[name] = count(name, 0) + len(occurrences[name])
        out[language] = counts
    return out


def _rankings(counts: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    # as ``Counter.most_common``: a stable sort, so ties keep their insertion order
    return {language: sorted(c, key=c.__getitem__, reverse=True) for language, c in counts.items()}


def frequency_ranking(items: Sequence[Item]) -> dict[str, list[str]]:
    """Per language: the identifiers of all snippets by number of occurrences over the dataset, most
    frequent first (ties: first seen in dataset order)."""
    return _rankings(_name_counts(items))


def snippet_ranking(ids: Identifiers) -> list[str]:
    """The snippet's identifiers by number of occurrences, most frequent first (ties: first occurrence)."""
    order = {name: j for j, name in enumerate(ids.names)}
    return sorted(ids.names, key=lambda name: (-len(ids.occurrences[name]), order[name]))


def most_popular_mapping(ids: Identifiers, language: str, ranking: Sequence[str]) -> Mapping:
    """The snippet's j-th most frequent identifier -> the j-th name of ``ranking`` that the snippet may
    take (valid in the language and not a name it uses without defining it); identifiers beyond the
    ranking keep their name."""
    usable = (name for name in ranking if name not in ids.reserved and is_valid_name(name, language))
    return dict(zip(snippet_ranking(ids), usable, strict=False))


class _ValidRanking:
    """The names of a ranking that are valid identifiers of a language, in order, checked as far as the
    snippets need them and once per dataset (``most_popular_mapping`` checks them again per snippet)."""

    __slots__ = ("language", "names", "rest")

    def __init__(self, ranking: Sequence[str], language: str) -> None:
        self.language = language
        self.names: list[str] = []
        self.rest = iter(ranking)

    def grow(self) -> bool:
        """Appends the next valid name of the ranking to ``names``; False when there is none left."""
        for name in self.rest:
            if is_valid_name(name, self.language):
                self.names.append(name)
                return True
        return False

    def usable(self, reserved: frozenset[str]) -> Iterator[str]:
        """The valid names in order, those in ``reserved`` left out (``most_popular_mapping``'s ``usable``)."""
        names = self.names
        i = 0
        while i < len(names) or self.grow():
            name = names[i]
            i += 1
            if name not in reserved:
                yield name


def _popular_gather(items: Sequence[Item], params: dict[str, Any]) -> dict[str, dict[str, int]]:
    return _name_counts(items)


def _popular_contexts(statistics: list[dict[str, dict[str, int]]], params: dict[str, Any]) -> list:
    """The dataset's ranking per language (the same for every chunk): the chunks' counts added up in
    order, so ties keep the order of first sight over the dataset."""
    if len(statistics) == 1:  # the whole dataset at once: its counts are the totals
        return [_rankings(statistics[0])]
    totals: dict[str, dict[str, int]] = {}
    for chunk in statistics:
        for language, counts in chunk.items():
            total = totals.setdefault(language, {})
            get = total.get
            for name, n in counts.items():
                total[name] = get(name, 0) + n
    rankings = _rankings(totals)
    return [rankings] * len(statistics)


def _popular_propose(items: Sequence[Item], params: dict[str, Any], rankings: dict[str, list[str]] | None) -> list:
    fixed = params.get("ranking")
    valid: dict[str, _ValidRanking] = {}  # language -> its ranking's valid names
    out = []
    for it in items:
        language = it.language
        ranking = valid.get(language)
        if ranking is None:
            ranking = valid[language] = _ValidRanking(fixed or rankings[language], language)
        ids = it.identifiers
        out.append(dict(zip(snippet_ranking(ids), ranking.usable(ids.reserved), strict=False)))
    return out


@renaming_attack(
    "most_popular",
    "the snippet's j-th most frequent identifier -> the dataset's j-th most frequent",
    defaults={"ranking": None},  # None: the dataset's own ranking
    survey=Survey(_popular_gather, _popular_contexts, _popular_propose, wanted=lambda p: not p.get("ranking")),
    params_schema={
        "ranking": {
            "description": "a fixed ranking of names, most frequent first, instead of the dataset's own"
            " (e.g. the thesis's)",
            "type": "array",
            "items": {"type": "string", "minLength": 1},
        }
    },
)
def most_popular(items: Sequence[Item], params: dict[str, Any]) -> list[Mapping]:
    """Rank identifiers by frequency over the dataset and inside each snippet; the snippet's j-th most
    frequent becomes the dataset's j-th most frequent. ``params["ranking"]`` (a list of names) replaces
    the dataset's own ranking, e.g. to reproduce the thesis's worked example."""
    rankings = None if params.get("ranking") else _popular_contexts([_popular_gather(items, params)], params)[0]
    return _popular_propose(items, params, rankings)
