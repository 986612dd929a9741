"""Summarization scores: the thesis's corpus BLEU-1..4 and composite, and CodeXGLUE's smoothed BLEU-4.

Every score is on a 0-100 scale (as papers print BLEU); one reference per hypothesis, in order.
:data:`METRICS` names them, in the order :func:`summary_scores` returns them:

``bleu1`` .. ``bleu4``
    The corpus-level modified n-gram precisions p_1 .. p_4, as the thesis defines them (section 3.1:
    "the count of all (corpus-level) n-grams of the predicted sentences that match with n-grams in their
    corresponding reference sentence(s) divided by the number of n-grams in the predicted sentences"):
    matches clipped by the reference's count, summed over the corpus, over the hypotheses' n-gram count.
    No brevity penalty, no smoothing (an order with no hypothesis n-gram at all, e.g. every hypothesis
    shorter than 4 tokens for p_4, scores 0). Computed by sacrebleu (``sacrebleu.BLEU`` with
    ``tokenize="13a"``, ``lowercase=True``, ``smooth_method="none"``; the figures are its
    ``BLEUScore.precisions``): the 13a tokenizer is mteval-v13a's, the de-facto standard, and lowercasing
    matches CodeXGLUE's scorer, so the two BLEU families see the same case. :func:`corpus_bleu_signature`
    gives sacrebleu's signature of that setting (``nrefs:1|case:lc|eff:no|tok:13a|smooth:none|version:...``).
``bleu_composite``
    The thesis's "BLEU-composite": the geometric mean of ``bleu1`` .. ``bleu4`` (0 when any is 0). It is
    sacrebleu's BLEU-4 *without* the brevity penalty, since the thesis defines it as "just the geometric
    mean of these four scores"; :func:`corpus_bleu` also returns sacrebleu's standard BLEU-4 (``bleu``,
    with the penalty) and the penalty itself (``brevity_penalty``) for readers who want those.
``smoothed_bleu4``
    CodeXGLUE code-to-text's number (``Code-Text/code-to-text/code/bleu.py``, the same file as its
    ``evaluator/evaluator.py``; reference twin: ``tests/reference/codexglue_bleu.py``): the mean over
    pairs of a sentence-level BLEU-4 with add-one smoothing of the 2-, 3- and 4-gram precisions and the
    brevity penalty ``exp(min(0, 1 - (r + 1) / (c + 1)))``, times 100. Text is lowercased and cut into
    ``\\w+`` runs and single other characters (their ``splitPuncts``), each underscore then split off (their
    NIST ``normalize``). The pairs go through the path their ``run.py`` uses (``computeMaps`` on the
    in-memory lines ``f"{idx}\\t{hypothesis}"`` and the gold file ``f"{idx}\\t{target}\\n"``), which this
    module reproduces without files, quirks included: a hypothesis is cut at its first tab (``computeMaps``
    splits the line on tabs); an empty hypothesis scores ``exp(-r)`` (100 when the reference is empty
    too, 36.79 against a one-token reference), not 0; a reference's whitespace only separates tokens
    (``read_examples`` collapses it).

Optional (``summary_scores(..., extra=OPTIONAL_METRICS)``; not in :data:`METRICS`, so not recorded unless asked):

``rouge_l``
    The mean over pairs of ROUGE-L's F-measure (longest common subsequence; ``rouge-score``'s
    ``RougeScorer(["rougeL"])``, its defaults: no stemmer, its tokenizer, which lowercases and keeps only
    ``[a-z0-9]`` runs, so non-ASCII letters are dropped), times 100.
``meteor``
    The mean over pairs of NLTK's METEOR (``nltk.translate.meteor_score.meteor_score``, its default
    alpha 0.9, beta 3, gamma 0.5, Porter stems and WordNet 3.0 synonyms; NLTK's re-implementation, not
    the Java METEOR 1.5), on sacrebleu's 13a tokens, lowercased, times 100. WordNet comes offline from
    Debian's packages through :func:`csbench.perturbations.wordnet.ensure_wordnet`; nothing is downloaded.

Empty input lists, unequal lengths or non-string items raise (``ValueError`` / ``TypeError``), naming the
lengths or the item. Speed, 10,000 TL-CodeSum pairs on a shared 2-core machine: ``summary_scores`` about
1 s (``smoothed_bleu4`` 0.5 s, ``corpus_bleu`` 0.9 s), ``rouge_l`` 6 s, ``meteor`` 24 s.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rouge_score.rouge_scorer import RougeScorer
    from sacrebleu.metrics import BLEU

METRICS: tuple[str, ...] = ("bleu1", "bleu2", "bleu3", "bleu4", "bleu_composite", "smoothed_bleu4")
OPTIONAL_METRICS: tuple[str, ...] = ("rouge_l", "meteor")

MAX_ORDER = 4

# CodeXGLUE's tokens: splitPuncts' `[\w]+|[^\s\w]` on the lowercased text, then normalize()'s
# punctuation rule, whose class holds one word character, "_": every underscore becomes its own token.
# (normalize's other rules cannot fire after splitPuncts: every punctuation character already stands alone.)
_CODEXGLUE_TOKEN = re.compile(r"[^\W_]+|_|[^\s\w]")
_TINY = sys.float_info.min  # their guard against log(0)


def codexglue_tokens(text: str) -> list[str]:
    """The tokens CodeXGLUE's ``bleu.py`` scores for ``text`` (``normalize(splitPuncts(text.lower()))``)."""
    return _CODEXGLUE_TOKEN.findall(text.lower())


