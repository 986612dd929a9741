"""The CodeSearchNet Challenge end to end (issue #23, item 6): csbench's NDCG scorer
(csbench.evaluate.challenge) against its reference twin, a transcription of CodeSearchNet's
``src/relevanceeval.py`` (tests/reference/csn_relevanceeval.py), and the submission file of
csbench.evaluate.submission against the format of CodeSearchNet's ``src/predict.py``.

Both scorers read the same files (the real annotationStore.csv, or a made-up one with tied and
fractional relevances) and the same predictions files: made-up rankings of the real annotated URLs
(random order, non-annotated URLs between them, lists past the 300 cut, queries missing, keys in
any case); rankings by real MiniLM vectors, and by integer vectors full of exact ties, written by
csbench's submission writer; and the files `csbench challenge-predict` writes from a small local
corpus of the six languages with BM25 and MiniLM. Every figure the original prints (coverage,
coverage of positive annotations, NDCG, NDCG over the full ranking) must be the same float.
"""

from __future__ import annotations

import csv
import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import PROJECT_ROOT
from reference import csn_relevanceeval as twin
from test_challenge_ndcg import real_file_fixture  # noqa: F401 (the fixture real_file)

from csbench.datasets.releases.csn_challenge import load_annotations, load_queries
from csbench.evaluate import submission as sub
from csbench.evaluate.challenge import challenge_ndcg, coverage, load_predictions, load_relevances


def ours(annotations: Path, predictions: Path) -> dict[str, dict[str, float]]:
    """csbench's figures, in the shape of the twin's ``run``."""
    relevances = load_relevances(load_annotations(annotations))
    predicted = load_predictions(predictions)
    ndcg = challenge_ndcg(predicted, relevances)
    covered, positive = coverage(predicted, relevances), coverage(predicted, relevances, positive_only=True)
    return {
        language: {
            "coverage": covered[language],
            "coverage_positive": positive[language],
            "ndcg_within": ndcg[language]["within"],
            "ndcg_all": ndcg[language]["all"],
        }
        for language in sorted(ndcg)
    }


def assert_same(annotations: Path, predictions: Path) -> dict[str, dict[str, float]]:
    """Both scorers on the same files: the same floats, bit for bit (and so the same printed text)."""
    expected, found = twin.run(str(annotations), str(predictions)), ours(annotations, predictions)
    assert found == expected
    assert twin.printed(found) == twin.printed(expected)
    return found


