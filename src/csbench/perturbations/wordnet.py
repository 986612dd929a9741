"""WordNet for the ``synonym`` perturbation, fully offline.

nlpaug's ``SynonymAug(aug_src="wordnet")`` reads WordNet through NLTK and tags parts of speech with
``nltk.pos_tag`` (the averaged-perceptron tagger); when either is missing it calls ``nltk.download``.
csbench never downloads:

* :func:`ensure_wordnet` builds an NLTK data folder ``<dir>/corpora/wordnet/`` from Debian's
  ``wordnet-base`` and ``wordnet-sense-index`` packages (``/usr/share/wordnet``, WordNet 3.0): the
  files are copied (NLTK's reader needs real files in one folder) and the ``lexnames`` file, which
  Debian does not ship, is written from the standard WordNet 3.0 list. The folder goes first on
  ``nltk.data.path``, so this WordNet is used even when another one is installed.
* :func:`wordnet_pos_tag` replaces the perceptron tagger (see its docstring for its limits); the
  ``synonym`` perturbation installs it on its augmenter's WordNet model, nothing global changes.
* :func:`no_downloads` makes any ``nltk.download`` call fail loudly instead of reaching the network.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

DEBIAN_WORDNET = Path("/usr/share/wordnet")
INSTALL_HINT = (
    "install the Debian packages with `sudo apt-get install wordnet-base wordnet-sense-index` "
    "(or run scripts/setup.sh, which installs them)"
)
ENV_DATA_DIR = "CSBENCH_NLTK_DATA"

# The files NLTK's WordNetCorpusReader opens (nltk.corpus.reader.wordnet._FILES) minus `lexnames`.
WORDNET_FILES = (
    "cntlist.rev",
    "index.sense",
    "index.adj",
    "index.adv",
    "index.noun",
    "index.verb",
    "data.adj",
    "data.adv",
    "data.noun",
    "data.verb",
    "adj.exc",
    "adv.exc",
    "noun.exc",
    "verb.exc",
)

# WordNet 3.0 lexicographer files (lexnames(5WN)); the line is `NN<TAB>name<TAB>pos number`.
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)  # fmt: skip
_POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_STAMP = "csbench-source.json"


class WordNetMissingError(RuntimeError):
    """WordNet's files are not where csbench looks for them; the message says how to install them."""


def lexnames_text() -> str:
    """The ``lexnames`` file of WordNet 3.0: 45 lines ``00\\tadj.all\\t3`` ... ``44\\tadj.ppl\\t3``."""
    return "".join(f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def default_data_dir() -> Path:
    """``$CSBENCH_NLTK_DATA`` if set, else ``.sources/nltk_data`` in the project checkout (the
    current directory when csbench is not installed from a checkout)."""
    if os.environ.get(ENV_DATA_DIR):
        return Path(os.environ[ENV_DATA_DIR])
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").is_file():
        root = Path.cwd()
    return root / ".sources" / "nltk_data"


def _source_stamp(source: Path) -> dict[str, int]:
    return {name: (source / name).stat().st_size for name in WORDNET_FILES}


def _check_source(source: Path) -> None:
    missing = [name for name in WORDNET_FILES if not (source / name).is_file()]
    if missing:
        raise WordNetMissingError(
            f"WordNet files missing in {source} ({', '.join(missing)}): the synonym perturbation needs "
            f"WordNet 3.0 offline; {INSTALL_HINT}"
        )


def _is_built(target: Path, stamp: dict[str, int]) -> bool:
    try:
        return json.loads((target / _STAMP).read_text()) == stamp and (target / "lexnames").is_file()
    except (OSError, ValueError):
        return False


def build_wordnet_folder(data_dir: Path, source: Path = DEBIAN_WORDNET) -> Path:
    """Copy WordNet from ``source`` into ``<data_dir>/corpora/wordnet`` with a generated ``lexnames``,
    unless an identical copy is already there. Safe against concurrent builders (each builds in
    its own temporary folder and renames it into place). Returns the ``wordnet`` folder."""
    _check_source(source)
    stamp = _source_stamp(source)
    target = Path(data_dir) / "corpora" / "wordnet"
    if _is_built(target, stamp):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".wordnet-build-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in WORDNET_FILES:
        shutil.copyfile(source / name, tmp / name)
    (tmp / "lexnames").write_text(lexnames_text())
    (tmp / _STAMP).write_text(json.dumps(stamp, sort_keys=True))
    if target.exists() and not _is_built(target, stamp):
        shutil.rmtree(target, ignore_errors=True)
    try:
        tmp.rename(target)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
        if not _is_built(target, stamp):
            raise
    return target


def ensure_wordnet(data_dir: Path | str | None = None, source: Path | str = DEBIAN_WORDNET) -> Path:
    """Make NLTK find WordNet 3.0 offline: build ``<data_dir>/corpora/wordnet`` from ``source``
    (idempotent) and put ``data_dir`` first on ``nltk.data.path``. ``data_dir`` defaults to
    :func:`default_data_dir`. Raises :class:`WordNetMissingError` (saying how to install the Debian
    packages) when the source files are absent. Returns ``data_dir``."""
    import nltk

    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    build_wordnet_folder(data_dir, Path(source))
    entry = str(data_dir.resolve())
    if not nltk.data.path or nltk.data.path[0] != entry:
        if entry in nltk.data.path:
            nltk.data.path.remove(entry)
        nltk.data.path.insert(0, entry)
    return data_dir


def _refuse_download(*args: object, **kwargs: object) -> bool:
    raise RuntimeError(
        f"csbench runs offline and never calls nltk.download (asked for {args or kwargs}); "
        f"WordNet comes from the Debian packages: {INSTALL_HINT}"
    )


@contextlib.contextmanager
def no_downloads() -> Iterator[None]:
    """Within the block, ``nltk.download`` raises instead of reaching the network."""
    import nltk

    saved = nltk.download
    nltk.download = _refuse_download
    try:
        yield
    finally:
        nltk.download = saved


# ---------------------------------------------------------------------------------- offline tagger

# Closed-class words and their Penn Treebank tags (the tags the perceptron tagger gives them most
# often). nlpaug skips `DT` words; the other tags here are not in its tag -> WordNet POS table
# (except `IN`, which it maps to adjectives), so for them it looks up synsets of every POS, exactly
# as it does with the perceptron tagger.
_CLOSED_CLASS_WORDS = {
    "DT": "a an the this that these those each every some any no all both either neither another",
    "IN": "about above across after against along among around as at before behind below beneath beside besides "
    "between beyond by despite during except for from in inside into like near of off on onto out outside over per "
    "since than through throughout till toward towards under unlike until upon via with within without whether if "
    "because although though while whereas unless",
    "TO": "to",
    "CC": "and or but nor",
    "PRP": "i you he she it we they me him her us them myself yourself himself herself itself ourselves themselves",
    "PRP$": "my your his its our their",
    "WDT": "which whichever whatever",
    "WP": "what who whom",
    "WP$": "whose",
    "WRB": "how when where why",
    "MD": "can could may might must shall should will would",
    "EX": "there",
    "RB": "not",
}
CLOSED_CLASS: dict[str, str] = {word: tag for tag, words in _CLOSED_CLASS_WORDS.items() for word in words.split()}
_PENN = {"n": "NN", "v": "VB", "a": "JJ", "r": "RB"}
_NUMBER = re.compile(r"[0-9]+(?:[.,][0-9]+)*")


_SS_TYPE_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}  # sense-key ss_type -> POS (satellite -> a)


