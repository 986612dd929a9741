"""Reference twin of CodeXGLUE code-to-text's smoothed sentence-level BLEU-4, transcribed.

Source: microsoft/CodeXGLUE at commit ac74a62802a0dd159b3258c78a2df8ad36cdf2b9:

* ``Code-Text/code-to-text/code/bleu.py`` and ``Code-Text/code-to-text/evaluator/evaluator.py``: the
  same file (blob f8f2b0aad12754e6cb01575ae9675858c1c4e16d; last changed in
  90f11dc34f14fb3995631f4cab53d9b8ed9d2ecd, "move into 4 folders"). Everything from ``normalize1`` to
  ``bleuFromMaps`` is the original's code, statement for statement (re-indented for ruff, its module
  constants and the ``ground`` arguments it never reads kept); only the unused ``subprocess`` / ``os``
  imports and the ``__main__`` shell are left out.
* ``Code-Text/code-to-text/code/run.py`` (blob e30eaf1b149ae9408794b4da5a2a2ab443c72024, last changed in
  bac029cb01c2d4476afa812c424439846b5c9920): how ``main`` scores a split. ``read_examples`` makes each
  target ``' '.join(' '.join(js['docstring_tokens']).replace('\\n','').strip().split())``; the test loop
  writes ``str(gold.idx)+'\\t'+gold.target+'\\n'`` to ``test_{idx}.gold``, keeps the predictions in memory
  as ``str(gold.idx)+'\\t'+ref`` (``ref``: the decoded hypothesis, no newline added), and reports
  ``round(bleu.bleuFromMaps(*bleu.computeMaps(predictions, gold_file))[0], 2)``.
  :func:`run_py_bleu` does exactly that for a csbench reference / hypothesis list, the reference string
  standing for the record's ``docstring_tokens`` as ``reference.split()``; it returns the unrounded
  figure.
"""

from __future__ import annotations

import math
import os
import re
import sys
import xml.sax.saxutils
from collections.abc import Sequence

# Added to bypass NIST-style pre-processing of hyp and ref files -- wade
nonorm = 0

preserve_case = False
eff_ref_len = "shortest"

normalize1 = [
    ("<skipped>", ""),  # strip "skipped" tags
    (r"-\n", ""),  # strip end-of-line hyphenation and join lines
    (r"\n", " "),  # join lines
    #    (r'(\d)\s+(?=\d)', r'\1'), # join digits
]
normalize1 = [(re.compile(pattern), replace) for (pattern, replace) in normalize1]