def write_rows(path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(sub.SUBMISSION_COLUMNS)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def queries_file(real_file: Path) -> Path:
    return real_file.with_name("queries.csv")


@pytest.fixture(scope="module")
def annotated(real_file: Path) -> dict[tuple[str, str], list[str]]:
    """(Language, Query) as written in the file -> its annotated URLs, in file order."""
    out: dict[tuple[str, str], list[str]] = {}
    with real_file.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            urls = out.setdefault((row["Language"], row["Query"]), [])
            if row["GitHubUrl"] not in urls:
                urls.append(row["GitHubUrl"])
    return out


# ---------------------------------------------------------------------------------------------
# made-up rankings of the real annotated URLs


def shuffled_rankings(annotated: dict, seed: int) -> list[tuple[str, str, str, str]]:
    """Random lists: a random share of each query's annotated URLs in random order with random
    non-annotated URLs between them, some lists past the 300 cut, some queries left out, language and
    query in random case, the rows of all lists interleaved (the order within a list kept)."""
    rng = np.random.default_rng(seed)
    lists = []
    for (language, query), urls in annotated.items():
        if rng.random() < 0.1:
            continue  # not predicted: scores 0
        kept = [u for u in urls if rng.random() < 0.8]
        n = int(rng.integers(280, 320)) if rng.random() < 0.05 else int(rng.integers(0, 20))  # a few past the cut
        fillers = [f"https://github.com/none/made-up/blob/0/{seed}/{i}.py" for i in range(n)]
        ranked = [*kept, *fillers]
        ranked = [ranked[i] for i in rng.permutation(len(ranked))]
        lang = language.upper() if rng.random() < 0.2 else language
        q = query.title() if rng.random() < 0.2 else query
        lists.append([(q, lang, f"id{i}", u) for i, u in enumerate(ranked)])
    rows, heads = [], [0] * len(lists)
    while any(h < len(rows_) for h, rows_ in zip(heads, lists, strict=True)):
        open_lists = [i for i, rows_ in enumerate(lists) if heads[i] < len(rows_)]
        i = open_lists[int(rng.integers(len(open_lists)))]
        step = int(rng.integers(1, 40))
        rows.extend(lists[i][heads[i] : heads[i] + step])
        heads[i] += step
    return rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shuffled_rankings_of_the_real_annotations(real_file: Path, annotated, tmp_path: Path, seed: int) -> None:
    found = assert_same(real_file, write_rows(tmp_path / "p.csv", shuffled_rankings(annotated, seed)))
    assert set(found) == {"go", "java", "javascript", "php", "python", "ruby"}
    assert all(0.05 < f["ndcg_all"] < f["ndcg_within"] < 1 for f in found.values())


def test_ideal_rankings_score_one_in_both(real_file: Path, annotated, tmp_path: Path) -> None:
    frame = pd.read_csv(real_file).groupby(["Language", "Query", "GitHubUrl"], sort=False)["Relevance"].mean()
    rows = []
    for (language, query), urls in annotated.items():
        ranked = sorted(urls, key=lambda u, lq=(language, query): -frame[(*lq, u)])
        rows += [(query, language, "f", u) for u in ranked]
    found = assert_same(real_file, write_rows(tmp_path / "p.csv", rows))
    assert all(f["coverage"] == 1.0 for f in found.values())
    # "Within" and "All" are 1 up to rounding; both scorers sum the same terms in the same order
    assert all(abs(f["ndcg_within"] - 1) < 1e-12 and f["ndcg_within"] == f["ndcg_all"] for f in found.values())


# ---------------------------------------------------------------------------------------------
# made-up annotations: ties, fractional means, a query with only zeros, several annotators

MADE_UP = [
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s1.py#L1-L5", 3),
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s1.py#L1-L5", 2),
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s1.py#L1-L5", 2),  # 7/3
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s2.py#L1-L5", 2),
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s2.py#L1-L5", 3),  # 5/2
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s3.py#L1-L5", 1),
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s3.py#L1-L5", 2),
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s3.py#L1-L5", 2),
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s3.py#L1-L5", 2),  # 7/4
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s4.py#L1-L5", 1),
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s5.py#L1-L5", 1),  # tie with s4
    ("Python", "sort a list", "https://github.com/a/b/blob/0/s6.py#L1-L5", 0),
    ("Python", "parse json", "https://github.com/a/b/blob/0/p1.py#L1-L5", 0),
    ("Python", "parse json", "https://github.com/a/b/blob/0/p2.py#L1-L5", 0),  # ideal DCG 0: skipped
    ("Python", "read a file", "https://github.com/a/b/blob/0/r1.py#L1-L5", 3),
    ("Python", "read a file", "https://github.com/a/b/blob/0/r2.py#L1-L5", 3),  # tie at the top
    ("Python", "read a file", "https://github.com/a/b/blob/0/r3.py#L1-L5", 1),
    ("Python", "read a file", "https://github.com/a/b/blob/0/r3.py#L1-L5", 0),  # 1/2
    ("Go", "sort a list", "https://github.com/a/c/blob/0/s1.go#L1-L5", 2),
    ("Go", "sort a list", "https://github.com/a/c/blob/0/s2.go#L1-L5", 1),
    ("Go", "unannotated in python", "https://github.com/a/c/blob/0/u.go#L1-L5", 1),
]


@pytest.fixture(scope="module")
def made_up_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("made-up") / "annotationStore.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Language", "Query", "GitHubUrl", "Relevance", "Notes"])
        writer.writerows((*row, "") for row in MADE_UP)
    return path


