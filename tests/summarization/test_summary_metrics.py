"""Summarization metrics (csbench.summarization.metrics) against their references.

* ``smoothed_bleu4``: bit-for-bit (asserted to 1e-9) equal to the reference twin of CodeXGLUE's scorer
  (``tests/reference/codexglue_bleu.py``, run through run.py's gold file and prediction lines) on fixed
  sentences, edge cases, seeded random strings, TL-CodeSum summaries and CodeSearchNet Ruby docstrings;
  equal to the figure CodeXGLUE's README prints for its evaluator example; hand-computed values.
* ``corpus_bleu``: equal to sacrebleu's own ``corpus_bleu`` output with the documented setting; the
  precisions equal hand counts of the thesis's definition; the composite is their geometric mean.
* ``rouge_l`` / ``meteor`` (optional): rouge-score's and NLTK's own figures, and hand-computed values.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import time
from pathlib import Path

import pytest
import sacrebleu
from reference import codexglue_bleu

from csbench.summarization.metrics import (
    METRICS,
    OPTIONAL_METRICS,
    codexglue_tokens,
    corpus_bleu,
    corpus_bleu_signature,
    geometric_mean,
    meteor,
    rouge_l,
    sentence_smoothed_bleu4,
    smoothed_bleu4,
    summary_scores,
)

# CodeXGLUE's evaluator example (Code-Text/code-to-text/evaluator/{reference,predictions}.txt at commit
# ac74a62802a0dd159b3258c78a2df8ad36cdf2b9) and the figure its README prints for it
README_REFERENCES = [
    "Outputs the deferred summary information saved via",
    "Inspect the file referenced in the kubectl stderr to make it easier for developer to understand what s going on",
    "make sure to never prune the ejson - keys secret",
    "Determine the best compressor for the current system . This method returns the class not an instance of the "
    "class .",
    "Create the bff file using + mkinstallp + .",
]
README_PREDICTIONS = [
    "Prints a summary message",
    "Finds the output from the output file",
    "Verify that the given JSON element is present .",
    "Determines the specified compression compression .",
    "Creates a new project .",
]
README_BLEU = 9.554726113590661

# (reference, hypothesis): the edge cases of the issue and of CodeXGLUE's tokenisation
EDGE_PAIRS = [
    ("returns the name of the user .", "returns the name of the user ."),
    ("returns the name of the user .", "Returns The NAME of the USER."),
    ("returns the name of the user .", ""),  # empty hypothesis: exp(-r), not 0
    ("", ""),  # both empty: 100
    ("", "returns the name"),  # empty reference
    ("a", ""),
    ("returns the name of the user .", "returns"),  # shorter than 4 tokens
    ("returns the name of the user .", "the user"),
    ("returns the name of the user .", "name of user"),
    ("gets get_user_name from __init__", "get_user_name"),  # underscores are tokens of their own
    ("Gibt die Größe der Datei zurück", "gibt die grösse der datei zurück"),  # unicode, case
    ("返回 用户 的 名字", "返回用户的名字"),
    ("ΣΊΣΥΦΟΣ returns İstanbul’s ½ → ∞", "σίσυφος returns i̇stanbul’s ½ → ∞"),
    ("parse a key=value, e.g. `a=1.5`; see <b>docs</b> &amp; notes!", "parse key = value e . g . a = 1.5 &amp;"),
    ("<skipped> line-\nbreak and &quot;quotes&quot;", '<skipped> line-break & "quotes"'),
    ("returns\tthe\nname\r\nof\x0bthe\u2028user", "returns the name of the user"),  # whitespace only separates
    ("returns the name of the user", "returns the name\tof the user"),  # run.py keeps the text before a tab
    ("returns the name of the user", "   \t returns the name"),
    ("returns the name of the user", "\treturns the name"),
    ("1,000 items - 3-4 times", "1 , 000 items 3 - 4 times"),
]


def _twin(references: list[str], hypotheses: list[str], directory: Path) -> float:
    """CodeXGLUE's figure for the pairs, by the transcription (its "Total: n" line silenced)."""
    with contextlib.redirect_stderr(io.StringIO()):
        return codexglue_bleu.run_py_bleu(references, hypotheses, str(directory))


def _tl_codesum_summaries(shared_data: Path, n: int) -> list[str]:
    path = shared_data / "tl_codesum" / "valid.token.nl"
    with path.open(encoding="utf-8") as lines:
        summaries = [line.rstrip("\n").split("\t", 1)[1] for _, line in zip(range(n), lines, strict=False)]
    assert len(summaries) == n, f"{path} has fewer than {n} lines"
    return summaries


