"""Query perturbations (csbench.perturbations) measured on real queries: CoSQA web queries and
CodeSearchNet Ruby docstrings from ../shared/data (those tests skip when it is absent)."""

from __future__ import annotations

import json
import math
import random
import re
import socket
import string
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from csbench.perturbations import (
    PERTURBATIONS,
    QUESTION_PREFIX,
    QUESTION_SUFFIX,
    check_ratio,
    make_augmenter,
    perturb,
    query_seed,
    ratios_for,
    trace_perturb,
)
from csbench.perturbations.tokens import SpacedTokenizer, tokenize
from csbench.perturbations.wordnet import (
    CLOSED_CLASS,
    LEXNAMES,
    WORDNET_FILES,
    WordNetMissingError,
    build_wordnet_folder,
    ensure_wordnet,
    lexnames_text,
    wordnet_pos_tag,
)

NAMES = ("case", "replace", "noise", "typo", "synonym", "swap", "question")
CHAR_AUG = ("replace", "noise", "typo")
WITH_RATIO = tuple(n for n in NAMES if n != "question")
RANDOM_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*()_+")  # nlpaug's 74
MIN_CHAR = 4  # nlpaug RandomCharAug / KeyboardAug: shorter tokens are never changed
SAMPLE = "how to use os.path.join() in python's C++ code? don't  panic"


@pytest.fixture(scope="module")
def queries(shared_data: Path) -> tuple[list[str], list[str]]:
    """All 604 CoSQA dev web queries and all 1,261 CodeSearchNet Ruby test docstrings, with ids."""
    cosqa = json.loads((shared_data / "cosqa" / "cosqa-dev.json").read_text())
    ruby = [json.loads(line) for line in (shared_data / "codesearchnet" / "ruby" / "test.jsonl").open()]
    texts = [r["doc"] for r in cosqa] + [r["docstring"] for r in ruby]
    ids = [r["idx"] for r in cosqa] + [f"ruby-test-{i}" for i in range(len(ruby))]
    return texts, ids


@pytest.fixture(scope="module")
def cosqa(queries: tuple[list[str], list[str]]) -> tuple[list[str], list[str]]:
    texts, ids = queries
    n = sum(i.startswith("cosqa") for i in ids)
    return texts[:n], ids[:n]


# ------------------------------------------------------------------------------------ API contract


def test_registry_has_the_seven_perturbations() -> None:
    assert tuple(PERTURBATIONS.names()) == NAMES
    assert [PERTURBATIONS.get(n).has_ratio for n in NAMES] == [True] * 6 + [False]