def _u(name: str, ext: str = "py") -> str:
    return f"https://github.com/a/{'b' if ext == 'py' else 'c'}/blob/0/{name}.{ext}#L1-L5"


@pytest.mark.parametrize(
    "ranked",
    [
        {"sort a list": ["s6", "x1", "s4", "s5", "s1", "x2", "s3"], "read a file": ["r3", "r2", "x1", "r1"]},
        {"sort a list": ["s2", "s1", "s3", "s4", "s5", "s6"], "read a file": ["r1", "r2", "r3"]},  # ideal
        {"sort a list": ["s5", "s4", "s3", "s1", "s2"], "read a file": ["x1", "x2", "x3", "r3"]},
        {"sort a list": ["x1", "s1"], "parse json": ["p2", "p1"]},  # "read a file" not predicted
        # the cut at 300: s1 and r2 at position 301 do not count, r1 at 300 does
        {
            "sort a list": [*(f"x{i}" for i in range(300)), "s1"],
            "read a file": [*(f"x{i}" for i in range(299)), "r1", "r2"],
        },
    ],
)
def test_ties_and_fractional_relevances(made_up_file: Path, tmp_path: Path, ranked: dict) -> None:
    rows = [(q, "python", "f", _u(n)) for q, names in ranked.items() for n in names]
    rows += [("SORT A LIST", "Go", "f", _u(n, "go")) for n in ("x9", "s2", "s1")]
    found = assert_same(made_up_file, write_rows(tmp_path / "p.csv", rows))
    assert set(found) == {"python", "go"}


def test_made_up_means_are_fractional(made_up_file: Path) -> None:
    relevances = load_relevances(load_annotations(made_up_file))["python"]["sort a list"]
    assert relevances[_u("s1")] == pytest.approx(7 / 3)
    assert relevances[_u("s3")] == 1.75 and relevances[_u("s4")] == relevances[_u("s5")] == 1.0


# ---------------------------------------------------------------------------------------------
# rankings by vectors, written by csbench's submission writer

MINILM = {"max_code_len": 32}  # code cut at 32 tokens: encoding on CPU is what costs in this file
EVERY_NTH_QUERY = 33  # three of the 99 queries: about a hundred annotated URLs to encode


def url_text(url: str) -> str:
    """The words of a GitHub URL's owner, repository and path (what a model can read of it)."""
    owner, repo, _, _, *path = url.removeprefix("https://github.com/").split("#")[0].split("/")
    return " ".join([owner, repo, *path]).replace("_", " ").replace(".", " ").replace("-", " ")


def ranked_submission(annotated: dict, query_vectors: dict, url_vectors: dict, fillers: list) -> pd.DataFrame:
    """Per (language, query): its annotated URLs and the filler records ranked by dot product,
    through csbench's submission ranking (``predict`` with a retriever over fixed vectors)."""

    class FixedVectors:
        def index(self, codes: pd.DataFrame) -> None:
            self.codes = np.stack([url_vectors[u] for u in codes["url"]])

        def scores(self, query: str) -> np.ndarray:
            return self.codes @ query_vectors[query]

    frames = []
    for language in sorted({lang for lang, _ in annotated}):
        for (lang, query), urls in annotated.items():
            if lang != language or query not in query_vectors:
                continue
            corpus = pd.DataFrame(
                {"identifier": "f", "url": [*urls, *(u for u, _ in fillers)], "code": "", "func_name": "f"}
            )
            frame = sub.predict([query], {language.lower(): corpus}, FixedVectors(), k=sub.TOP_K)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def minilm_retriever():
    from csbench.models import MODELS
    from csbench.models.build import retriever_factory

    spec = MODELS.get("minilm")
    try:
        return retriever_factory(spec, {**spec.defaults, **MINILM})()
    except (OSError, ImportError) as err:  # the offline package missing
        pytest.skip(f"MiniLM not available offline: {err}")