def test_readme_example_gives_codexglue_figure(tmp_path: Path) -> None:
    assert _twin(README_REFERENCES, README_PREDICTIONS, tmp_path) == pytest.approx(README_BLEU, abs=1e-12)
    assert smoothed_bleu4(README_REFERENCES, README_PREDICTIONS) == pytest.approx(README_BLEU, abs=1e-12)


def test_hand_computed_values() -> None:
    # identical: every precision 1, no penalty
    assert sentence_smoothed_bleu4("a b c d e", "a b c d e") == pytest.approx(100.0, abs=1e-12)
    # "a b" against "a b c d": p1 = 2/2, p2 = (1+1)/(1+1), p3 = (0+1)/(0+1), p4 = (0+1)/(0+1);
    # penalty 1 - (4+1)/(2+1) = -2/3
    assert sentence_smoothed_bleu4("a b c d", "a b") == pytest.approx(100 * math.exp(-2 / 3), abs=1e-12)
    # empty hypothesis: every log-ratio 0 (0/0 guarded by float_info.min, 1/1), penalty -r
    assert sentence_smoothed_bleu4("a b c", "") == pytest.approx(100 * math.exp(-3), abs=1e-12)
    assert sentence_smoothed_bleu4("", "") == 100.0
    # no unigram in common: the 1-gram term is log(float_info.min), so the score is ~1e-75, not 0
    assert 0 < sentence_smoothed_bleu4("a b", "c d") < 1e-70
    # the corpus figure is the plain mean of the sentence figures
    assert smoothed_bleu4(["a b c d", "a b c"], ["a b", ""]) == pytest.approx(
        (100 * math.exp(-2 / 3) + 100 * math.exp(-3)) / 2, abs=1e-12
    )


def test_tokens_are_codexglues() -> None:
    assert codexglue_tokens("Gets get_user_name(), e.g. 1.5!") == [
        "gets", "get", "_", "user", "_", "name", "(", ")", ",", "e", ".", "g", ".", "1", ".", "5", "!",
    ]  # fmt: skip
    for reference, hypothesis in EDGE_PAIRS:
        for text in (reference, hypothesis):
            expected = codexglue_bleu.normalize(codexglue_bleu.splitPuncts(text.lower()))
            assert codexglue_tokens(text) == expected, text


def test_edge_cases_equal_the_twin(tmp_path: Path) -> None:
    for index, (reference, hypothesis) in enumerate(EDGE_PAIRS):
        expected = _twin([reference], [hypothesis], tmp_path)
        assert smoothed_bleu4([reference], [hypothesis]) == pytest.approx(expected, abs=1e-9), (index, reference)
        assert sentence_smoothed_bleu4(reference, hypothesis) == pytest.approx(expected, abs=1e-9)
    references, hypotheses = (list(column) for column in zip(*EDGE_PAIRS, strict=True))
    assert smoothed_bleu4(references, hypotheses) == pytest.approx(_twin(references, hypotheses, tmp_path), abs=1e-9)


def test_case_and_tab_quirks() -> None:
    reference = "returns the name of the user"
    lower = sentence_smoothed_bleu4(reference, "returns the name")
    assert sentence_smoothed_bleu4(reference, "RETURNS The Name") == lower
    assert sentence_smoothed_bleu4(reference, "returns the name\tof the user") == sentence_smoothed_bleu4(
        reference, "returns the name"
    )
    assert sentence_smoothed_bleu4(reference, "") == pytest.approx(100 * math.exp(-6), abs=1e-12)


def test_random_strings_equal_the_twin(tmp_path: Path) -> None:
    rng = random.Random(25)
    alphabet = [
        *"abcAB _-.,;:'\"<>&\t\n\r\x0b\x85\u2028\u00a0éÉßİΣς日本٣0159()[]{}!?/\\@#$%^*+=|~`",
        *("&amp;", "&quot;", "<skipped>", "get_name", "__init__", "the ", "name "),
    ]

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))

    for _ in range(50):
        n = rng.randint(1, 8)
        references, hypotheses = [text() for _ in range(n)], [text() for _ in range(n)]
        expected = _twin(references, hypotheses, tmp_path)
        assert smoothed_bleu4(references, hypotheses) == pytest.approx(expected, abs=1e-9), (references, hypotheses)