@lru_cache(maxsize=1)
def sense_counts() -> dict[tuple[str, str], tuple[int, int]]:
    """``{(lemma, pos): (tagged occurrences, senses)}`` over WordNet's ``index.sense``
    (``lemma%ss_type:... offset sense_number tag_count``); ``pos`` in ``n v a r``."""
    from nltk.corpus import wordnet

    counts: dict[tuple[str, str], tuple[int, int]] = {}
    with wordnet.open("index.sense") as lines:
        for line in lines:
            key, _, _, tagged = line.split()
            lemma, _, rest = key.partition("%")
            slot = (lemma, _SS_TYPE_POS[rest[0]])
            total, senses = counts.get(slot, (0, 0))
            counts[slot] = (total + int(tagged), senses + 1)
    return counts


_NOUN_CONTEXT = frozenset({"DT", "PRP$", "JJ", "CD", "IN", "WP$"})  # noun after these
_VERB_CONTEXT = frozenset({"TO", "MD"})  # verb after these


@lru_cache(maxsize=1 << 16)
def _word_tag(word: str) -> tuple[str, bool, bool]:
    """Context-free Penn tag of one lower-cased token, and whether WordNet has it as a noun and as a
    verb (see :func:`wordnet_pos_tag`)."""
    if not any(c.isalnum() for c in word):
        return word, False, False  # punctuation: NLTK tags it with itself
    if _NUMBER.fullmatch(word):
        return "CD", False, False
    if word in CLOSED_CLASS:
        return CLOSED_CLASS[word], False, False
    from nltk.corpus import wordnet

    counts = sense_counts()
    scores = {}
    for pos in "nvar":
        base = wordnet.morphy(word, pos)
        scores[pos] = counts.get((base, pos), (0, 0)) if base is not None else (0, 0)
    best = max("nvar", key=lambda pos: (scores[pos], -"nvar".index(pos)))  # ties: earlier POS
    return _PENN[best], scores["n"][1] > 0, scores["v"][1] > 0


def wordnet_pos_tag(tokens: list[str]) -> list[tuple[str, str]]:
    """Offline stand-in for ``nltk.pos_tag``: ``[(token, Penn tag), ...]``, deterministic.

    Punctuation is tagged by itself, numbers ``CD``, 129 closed-class words (determiners,
    prepositions, pronouns, modals, wh-words, ...) from a fixed table. Every other word gets the
    part of speech under which WordNet knows it (through WordNet's own morphology,
    ``wordnet.morphy``) whose senses of that lemma were tagged most often in WordNet's sense-tagged
    corpus (tag counts of ``index.sense``, :func:`sense_counts`), then the one with most senses,
    then noun > verb > adjective > adverb; tagged ``NN``, ``VB``, ``JJ`` or ``RB``; words WordNet
    does not know are ``NN``. Two context rules, left to right, for words WordNet has both as noun
    and verb: a noun inside a noun phrase, i.e. after a determiner, possessive, adjective, number
    or preposition and any nouns following it (``a json file``); a verb after ``to`` or a modal
    (``to file``).

    Limits: only those two rules of context (``python check relation`` tags ``check`` by
    frequency); only the coarse tags nlpaug maps to WordNet (it needs no more: ``NN``/``NNS``/...
    all select noun synsets); closed-class words outside the table are tagged by WordNet (``one``
    as a noun, ``up`` as an adverb); proper nouns are not told apart. Needs :func:`ensure_wordnet`.
    """
    tagged: list[tuple[str, str]] = []
    previous, noun_phrase = "", False
    for token in tokens:
        tag, noun, verb = _word_tag(token.lower())
        if noun and verb:
            if noun_phrase:
                tag = "NN"
            elif previous in _VERB_CONTEXT:
                tag = "VB"
        noun_phrase = tag in _NOUN_CONTEXT or (noun_phrase and tag == "NN")
        tagged.append((token, tag))
        previous = tag
    return tagged