@pytest.fixture(scope="module")
def vector_inputs(annotated, shared_data: Path):
    queries = sorted({q for _, q in annotated})[::EVERY_NTH_QUERY]
    chosen = {key: urls for key, urls in annotated.items() if key[1] in queries}
    ruby = shared_data / "codesearchnet" / "ruby" / "test.jsonl"
    if not ruby.is_file():
        pytest.skip(f"{ruby} not found")
    records = [json.loads(line) for line in ruby.read_text(encoding="utf-8").splitlines()[:10]]
    fillers = [(r["url"], r["code"]) for r in records]  # real code, real URLs that no query annotates
    return queries, chosen, fillers


def test_minilm_rankings(real_file: Path, vector_inputs, minilm_retriever, tmp_path: Path) -> None:
    queries, chosen, fillers = vector_inputs
    urls = sorted({u for us in chosen.values() for u in us})
    texts = [url_text(u) for u in urls] + [code for _, code in fillers]
    codes = pd.DataFrame({"code": texts, "language": "ruby", "func_name": "f"})
    minilm_retriever.index(codes)
    vectors = minilm_retriever.code_vectors
    url_vectors = dict(zip(urls + [u for u, _ in fillers], vectors, strict=True))
    query_vectors = dict(zip(queries, minilm_retriever.query_vectors(queries), strict=True))
    frame = ranked_submission(chosen, query_vectors, url_vectors, fillers)
    path = tmp_path / "minilm.csv"
    sub.write_submission(frame, path)
    found = assert_same(real_file, path)
    # real vectors rank the annotated URLs among real code: NDCG well above 0, "All" below "Within"
    assert all(0 < f["ndcg_all"] < f["ndcg_within"] <= 1 for f in found.values()), found


@pytest.mark.parametrize("seed", [0, 1])
def test_tied_integer_vectors(real_file: Path, vector_inputs, tmp_path: Path, seed: int) -> None:
    queries, chosen, fillers = vector_inputs
    rng = np.random.default_rng(seed)
    urls = sorted({u for us in chosen.values() for u in us}) + [u for u, _ in fillers]
    url_vectors = dict(zip(urls, rng.integers(0, 2, size=(len(urls), 3)).astype(float), strict=True))
    url_vectors[urls[1]] = url_vectors[urls[0]]  # a repeated row too
    query_vectors = {q: rng.integers(0, 2, size=3).astype(float) for q in queries}
    frame = ranked_submission(chosen, query_vectors, url_vectors, fillers)
    path = tmp_path / "ties.csv"
    sub.write_submission(frame, path)
    assert_same(real_file, path)
    # exact ties everywhere: each list is the best 100 by score, equal scores in corpus order
    for (language, query), urls in chosen.items():
        corpus = [*urls, *(u for u, _ in fillers)]
        scores = [float(url_vectors[u] @ query_vectors[query]) for u in corpus]
        expected = [corpus[i] for i in sorted(range(len(corpus)), key=lambda i: (-scores[i], i))[: sub.TOP_K]]
        got = frame[(frame["language"] == language.lower()) & (frame["query"] == query)]["url"].tolist()
        assert got == expected
        assert len(set(scores)) < len(scores)  # there are ties


# ---------------------------------------------------------------------------------------------
# the submission file as predict.py writes it


def test_write_submission_is_pandas_to_csv_of_predict_py(tmp_path: Path) -> None:
    rows = [
        ("convert int to string", "python", "mod.f", "https://github.com/a/b/blob/0/x.py#L1-L2"),
        ('query, with "quotes"', "go", "T.m", "https://github.com/a/c/blob/0/y.go#L3-L9"),
    ]
    frame = pd.DataFrame(rows, columns=["query", "language", "identifier", "url"])
    path = tmp_path / "model_predictions.csv"
    sub.write_submission(frame, path)
    reference = tmp_path / "reference.csv"
    pd.DataFrame(rows, columns=["query", "language", "identifier", "url"]).to_csv(reference, index=False)
    assert path.read_bytes() == reference.read_bytes()
    assert (
        path.read_text().splitlines()[2] == '"query, with ""quotes""",go,T.m,https://github.com/a/c/blob/0/y.go#L3-L9'
    )