def _ngram_counts(tokens: list[str]) -> Counter[tuple[str, ...]]:
    """Counts of every 1- to 4-gram of ``tokens``."""
    counts: Counter[tuple[str, ...]] = Counter()
    for order in range(1, MAX_ORDER + 1):
        counts.update(zip(*(tokens[i:] for i in range(order)), strict=False))
    return counts


def _sentence_bleu(reference: list[str], hypothesis: list[str]) -> float:
    """CodeXGLUE's ``bleu([reference], hypothesis)[0]`` on token lists, on a 0-1 scale.

    The arithmetic is theirs operation for operation (``score_cooked`` with one segment), so the value is
    the same float, not merely a close one.
    """
    correct = [0] * MAX_ORDER
    reference_counts = _ngram_counts(reference)
    for ngram, count in _ngram_counts(hypothesis).items():
        correct[len(ngram) - 1] += min(reference_counts.get(ngram, 0), count)
    log_bleu = 0.0
    for k in range(MAX_ORDER):
        guess = max(len(hypothesis) - k, 0)
        add = 1 if k > 0 else 0  # add-one smoothing of the 2-, 3- and 4-gram precisions
        log_bleu += math.log(correct[k] + add + _TINY) - math.log(guess + add + _TINY)
    log_bleu /= float(MAX_ORDER)
    brevity = min(0, 1 - float(len(reference) + 1) / (len(hypothesis) + 1))
    return math.exp(log_bleu + brevity)


def _run_py_hypothesis(hypothesis: str) -> str:
    """The prediction text ``computeMaps`` keeps from run.py's line ``f"{idx}\\t{hypothesis}"``: the field
    before the first tab (``row.strip().split('\\t')[1]``, then stripped)."""
    return hypothesis.split("\t", 1)[0]


def sentence_smoothed_bleu4(reference: str, hypothesis: str) -> float:
    """CodeXGLUE's smoothed BLEU-4 of one pair, 0-100 (the per-pair term :func:`smoothed_bleu4` averages)."""
    return 100.0 * _sentence_bleu(codexglue_tokens(reference), codexglue_tokens(_run_py_hypothesis(hypothesis)))