def test_unknown_perturbation_and_bad_ratios_raise_value_error() -> None:
    with pytest.raises(ValueError, match=r"unknown perturbation 'typos'.*valid names: case, .*Did you mean 'typo'"):
        perturb(["q"], ["1"], "typos", 0.1, 0)
    for ratio in (-0.01, 1.01, math.nan, math.inf, True, "0.1", None):
        with pytest.raises(ValueError, match="ratio"):
            perturb(["q"], ["1"], "typo", ratio, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 queries but 1 ids"):
        perturb(["a", "b"], ["1"], "case", 0.1, 0)
    with pytest.raises(ValueError, match="seed"):
        perturb(["a"], ["1"], "case", 0.1, 1.5)  # type: ignore[arg-type]
    assert perturb([], [], "synonym", 0.5, 0) == []
    assert check_ratio(0.15000000000000002) == 0.15 and check_ratio(1) == 1.0


def test_ratios_for() -> None:
    assert ratios_for("typo") == (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
    assert ratios_for("swap", [0.3, 0.1, 0.1 + 0.2]) == (0.1, 0.3)
    assert ratios_for("question") == (1.0,)


def test_query_seed_is_stable_and_depends_on_all_four_parts() -> None:
    base = query_seed(0, "typo", 0.1, "q1")
    assert base == query_seed(0, "typo", 0.1 + 1e-12, "q1") == query_seed(0, "typo", 0.1, "q1")
    assert len({base, query_seed(1, "typo", 0.1, "q1"), query_seed(0, "case", 0.1, "q1"),
                query_seed(0, "typo", 0.2, "q1"), query_seed(0, "typo", 0.1, "q2")}) == 5  # fmt: skip


def test_query_seed_matches_its_definition() -> None:
    import hashlib

    digest = hashlib.blake2b(b"7\x1fswap\x1f0.250000\x1fcosqa-dev-3", digest_size=8).digest()
    assert query_seed(7, "swap", 0.25, "cosqa-dev-3") == int.from_bytes(digest, "big")


# ------------------------------------------------------------------------------------ tokenisation


def test_tokens_are_nlpaugs_and_spacing_round_trips(queries: tuple[list[str], list[str]]) -> None:
    from nlpaug.util.text.tokenizer import Tokenizer

    for text in [*queries[0], SAMPLE, "", "  \n "]:
        assert tokenize(text) == Tokenizer.tokenizer(text)
        spaced = SpacedTokenizer()
        assert spaced.detokenize(spaced.tokenize(text)) == text


def test_untouched_text_keeps_its_exact_spacing() -> None:
    # nlpaug's own detokeniser would give "os. path. join () in python ' s C + + code? don ' t panic"
    out = perturb([SAMPLE], ["x"], "replace", 0.5, 0)[0]
    assert len(out) == len(SAMPLE)
    assert [i for i, (a, b) in enumerate(zip(SAMPLE, out, strict=True)) if a != b]
    for keep in (".", "()", "'", "C++", "?", "  "):
        assert keep in out


# --------------------------------------------------------------------------------- ratio 0, question


@pytest.mark.parametrize("name", NAMES)
def test_ratio_zero_changes_nothing(name: str, queries: tuple[list[str], list[str]]) -> None:
    texts, ids = queries
    assert perturb(texts, ids, name, 0.0, 3) == texts


def test_question_adds_exactly_prefix_and_suffix(queries: tuple[list[str], list[str]]) -> None:
    texts, ids = queries
    for ratio in (0.05, 0.5, 1.0):
        out = perturb(texts, ids, "question", ratio, 0)
        assert out == [f"How to {t}?" for t in texts]
    assert (QUESTION_PREFIX, QUESTION_SUFFIX) == ("How to ", "?")


# -------------------------------------------------------------------------------------------- case


@pytest.mark.parametrize("ratio", [0.05, 0.1, 0.25, 0.5, 1.0])
def test_case_flips_exactly_n_of_the_letters(ratio: float, queries: tuple[list[str], list[str]]) -> None:
    """Exact per query: round(n · C) flips (halves up) among the C case-flippable characters."""
    texts, ids = queries
    flipped = letters = 0
    for text, out in zip(texts, perturb(texts, ids, "case", ratio, 0), strict=True):
        assert len(out) == len(text)
        assert all(a == b or a.swapcase() == b for a, b in zip(text, out, strict=True))
        c = sum(ch.swapcase() != ch and len(ch.swapcase()) == 1 for ch in text)
        changes = sum(a != b for a, b in zip(text, out, strict=True))
        assert changes == math.floor(ratio * c + 0.5 + 1e-9)
        flipped, letters = flipped + changes, letters + c
    assert flipped / letters == pytest.approx(ratio, abs=0.005)


# ------------------------------------------------------------------------- character perturbations


def _char_count(length: int, ratio: float, eligible: int) -> int:
    """nlpaug's characters per picked token: max(1, ceil(n · L)), at most the eligible ones."""
    return min(max(math.ceil(ratio * length), 1), eligible)


def _eligible(name: str, token: str, keyboard: dict[str, list[str]]) -> list[int]:
    return [i for i, c in enumerate(token) if name != "typo" or c in keyboard]


def _expected_changes(name: str, text: str, ratio: float, keyboard: dict) -> tuple[int, float, float]:
    """(picked tokens k, expected changed characters, their variance) of one query, from nlpaug's
    counting rule: k = min(max(1, ceil(0.3 · T)), #tokens with >= 4 characters), picked uniformly
    without replacement among those; each gets _char_count characters changed (replace: a
    character in nlpaug's 74 candidates is redrawn unchanged with probability 1/74)."""
    tokens = tokenize(text)
    pool = [t for t in tokens if len(t) >= MIN_CHAR]
    k = min(max(math.ceil(0.3 * len(tokens)), 1), len(pool))
    if k == 0:
        return 0, 0.0, 0.0
    means, within = [], []
    for token in pool:
        eligible = _eligible(name, token, keyboard)
        c = _char_count(len(token), ratio, len(eligible)) if eligible else 0
        if name == "replace":
            keep = sum(1 / 74 for i in eligible if token[i] in RANDOM_CHARS) / len(token)  # mean per position
            means.append(c * (1 - keep))
            within.append(c * keep * (1 - keep))
        else:
            means.append(float(c))
            within.append(0.0)
    m = np.array(means)
    mean = k * m.mean()
    var = k * m.var() * ((len(pool) - k) / (len(pool) - 1) if len(pool) > 1 else 0.0) + k * float(np.mean(within))
    return k, float(mean), float(var)


def _changed_characters(name: str, text: str, out: str) -> int:
    if name == "noise":
        return len(out) - len(text)
    assert len(out) == len(text)
    return sum(a != b for a, b in zip(text, out, strict=True))


@pytest.fixture(scope="module")
def keyboard() -> dict[str, list[str]]:
    return make_augmenter("typo", 0.1).model.model


@pytest.mark.parametrize("name", CHAR_AUG)
@pytest.mark.parametrize("ratio", [0.1, 0.3, 0.5])
def test_character_perturbations_change_the_expected_share(
    name: str, ratio: float, queries: tuple[list[str], list[str]], keyboard: dict
) -> None:
    """Changed characters over all 1,865 queries within 4 standard deviations (+1 character) of the
    expectation computed from the definition above; the standard deviation comes from which tokens
    are picked (and, for replace, unchanged redraws); it is 0.6-1.6 % of the expectation here."""
    texts, ids = queries
    traced = trace_perturb(texts, ids, name, ratio, 0)
    measured = expected = variance = 0.0
    for text, t in zip(texts, traced, strict=True):
        k, mean, var = _expected_changes(name, text, ratio, keyboard)
        expected, variance = expected + mean, variance + var
        measured += _changed_characters(name, text, t.text)
        # per query, exactly: the token slots and the text between them are kept, at most k tokens
        # change, only tokens of >= 4 characters, each by its character count
        assert len(t.perturbed_tokens) == len(t.tokens)
        changed = [(a, b) for a, b in zip(t.tokens, t.perturbed_tokens, strict=True) if a != b]
        assert len(changed) <= k if name != "noise" else len(changed) == k
        for a, b in changed:
            assert len(a) >= MIN_CHAR
            c = _char_count(len(a), ratio, len(_eligible(name, a, keyboard)))
            if name == "noise":
                assert len(b) == len(a) + c
            else:
                assert len(b) == len(a) and 1 <= sum(x != y for x, y in zip(a, b, strict=True)) <= c
    sd, share = math.sqrt(variance), measured / sum(len(t) for t in texts)
    assert abs(measured - expected) <= 4 * sd + 1, (
        f"{name}@{ratio}: {measured:.0f} characters changed ({share:.3f} of all), expected {expected:.0f} ± {sd:.0f}"
    )


@pytest.mark.parametrize("name", CHAR_AUG)
def test_short_words_are_never_changed(name: str) -> None:
    for seed in range(20):
        assert perturb(["get a key of my map"], ["x"], name, 0.5, seed) == ["get a key of my map"]
        assert perturb(["get a key of my dict"], ["x"], name, 0.5, seed)[0].startswith("get a key of my ")


def test_typo_uses_keyboard_neighbours(cosqa: tuple[list[str], list[str]], keyboard: dict) -> None:
    texts, ids = cosqa
    for t in trace_perturb(texts, ids, "typo", 0.5, 0):
        for a, b in zip(t.tokens, t.perturbed_tokens, strict=True):
            for x, y in zip(a, b, strict=True):
                assert x == y or y in keyboard[x]


# ------------------------------------------------------------------------------ word perturbations


@pytest.mark.parametrize("ratio", [0.1, 0.3, 0.5])
def test_swap_changes_order_only(ratio: float, queries: tuple[list[str], list[str]]) -> None:
    texts, ids = queries
    moved = swaps = changed_queries = 0
    for text, t in zip(texts, trace_perturb(texts, ids, "swap", ratio, 0), strict=True):
        # same words (nlpaug re-capitalises a word moved to or from the front), same spacing
        assert Counter(w.lower() for w in t.perturbed_tokens) == Counter(w.lower() for w in t.tokens)
        assert re.sub(r"\w+|[^\w\s]", "", t.text) == re.sub(r"\w+|[^\w\s]", "", text)
        k = min(max(math.ceil(ratio * len(t.tokens)), 1), sum(w not in string.punctuation for w in t.tokens))
        displaced = sum(a.lower() != b.lower() for a, b in zip(t.tokens, t.perturbed_tokens, strict=True))
        assert displaced <= 2 * k
        moved, swaps, changed_queries = moved + displaced, swaps + k, changed_queries + (t.text != text)
    assert changed_queries / len(texts) > 0.9
    assert swaps <= moved <= 2 * swaps  # most swaps move two words; few are undone by a later one


def _lemma_forms(word: str) -> set[str]:
    from nltk.corpus import wordnet

    return {
        lemma.name().replace("_", " ").replace("-", " ").lower()
        for synset in wordnet.synsets(word)
        for lemma in synset.lemmas()
    }


@pytest.mark.parametrize("ratio", [0.1, 0.5])
def test_synonym_keeps_the_word_slots_and_replaces_up_to_n(ratio: float, queries: tuple[list[str], list[str]]) -> None:
    """One output token per input token (a multi-word lemma fills one slot: ``round eyed``), at most
    max(1, ceil(n · T)) of them changed, each to a WordNet synonym; never punctuation or a DT word."""
    texts, ids = queries
    texts, ids = texts[:604] + texts[604::4], ids[:604] + ids[604::4]  # CoSQA + every 4th Ruby docstring
    changed_queries = replaced = picked = slots = 0
    for text, t in zip(texts, trace_perturb(texts, ids, "synonym", ratio, 0), strict=True):
        assert len(t.perturbed_tokens) == len(t.tokens)
        changed = [(a, b) for a, b in zip(t.tokens, t.perturbed_tokens, strict=True) if a != b]
        k = max(1, math.ceil(ratio * len(t.tokens)))
        assert len(changed) <= k
        for a, b in changed:
            assert CLOSED_CLASS.get(a.lower()) != "DT" and re.search(r"\w", a)
            assert b.lower() in _lemma_forms(a), (a, b)
        changed_queries += bool(changed)
        replaced, picked, slots = replaced + len(changed), picked + k, slots + len(t.tokens)
        assert len(t.text.split()) >= len(text.split())
    assert changed_queries / len(texts) > 0.5
    assert 0.4 * picked < replaced <= picked and replaced / slots > 0.5 * ratio


# ---------------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_and_independent_of_the_batch(name: str, cosqa: tuple[list[str], list[str]]) -> None:
    texts, ids = cosqa
    texts, ids = texts[:150], ids[:150]
    first = perturb(texts, ids, name, 0.3, 11)
    random.seed(1)
    np.random.seed(1)
    assert perturb(texts, ids, name, 0.3, 11) == first
    random.seed(2)
    np.random.seed(2)
    assert perturb(texts[::-1], ids[::-1], name, 0.3, 11) == first[::-1]
    assert perturb(texts[7:8], ids[7:8], name, 0.3, 11) == first[7:8]
    assert perturb(["some other query here", texts[7]], ["other", ids[7]], name, 0.3, 11)[1] == first[7]


def test_global_random_state_is_untouched(cosqa: tuple[list[str], list[str]]) -> None:
    texts, ids = cosqa
    random.seed(5)
    np.random.seed(5)
    state, np_state = random.getstate(), np.random.get_state()
    for name in NAMES:
        perturb(texts[:50], ids[:50], name, 0.3, 0)
    assert random.getstate() == state
    assert all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
               for a, b in zip(np.random.get_state(), np_state, strict=True))  # fmt: skip


@pytest.mark.parametrize("name", WITH_RATIO)
def test_different_seeds_differ(name: str, cosqa: tuple[list[str], list[str]]) -> None:
    texts, ids = cosqa
    texts, ids = texts[:200], ids[:200]
    a, b = perturb(texts, ids, name, 0.3, 0), perturb(texts, ids, name, 0.3, 1)
    differ = sum(x != y for x, y in zip(a, b, strict=True)) / len(texts)
    assert differ > 0.5, f"{name}: only {differ:.0%} of the queries differ between seeds 0 and 1"
    assert perturb(texts, ids, name, 0.3, 0) == a


@pytest.mark.parametrize("name", ["replace", "noise", "typo", "synonym", "swap"])
def test_equals_nlpaug_seeded_per_query(name: str, cosqa: tuple[list[str], list[str]]) -> None:
    """The per-query generator is nlpaug's own randomness: a fresh nlpaug augmenter (same
    parameters, same spacing-keeping tokenizer) run after random.seed(query_seed) gives the same."""
    texts, ids = cosqa
    texts, ids = texts[:40], ids[:40]
    ours = perturb(texts, ids, name, 0.3, 4)
    for text, query_id, mine in zip(texts, ids, ours, strict=True):
        augmenter = make_augmenter(name, 0.3, SpacedTokenizer())
        random.seed(query_seed(4, name, 0.3, query_id))
        assert augmenter.augment(text)[0] == mine


# ------------------------------------------------------------------------------ offline WordNet


def test_lexnames_is_the_wordnet_30_list() -> None:
    lines = lexnames_text().splitlines()
    assert len(lines) == len(LEXNAMES) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1" and lines[44] == "44\tadj.ppl\t3"
    assert lines[29] == "29\tverb.body\t2" and lines[2] == "02\tadv.all\t4"


def test_ensure_wordnet_builds_a_copied_folder_once(tmp_path: Path) -> None:
    import nltk

    source = Path("/usr/share/wordnet")
    if not all((source / f).is_file() for f in WORDNET_FILES):
        pytest.skip("Debian wordnet-base / wordnet-sense-index not installed")
    data_dir = ensure_wordnet(tmp_path / "nltk_data")
    folder = tmp_path / "nltk_data" / "corpora" / "wordnet"
    assert nltk.data.path[0] == str(data_dir.resolve())
    for name in (*WORDNET_FILES, "lexnames"):
        assert (folder / name).is_file() and not (folder / name).is_symlink()
    assert (folder / "lexnames").read_text() == lexnames_text()
    mtime = (folder / "data.noun").stat().st_mtime_ns
    ensure_wordnet(tmp_path / "nltk_data")
    assert (folder / "data.noun").stat().st_mtime_ns == mtime
    ensure_wordnet()  # back to the project's folder for the other tests


def test_missing_wordnet_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(WordNetMissingError, match=r"sudo apt-get install wordnet-base wordnet-sense-index"):
        build_wordnet_folder(tmp_path / "out", source=tmp_path / "no-wordnet")


def test_offline_tagger() -> None:
    ensure_wordnet()
    words = tokenize("how to read a json file from the filepath quickly in python 3 . check if it is empty")
    tags = dict(wordnet_pos_tag(words))
    assert tags == {
        "how": "WRB", "to": "TO", "read": "VB", "a": "DT", "json": "NN", "file": "NN", "from": "IN",
        "the": "DT", "filepath": "NN", "quickly": "RB", "in": "IN", "python": "NN", "3": "CD", ".": ".",
        "check": "VB", "if": "IN", "it": "PRP", "is": "VB", "empty": "JJ",
    }  # fmt: skip
    assert wordnet_pos_tag(["how", "to", "file", "a", "bug"])[2] == ("file", "VB")


def test_synonym_never_downloads_or_opens_a_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    import nltk

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network use: {args}")

    monkeypatch.setattr(nltk, "download", refuse)
    monkeypatch.setattr(nltk, "pos_tag", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    out = perturb(["read a simple json file from a filepath"], ["x"], "synonym", 0.5, 0)
    assert out[0] != "read a simple json file from a filepath"