def test_predict_order_top_k_and_ties() -> None:
    class Constant:
        def index(self, codes: pd.DataFrame) -> None:
            self.n = len(codes)

        def scores(self, query: str) -> np.ndarray:
            values = np.zeros(self.n)
            values[-1] = 1.0 if query == "b" else np.nan
            return values

    corpora = {
        lang: pd.DataFrame({"identifier": [f"{lang}{i}" for i in range(4)], "url": [f"u/{lang}/{i}" for i in range(4)]})
        for lang in ("ruby", "python", "go")
    }
    frame = sub.predict(["a", "b"], corpora, Constant(), k=3)
    assert frame["language"].unique().tolist() == ["python", "go", "ruby"]  # predict.py's order
    python = frame[frame["language"] == "python"]
    assert python[python["query"] == "a"]["url"].tolist() == ["u/python/0", "u/python/1", "u/python/2"]  # NaN last
    assert python[python["query"] == "b"]["url"].tolist() == ["u/python/3", "u/python/0", "u/python/1"]
    with pytest.raises(ValueError, match="not a CodeSearchNet language"):
        sub.predict(["a"], {"r": corpora["go"]}, Constant())


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("query,language,identifier,url", "language,query,identifier,url"), ":1: header"),
        (lambda t: t.replace("\n", "\r\n"), "carriage returns"),
        (lambda t: "\n".join(t.splitlines()[:-1]) + "\n", "ends at line 6"),
        (lambda t: t + "b,go,f,u/go/9\n", ":8: a row beyond"),
        (lambda t: t.replace("u/go/1", "u/go/0"), "twice"),
        (lambda t: t.replace("a,go", "b,go", 1), ":2: \\('go', 'b'\\) where \\('go', 'a'\\)"),
        (lambda t: t.replace(",f,u/go/1", ",,u/go/1"), ":3: expected 4 non-empty cells"),
    ],
)
def test_check_submission_names_the_line(tmp_path: Path, edit, message: str) -> None:
    path = tmp_path / "p.csv"
    frame = pd.DataFrame(
        [(q, "go", "f", f"u/go/{i}") for q in ("a", "b") for i in range(3)],
        columns=list(sub.SUBMISSION_COLUMNS),
    )
    sub.write_submission(frame, path)
    assert sub.check_submission(path, ["a", "b"], {"go": 5}, k=3) == sub.SubmissionCheck({"go": 6}, 7)
    path.write_text(edit(path.read_text()), newline="")
    with pytest.raises(ValueError, match=message):
        sub.check_submission(path, ["a", "b"], {"go": 5}, k=3)


# ---------------------------------------------------------------------------------------------
# the released definitions: pinned, then decoded without unpickling

DEFINITIONS = [
    {
        "nwo": "owner/repo",
        "identifier": f"Klass.method_{i}",
        "function": f"def method_{i}(self):\n    return sort_list({i})",
        "function_tokens": ["def", f"method_{i}"],
        "url": f"https://github.com/owner/repo/blob/0/x.py#L{i}-L{i + 1}",
        "language": "python",
        "parameters": ("self",),
        "score": 0.5 * i,
        "empty": None,
        "ok": True,
    }
    for i in range(5)
]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_decode_data_pickle_every_protocol(protocol: int) -> None:
    shared = ["a", "b"]
    value = [DEFINITIONS, {"shared": shared, "again": shared}, (1, 2, 3), (), 2**70, -3, 1.5, "é"]
    if protocol >= 4:  # sets and frozensets have opcodes from protocol 4 (before: a call of set())
        value += [{1, 2}, frozenset({"x"})]
    if protocol >= 3:  # bytes from protocol 3 (before: a call of _codecs.encode)
        value += [b"\x00", b"x" * 300]
    decoded = sub.decode_data_pickle(pickle.dumps(value, protocol=protocol))
    assert decoded == value
    assert decoded[1]["shared"] is decoded[1]["again"]  # memo references kept