def smoothed_bleu4(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """CodeXGLUE code-to-text's smoothed BLEU-4 (``bleuFromMaps(*computeMaps(...))[0]``), 0-100, unrounded.

    Their ``run.py`` logs it rounded to 2 decimals; round when printing, not before storing.
    """
    _check_pairs(references, hypotheses)
    total = 0.0  # summed in record order, then scaled, as bleuFromMaps does
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        total += _sentence_bleu(codexglue_tokens(reference), codexglue_tokens(_run_py_hypothesis(hypothesis)))
    return total * 100.0 / float(len(references))


@cache
def _sacrebleu() -> BLEU:
    """The one sacrebleu scorer of the corpus BLEUs (imported on first use; its tokenizer is cached)."""
    from sacrebleu.metrics import BLEU

    # force: summaries are often pre-tokenised (TL-CodeSum: "returns the name ."); sacrebleu would warn
    return BLEU(lowercase=True, tokenize="13a", smooth_method="none", force=True)


def corpus_bleu_signature() -> str:
    """sacrebleu's signature of the corpus-BLEU setting (store it beside the scores)."""
    return str(_sacrebleu().get_signature())


def geometric_mean(values: Sequence[float]) -> float:
    """The geometric mean of non-negative ``values``; 0 when any is 0."""
    if not values:
        raise ValueError("geometric mean of no values")
    if any(value < 0 for value in values):
        raise ValueError(f"geometric mean of negative values: {list(values)}")
    if min(values) == 0:
        return 0.0
    return math.exp(math.fsum(math.log(value) for value in values) / len(values))


def corpus_bleu(references: Sequence[str], hypotheses: Sequence[str]) -> dict[str, float]:
    """Corpus BLEU by sacrebleu: ``bleu1`` .. ``bleu4`` (modified precisions), ``bleu_composite`` (their
    geometric mean), ``bleu`` (sacrebleu's BLEU-4, with the brevity penalty) and ``brevity_penalty``
    (0-1); the others 0-100. See the module docstring for the setting."""
    _check_pairs(references, hypotheses)
    result = _sacrebleu().corpus_score(list(hypotheses), [list(references)])
    precisions = [float(p) for p in result.precisions]
    scores = {f"bleu{order}": precisions[order - 1] for order in range(1, MAX_ORDER + 1)}
    scores["bleu_composite"] = geometric_mean(precisions)
    scores["bleu"] = float(result.score)
    scores["brevity_penalty"] = float(result.bp)
    return scores


@cache
def _rouge_scorer() -> RougeScorer:
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeL"])


def rouge_l(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """The mean ROUGE-L F-measure over pairs (``rouge-score``, its defaults), 0-100."""
    _check_pairs(references, hypotheses)
    scorer = _rouge_scorer()
    total = math.fsum(
        scorer.score(reference, hypothesis)["rougeL"].fmeasure
        for reference, hypothesis in zip(references, hypotheses, strict=True)
    )
    return 100.0 * total / len(references)


def meteor(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """The mean of NLTK's METEOR over pairs, on sacrebleu's 13a tokens, 0-100 (WordNet offline, see the
    module docstring; raises :class:`csbench.perturbations.wordnet.WordNetMissingError` without it)."""
    from nltk.translate.meteor_score import meteor_score

    from csbench.perturbations.wordnet import ensure_wordnet, no_downloads

    _check_pairs(references, hypotheses)
    ensure_wordnet()
    tokenize = _sacrebleu().tokenizer
    with no_downloads():
        total = math.fsum(
            meteor_score([tokenize(reference.rstrip()).split()], tokenize(hypothesis.rstrip()).split())
            for reference, hypothesis in zip(references, hypotheses, strict=True)
        )
    return 100.0 * total / len(references)


_OPTIONAL = {"rouge_l": rouge_l, "meteor": meteor}


def summary_scores(references: Sequence[str], hypotheses: Sequence[str], extra: Sequence[str] = ()) -> dict[str, float]:
    """Every metric of :data:`METRICS`, in that order, 0-100: what a summarization run records; then the
    optional metrics named in ``extra`` (of :data:`OPTIONAL_METRICS`), in ``extra``'s order."""
    unknown = [name for name in extra if name not in _OPTIONAL]
    if unknown:
        raise ValueError(f"unknown optional summarization metric(s) {unknown}; known: {list(OPTIONAL_METRICS)}")
    corpus = corpus_bleu(references, hypotheses)
    scores = {name: corpus[name] for name in METRICS[:5]}
    scores["smoothed_bleu4"] = smoothed_bleu4(references, hypotheses)
    for name in extra:
        scores[name] = _OPTIONAL[name](references, hypotheses)
    return scores


def _check_pairs(references: Sequence[str], hypotheses: Sequence[str]) -> None:
    """Raise unless ``references`` and ``hypotheses`` are equally long, non-empty sequences of strings."""
    for name, items in (("references", references), ("hypotheses", hypotheses)):
        if isinstance(items, str | bytes):
            raise TypeError(f"{name} must be a sequence of strings, not one {type(items).__name__}")
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses: one reference per hypothesis")
    if len(references) == 0:
        raise ValueError("no summaries to score: references and hypotheses are both empty")
    for name, items in (("reference", references), ("hypothesis", hypotheses)):
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise TypeError(f"{name} {index} is a {type(item).__name__}, not a str: {item!r:.80}")