normalize2 = [
    (r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 "),  # tokenize punctuation. apostrophe is missing
    (r"([^0-9])([\.,])", r"\1 \2 "),  # tokenize period and comma unless preceded by a digit
    (r"([\.,])([^0-9])", r" \1 \2"),  # tokenize period and comma unless followed by a digit
    (r"([0-9])(-)", r"\1 \2 "),  # tokenize dash when preceded by a digit
]
normalize2 = [(re.compile(pattern), replace) for (pattern, replace) in normalize2]


def normalize(s):
    """Normalize and tokenize text. This is lifted from NIST mteval-v11a.pl."""
    # Added to bypass NIST-style pre-processing of hyp and ref files -- wade
    if nonorm:
        return s.split()
    if type(s) is not str:
        s = " ".join(s)
    # language-independent part:
    for pattern, replace in normalize1:
        s = re.sub(pattern, replace, s)
    s = xml.sax.saxutils.unescape(s, {"&quot;": '"'})
    # language-dependent part (assuming Western languages):
    s = " %s " % s  # noqa: UP031 (verbatim)
    if not preserve_case:
        s = s.lower()  # this might not be identical to the original
    for pattern, replace in normalize2:
        s = re.sub(pattern, replace, s)
    return s.split()


def count_ngrams(words, n=4):
    counts = {}
    for k in range(1, n + 1):
        for i in range(len(words) - k + 1):
            ngram = tuple(words[i : i + k])
            counts[ngram] = counts.get(ngram, 0) + 1
    return counts


def cook_refs(refs, n=4):
    """Takes a list of reference sentences for a single segment
    and returns an object that encapsulates everything that BLEU
    needs to know about them."""

    refs = [normalize(ref) for ref in refs]
    maxcounts = {}
    for ref in refs:
        counts = count_ngrams(ref, n)
        for ngram, count in counts.items():
            maxcounts[ngram] = max(maxcounts.get(ngram, 0), count)
    return ([len(ref) for ref in refs], maxcounts)


def cook_test(test, item, n=4):
    """Takes a test sentence and returns an object that
    encapsulates everything that BLEU needs to know about it."""
    (reflens, refmaxcounts) = item
    test = normalize(test)
    result = {}
    result["testlen"] = len(test)

    # Calculate effective reference sentence length.

    if eff_ref_len == "shortest":
        result["reflen"] = min(reflens)
    elif eff_ref_len == "average":
        result["reflen"] = float(sum(reflens)) / len(reflens)
    elif eff_ref_len == "closest":
        min_diff = None
        for reflen in reflens:
            if min_diff is None or abs(reflen - len(test)) < min_diff:
                min_diff = abs(reflen - len(test))
                result["reflen"] = reflen

    result["guess"] = [max(len(test) - k + 1, 0) for k in range(1, n + 1)]

    result["correct"] = [0] * n
    counts = count_ngrams(test, n)
    for ngram, count in counts.items():
        result["correct"][len(ngram) - 1] += min(refmaxcounts.get(ngram, 0), count)

    return result


def score_cooked(allcomps, n=4, ground=0, smooth=1):
    totalcomps = {"testlen": 0, "reflen": 0, "guess": [0] * n, "correct": [0] * n}
    for comps in allcomps:
        for key in ["testlen", "reflen"]:
            totalcomps[key] += comps[key]
        for key in ["guess", "correct"]:
            for k in range(n):
                totalcomps[key][k] += comps[key][k]
    logbleu = 0.0
    all_bleus = []
    for k in range(n):
        correct = totalcomps["correct"][k]
        guess = totalcomps["guess"][k]
        addsmooth = 0
        if smooth == 1 and k > 0:
            addsmooth = 1
        logbleu += math.log(correct + addsmooth + sys.float_info.min) - math.log(guess + addsmooth + sys.float_info.min)
        if guess == 0:
            all_bleus.append(-10000000)
        else:
            all_bleus.append(math.log(correct + sys.float_info.min) - math.log(guess))

    logbleu /= float(n)
    all_bleus.insert(0, logbleu)

    brevPenalty = min(0, 1 - float(totalcomps["reflen"] + 1) / (totalcomps["testlen"] + 1))
    for i in range(len(all_bleus)):
        if i == 0:
            all_bleus[i] += brevPenalty
        all_bleus[i] = math.exp(all_bleus[i])
    return all_bleus


def bleu(refs, candidate, ground=0, smooth=1):
    refs = cook_refs(refs)
    test = cook_test(candidate, refs)
    return score_cooked([test], ground=ground, smooth=smooth)


def splitPuncts(line):
    return " ".join(re.findall(r"[\w]+|[^\s\w]", line))


def computeMaps(predictions, goldfile):
    predictionMap = {}
    goldMap = {}
    gf = open(goldfile, "r")  # noqa: SIM115, UP015 (verbatim: the original never closes it)

    for row in predictions:
        cols = row.strip().split("\t")
        if len(cols) == 1:
            (rid, pred) = (cols[0], "")
        else:
            (rid, pred) = (cols[0], cols[1])
        predictionMap[rid] = [splitPuncts(pred.strip().lower())]

    for row in gf:
        (rid, pred) = row.split("\t")
        if rid in predictionMap:  # Only insert if the id exists for the method
            if rid not in goldMap:
                goldMap[rid] = []
            goldMap[rid].append(splitPuncts(pred.strip().lower()))

    sys.stderr.write("Total: " + str(len(goldMap)) + "\n")
    return (goldMap, predictionMap)


# m1 is the reference map
# m2 is the prediction map
def bleuFromMaps(m1, m2):
    score = [0] * 5
    num = 0.0

    for key in m1:
        if key in m2:
            bl = bleu(m1[key], m2[key][0])
            score = [score[i] + bl[i] for i in range(0, len(bl))]
            num += 1
    return [s * 100.0 / num for s in score]


def run_py_bleu(references: Sequence[str], hypotheses: Sequence[str], output_dir: str) -> float:
    """run.py's test-split scoring of ``hypotheses`` against ``references`` (unrounded).

    The gold file goes to ``output_dir/test_0.gold``, written as run.py writes it (its ``open(..., 'w')``,
    the locale's encoding, as ``computeMaps`` reads it back); record ``i`` has ``gold.idx == i``.
    """
    targets = []
    for reference in references:  # read_examples, with docstring_tokens = reference.split()
        nl = " ".join(reference.split()).replace("\n", "")
        nl = " ".join(nl.strip().split())
        targets.append(nl)
    predictions = []
    gold_file = os.path.join(output_dir, "test_0.gold")
    with open(gold_file, "w") as f1:
        for idx, (ref, target) in enumerate(zip(hypotheses, targets, strict=True)):
            predictions.append(str(idx) + "\t" + ref)
            f1.write(str(idx) + "\t" + target + "\n")
    (goldMap, predictionMap) = computeMaps(predictions, gold_file)
    return bleuFromMaps(goldMap, predictionMap)[0]