def test_tl_codesum_summaries_equal_the_twin(shared_data: Path, tmp_path: Path) -> None:
    summaries = _tl_codesum_summaries(shared_data, 2001)
    references, hypotheses = summaries[1:], summaries[:-1]  # each summary scored against the next one
    expected = _twin(references, hypotheses, tmp_path)
    assert smoothed_bleu4(references, hypotheses) == pytest.approx(expected, abs=1e-9)
    assert 0 < expected < 20  # unrelated summaries share some words, not many
    assert smoothed_bleu4(summaries, summaries) == pytest.approx(100.0, abs=1e-9)
    truncated = [" ".join(summary.split()[:3]) for summary in hypotheses]  # short hypotheses, brevity penalty
    assert smoothed_bleu4(references, truncated) == pytest.approx(_twin(references, truncated, tmp_path), abs=1e-9)


def test_codesearchnet_docstrings_equal_the_twin(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "codesearchnet" / "ruby" / "test.jsonl"
    with path.open(encoding="utf-8") as lines:
        records = [json.loads(line) for _, line in zip(range(500), lines, strict=False)]
    docstrings = [record["docstring"] for record in records]  # raw: newlines, markup, code, case
    tokens = [" ".join(record["docstring_tokens"]) for record in records]
    for references, hypotheses in ((docstrings, tokens), (docstrings[1:], tokens[:-1]), (tokens, docstrings)):
        expected = _twin(references, hypotheses, tmp_path)
        assert smoothed_bleu4(references, hypotheses) == pytest.approx(expected, abs=1e-9)


def test_corpus_bleu_equals_sacrebleu(shared_data: Path) -> None:
    summaries = _tl_codesum_summaries(shared_data, 1001)
    references, hypotheses = summaries[1:], [s.upper() if i % 2 else s for i, s in enumerate(summaries[:-1])]
    ours = corpus_bleu(references, hypotheses)
    theirs = sacrebleu.corpus_bleu(
        hypotheses, [references], lowercase=True, tokenize="13a", smooth_method="none", force=True
    )
    assert [ours[f"bleu{n}"] for n in range(1, 5)] == theirs.precisions
    assert ours["bleu"] == theirs.score
    assert ours["brevity_penalty"] == theirs.bp
    assert ours["bleu_composite"] == pytest.approx(math.prod(theirs.precisions) ** 0.25, rel=1e-12)
    assert ours["bleu_composite"] * ours["brevity_penalty"] == pytest.approx(theirs.score, rel=1e-12)
    assert corpus_bleu_signature() == f"nrefs:1|case:lc|eff:no|tok:13a|smooth:none|version:{sacrebleu.__version__}"


def test_corpus_bleu_is_the_thesis_definition() -> None:
    # corpus-level clipped n-gram matches over hypothesis n-grams, pooled over both pairs:
    # pair 1: "the the the cat" vs "the cat sat on the mat": 1-grams 2+1 of 4, 2-grams 1 of 3, 3-grams 0 of 2,
    # 4-grams 0 of 1
    # pair 2: "a b c d e" vs "a b c d x": 4 of 5, 3 of 4, 2 of 3, 1 of 2
    scores = corpus_bleu(["the cat sat on the mat", "a b c d x"], ["the the the cat", "a b c d e"])
    assert [scores[f"bleu{n}"] for n in range(1, 5)] == pytest.approx([700 / 9, 400 / 7, 200 / 5, 100 / 3], abs=1e-9)
    assert scores["bleu_composite"] == pytest.approx((700 / 9 * 400 / 7 * 200 / 5 * 100 / 3) ** 0.25, abs=1e-9)
    assert scores["brevity_penalty"] == pytest.approx(math.exp(1 - 11 / 9), abs=1e-12)
    alone = corpus_bleu(["the cat sat on the mat"], ["The the THE cat"])  # no 3- or 4-gram match
    assert [alone[f"bleu{n}"] for n in range(1, 5)] == pytest.approx([75.0, 100 / 3, 0.0, 0.0], abs=1e-9)
    assert alone["bleu_composite"] == 0.0
    short = corpus_bleu(["returns the name", "returns x"], ["returns the", "returns x"])  # no 3-gram at all
    assert [short[f"bleu{n}"] for n in range(1, 5)] == pytest.approx([100.0, 100.0, 0.0, 0.0], abs=1e-9)


def test_geometric_mean() -> None:
    assert geometric_mean([1.0, 4.0, 16.0, 64.0]) == pytest.approx(8.0, rel=1e-15)
    assert geometric_mean([50.0, 0.0, 20.0, 10.0]) == 0.0
    with pytest.raises(ValueError, match="negative"):
        geometric_mean([1.0, -1.0])


def test_summary_scores_keys_and_values() -> None:
    references = ["returns the name of the user .", "sets the user name", "closes the stream"]
    hypotheses = ["Returns the user name .", "sets the name", ""]
    scores = summary_scores(references, hypotheses)
    assert tuple(scores) == METRICS == ("bleu1", "bleu2", "bleu3", "bleu4", "bleu_composite", "smoothed_bleu4")
    corpus = corpus_bleu(references, hypotheses)
    assert {name: scores[name] for name in METRICS[:5]} == {name: corpus[name] for name in METRICS[:5]}
    assert scores["smoothed_bleu4"] == smoothed_bleu4(references, hypotheses)
    assert all(0.0 <= value <= 100.0 for value in scores.values()), scores
    assert scores["bleu1"] > scores["bleu2"] > 0


@pytest.mark.parametrize("function", [summary_scores, corpus_bleu, smoothed_bleu4])
def test_bad_inputs_raise(function) -> None:
    with pytest.raises(ValueError, match="empty"):
        function([], [])
    with pytest.raises(ValueError, match=r"3 references but 2 hypotheses"):
        function(["a", "b", "c"], ["a", "b"])
    with pytest.raises(TypeError, match="hypothesis 1 is a NoneType"):
        function(["a", "b"], ["a", None])
    with pytest.raises(TypeError, match="not one str"):
        function("abc", "abd")


def test_ten_thousand_pairs_are_fast(shared_data: Path) -> None:
    summaries = _tl_codesum_summaries(shared_data, 8714)
    references = (summaries * 2)[1:10_001]
    hypotheses = (summaries * 2)[:10_000]
    start = time.perf_counter()
    scores = summary_scores(references, hypotheses)
    seconds = time.perf_counter() - start
    print(f"summary_scores on 10,000 TL-CodeSum pairs: {seconds:.2f} s, {scores}")
    assert seconds < 15, f"10,000 pairs took {seconds:.1f} s"


def test_rouge_l_is_rouge_scores_lcs_f_measure() -> None:
    from rouge_score.rouge_scorer import RougeScorer

    # LCS("the cat sat on the mat", "the cat on the mat") = 5: P = 5/5, R = 5/6, F = 10/11
    assert rouge_l(["the cat sat on the mat"], ["The cat on the MAT."]) == pytest.approx(1000 / 11, abs=1e-9)
    references = ["returns the name of the user", "closes the stream", "Größe der Datei", "a b"]
    hypotheses = ["the user name", "", "Grösse der Datei", "b a"]
    scorer = RougeScorer(["rougeL"])
    expected = [scorer.score(r, h)["rougeL"].fmeasure for r, h in zip(references, hypotheses, strict=True)]
    assert rouge_l(references, hypotheses) == pytest.approx(100 * sum(expected) / len(expected), abs=1e-9)
    assert expected[1] == 0.0 and 0 < expected[2] < 1  # rouge-score keeps only [a-z0-9] runs: "gr", "e", ...


def test_meteor_is_nltks() -> None:
    from nltk.translate.meteor_score import meteor_score

    from csbench.perturbations.wordnet import WordNetMissingError

    try:
        identical = meteor(["returns the user name"], ["Returns the user name"])
    except WordNetMissingError as error:
        pytest.skip(f"WordNet is not installed here: {error}")
    # one chunk of 4 matches: Fmean 1, penalty 0.5 * (1/4)^3
    assert identical == pytest.approx(100 * (1 - 0.5 / 64), abs=1e-9)
    assert meteor(["this is a cat"], ["non matching hypothesis"]) == 0.0
    references = ["It is a guide to action that ensures that the military will forever heed Party commands.",
                  "closes the stream"]  # fmt: skip
    hypotheses = ["It is a guide to action which ensures that the military always obeys the commands of the party.",
                  "shuts the streams"]  # fmt: skip
    tokens = sacrebleu.BLEU(tokenize="13a").tokenizer
    expected = [
        meteor_score([tokens(r).split()], tokens(h).split()) for r, h in zip(references, hypotheses, strict=True)
    ]
    assert expected[1] > 0  # "shuts" ~ "closes" (WordNet synonyms), "streams" ~ "stream" (stems)
    assert meteor(references, hypotheses) == pytest.approx(100 * sum(expected) / 2, abs=1e-9)


def test_summary_scores_extra_metrics() -> None:
    references, hypotheses = ["returns the name of the user"], ["returns the user name"]
    scores = summary_scores(references, hypotheses, extra=("rouge_l",))
    assert tuple(scores) == (*METRICS, "rouge_l")
    assert scores["rouge_l"] == rouge_l(references, hypotheses)
    assert OPTIONAL_METRICS == ("rouge_l", "meteor")
    with pytest.raises(ValueError, match=r"unknown optional summarization metric\(s\) \['bleu'\]"):
        summary_scores(references, hypotheses, extra=("bleu",))