class Boom:
    def __reduce__(self):
        return (Path("never-created").touch, ())


def test_a_pickle_that_calls_code_is_refused_without_running_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = pickle.dumps([{"identifier": "f", "url": "u", "function": "x"}, Boom()])
    with pytest.raises(sub.DefinitionsError, match=r"opcode (STACK_)?GLOBAL .* would import or call code"):
        sub.decode_data_pickle(data)
    assert not (tmp_path / "never-created").exists()


def test_read_definitions_checks_the_pin_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    good = tmp_path / "python_dedupe_definitions_v2.pkl"
    good.write_bytes(pickle.dumps(DEFINITIONS, protocol=2))
    pin = sub.sha256_file(good)
    frame = sub.read_definitions(good, pin, "python")
    assert frame["identifier"].tolist() == [d["identifier"] for d in DEFINITIONS]
    assert frame["code"].tolist() == [d["function"] for d in DEFINITIONS]
    with pytest.raises(sub.DefinitionsError, match="no pinned SHA-256"):
        sub.read_definitions(good, None, "python")
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps([Boom()]))
    with pytest.raises(sub.DefinitionsError, match=f"pinned {pin}: not opened"):
        sub.read_definitions(evil, pin, "python")
    with pytest.raises(sub.DefinitionsError, match="would import or call code"):
        sub.read_definitions(evil, sub.sha256_file(evil), "python")  # even a pinned one is never executed
    assert not (tmp_path / "never-created").exists()
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps([{"identifier": "f", "url": "u"}]))
    with pytest.raises(sub.DefinitionsError, match="definition 0 lacks the text field"):
        sub.read_definitions(bad, sub.sha256_file(bad), "python")


# ---------------------------------------------------------------------------------------------
# `csbench challenge-predict` on a small local corpus of the six languages, BM25 and MiniLM

LOCAL = {  # dataset -> max_files: about a hundred functions in all
    "python-stdlib": 8,
    "go-stdlib": 4,
    "java-jdk": 2,
    "javascript-node": 12,
    "php-libs": 6,
    "ruby-stdlib": 4,
}


@pytest.fixture(scope="module")
def local_project(tmp_path_factory: pytest.TempPathFactory, queries_file: Path):
    """A project folder with the six local corpora prepared (few files each)."""
    import yaml

    from csbench.cli import main
    from csbench.datasets import DATASETS
    from csbench.datasets.local import SourceError, resolve_source

    for name in LOCAL:
        try:
            resolve_source(DATASETS.get(name).defaults["source"])
        except SourceError as err:
            pytest.skip(f"{name}: {err} (scripts/setup.sh installs the Debian sources)")
    root = tmp_path_factory.mktemp("challenge-project")
    (root / "params.yaml").write_text((PROJECT_ROOT / "params.yaml").read_text())
    overlay = {
        "study": "challenge",
        "grid": {"datasets": list(LOCAL), "models": ["bm25"]},
        "datasets": {name: {"max_files": n} for name, n in LOCAL.items()},
        "models": {"minilm": MINILM},
    }
    (root / "local.yaml").write_text(yaml.safe_dump(overlay))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for name in LOCAL:
            assert main(["prepare", "--config", "params.yaml", "--config", "local.yaml", "--dataset", name]) == 0
    return root


def _predict(root: Path, model: str, queries_file: Path, real_file: Path, *extra: str, status: int = 0) -> dict:
    from csbench.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        args = ["challenge-predict", "--config", "params.yaml", "--config", "local.yaml", "--model", model]
        args += ["--queries", str(queries_file), "--output", f"{model}.csv", "--json", f"{model}.json"]
        assert main([*args, "--annotations", str(real_file), *extra]) == status
    return json.loads((root / f"{model}.json").read_text()) if status == 0 else {}


@pytest.mark.parametrize("model", ["bm25", "minilm"])
def test_challenge_predict_on_the_local_corpus(
    local_project: Path, queries_file: Path, real_file: Path, model: str, request, monkeypatch
) -> None:
    if model == "minilm":
        # the encoder the module loaded once with the overlay's MINILM parameters (the CLI would load
        # the same files again), and every 8th query (13 of 99; BM25 ranks all 99)
        encoder = request.getfixturevalue("minilm_retriever").encoder
        monkeypatch.setattr("csbench.models.build.pretrained_encoder", lambda params: encoder)
        some = local_project / "queries-minilm.csv"
        some.write_text("query\n" + "".join(f"{q}\n" for q in load_queries(queries_file)[::8]), encoding="utf-8")
        queries_file = some
    record = _predict(local_project, model, queries_file, real_file)
    queries = load_queries(queries_file)
    sizes = {lang: c["records"] for lang, c in record["corpora"].items()}
    assert list(sizes) == list(sub.CSN_LANGUAGES) and all(n > 0 for n in sizes.values())
    path = local_project / f"{model}.csv"
    check = sub.check_submission(path, queries, sizes)
    expected_rows = {lang: len(queries) * min(sub.TOP_K, n) for lang, n in sizes.items()}
    assert check.rows == expected_rows and check.lines == 1 + sum(expected_rows.values())
    assert record["output"] == {"file": f"{model}.csv", "lines": check.lines, "rows": expected_rows}
    assert path.read_text().startswith("query,language,identifier,url\nconvert int to string,python,")
    # the local corpus has none of the annotated GitHub URLs: NDCG 0, the same in both scorers
    found = assert_same(real_file, path)
    assert all(v == 0 for f in found.values() for v in f.values())
    assert {lang: s["within"] for lang, s in record["scores"]["ndcg"].items()} == dict.fromkeys(sizes, 0.0)


def test_challenge_predict_with_pinned_definitions(local_project: Path, queries_file: Path, real_file: Path, capsys):
    """The released definitions of one language (made-up content, here): refused unpinned, used
    once pinned; the other languages keep their local corpora."""
    definitions = local_project / "data" / "raw" / "csn-python" / "python_dedupe_definitions_v2.pkl"
    definitions.parent.mkdir(parents=True, exist_ok=True)
    definitions.write_bytes(pickle.dumps(DEFINITIONS))
    try:
        _predict(local_project, "bm25", queries_file, real_file, "--languages", "python,go", status=2)
        assert "no pinned SHA-256 for the python definitions, so it is not opened" in capsys.readouterr().err
        wrong = "python=" + "0" * 64
        _predict(local_project, "bm25", queries_file, real_file, "--languages", "python,go", "--pin", wrong, status=2)
        assert f"pinned {'0' * 64}: not opened" in capsys.readouterr().err
        pin = f"python={sub.sha256_file(definitions)}"
        record = _predict(local_project, "bm25", queries_file, real_file, "--languages", "python,go", "--pin", pin)
    finally:
        definitions.unlink()
    assert record["corpora"]["python"]["records"] == len(DEFINITIONS)
    assert record["corpora"]["go"]["source"] == "go-stdlib"
    frame = pd.read_csv(local_project / "bm25.csv")
    python = frame[(frame["language"] == "python") & (frame["query"] == "convert int to string")]
    assert python["identifier"].tolist() == [d["identifier"] for d in DEFINITIONS]  # all score 0: file order
    assert record["output"]["rows"] == {"python": 99 * len(DEFINITIONS), "go": 99 * record["corpora"]["go"]["records"]}
