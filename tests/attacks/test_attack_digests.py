"""The attacks' output on real released code is pinned by digests recorded before a speed change
(issue #28, item 5: the attacks made faster must give byte-identical code, renamings and reports).

Each set of ``../shared/data`` (CoSQA's CodeSearchNet Python pool, CodeSearchNet Ruby, GeCS's samples
of Go / Java / JavaScript / PHP / Ruby, StatCodeSearch's R, TL-CodeSum's Java) is attacked by every
attack of ``benchmarks/attack_specs.py`` and ``no_comment``; the sha256 of the attacked code, the
``renaming`` column and the report's per-language counts must equal the recorded one. Skipped without
the shared data. A deliberate change of an attack's output updates ``DIGESTS`` (``python
tests/attacks/test_attack_digests.py`` prints them) and says why in its commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from corpora import SHARED_DATA

from csbench.attacks import RENAMING_COLUMN, languages, parse_spec, run_attack

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from attack_specs import ADVTEST_NORMALIZE, ADVTEST_NORMALIZE_SCOPED, RENAMINGS

SPECS = ["no_comment", *RENAMINGS, ADVTEST_NORMALIZE, ADVTEST_NORMALIZE_SCOPED]
PER_SET = 300  # functions per set (the first distinct ones, in file order)


def _jsonl(path: Path, field: str) -> list[str]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line)[field] for line in lines if line.strip()]


def real_sets() -> dict[str, tuple[str, list[str]]]:
    """set name -> (language, codes) of the released functions in ../shared/data that are present."""
    sets: dict[str, tuple[str, list[str]]] = {}
    pool = SHARED_DATA / "cosqa" / "code_idx_map.txt"
    if pool.is_file():
        sets["python-cosqa-pool"] = ("python", list(json.loads(pool.read_text(encoding="utf-8"))))
    ruby = SHARED_DATA / "codesearchnet" / "ruby" / "test.jsonl"
    if ruby.is_file():
        sets["ruby-csn"] = ("ruby", _jsonl(ruby, "code"))
    for path in sorted((SHARED_DATA / "codesearchnet" / "gecs_samples").glob("*_test_sample.jsonl")):
        language = path.name.split("_test_sample")[0]
        sets[f"{language}-gecs"] = (language, [text.split(" [SEP] ", 1)[-1] for text in _jsonl(path, "input")])
    stat = SHARED_DATA / "statcodesearch" / "sample.json"
    if stat.is_file():
        sets["r-statcodesearch"] = ("r", [r["Code"] for r in json.loads(stat.read_text(encoding="utf-8"))])
    tl = SHARED_DATA / "tl_codesum" / "valid.token.code"
    if tl.is_file():
        lines = tl.read_text(encoding="utf-8").splitlines()
        sets["java-tlcodesum"] = ("java", [line.split("\t", 1)[-1] for line in lines])
    return {name: (language, list(dict.fromkeys(codes))[:PER_SET]) for name, (language, codes) in sets.items()}


def digest(language: str, codes: list[str], spec: str) -> str:
    frame = pd.DataFrame({"language": language, "code": codes})
    attacked, report = run_attack(spec, {"test": frame}, progress=False)
    record = [attacked["test"]["code"].tolist(), attacked["test"][RENAMING_COLUMN].tolist()]
    record.append(report.as_dict()["per_language"])
    return hashlib.sha256(json.dumps(record, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


# recorded at commit af73e8d (before the #28 speed changes), compiled build; PHP's and Ruby's k_shift_snippet /
# random_permutation re-recorded when a method stopped taking the name of a method it calls (2026-11-27)
DIGESTS: dict[str, dict[str, str]] = {
    "python-cosqa-pool": {
        "no_comment": "e57226dcf683b0e9",
        "full_hash": "740b27158490c9d4",
        "k_shift_dataset-3": "21b9ceccda9d1448",
        "k_shift_dataset-64": "d34156016d274f16",
        "k_shift_snippet-3": "0bb73e1404751451",
        "k_shift_snippet-64": "52eb8579303ad2a6",
        "random_permutation": "d0d0ef49bd68bc8d",
        "most_popular": "b40aa1c919db4e6d",
        "ordered_id": "46a00e5ea2aed772",
        "advtest_normalize": "f6647dd07b2d94fe",
        "advtest_normalize_scoped": "84307dd7e1c2761b",
    },
    "ruby-csn": {
        "no_comment": "0913823d47bfa525",
        "full_hash": "bf912ddae3be29b5",
        "k_shift_dataset-3": "1126bac3d219c54f",
        "k_shift_dataset-64": "3061af7dc3392907",
        "k_shift_snippet-3": "997752a723fa8454",
        "k_shift_snippet-64": "6d1abe6a9fc73739",
        "random_permutation": "8d9906d1b9937cd5",
        "most_popular": "62d32985b278d220",
        "ordered_id": "817bf50868ac33e5",
        "advtest_normalize_scoped": "7ba40dea8730fb15",
    },
    "go-gecs": {
        "no_comment": "38f37865e0431e83",
        "full_hash": "01f025b710d10abc",
        "k_shift_dataset-3": "47366ba58ce099a6",
        "k_shift_dataset-64": "0a4751da7d976f82",
        "k_shift_snippet-3": "b8ff67f5f30b8166",
        "k_shift_snippet-64": "7d83d193616e0d47",
        "random_permutation": "136b0bec727f58c2",
        "most_popular": "dc46a78d6d064d5e",
        "ordered_id": "416cfe3d362c90bb",
        "advtest_normalize_scoped": "31e6e71a46dd0d2b",
    },
    "java-gecs": {
        "no_comment": "80072395889ea989",
        "full_hash": "7daee4363e274442",
        "k_shift_dataset-3": "fcc0bf4c449212da",
        "k_shift_dataset-64": "6cdc1b7a6e079070",
        "k_shift_snippet-3": "25947917ea01f141",
        "k_shift_snippet-64": "fc4514bcf433d2cd",
        "random_permutation": "6b7c2b2993e3c166",
        "most_popular": "782777caeed89a6d",
        "ordered_id": "038b1a1acee69b2b",
        "advtest_normalize_scoped": "d6d898f4bd3632b2",
    },
    "javascript-gecs": {
        "no_comment": "a20ac1bf36bbd4dd",
        "full_hash": "c389eea0b69b5ea6",
        "k_shift_dataset-3": "671ce005561d400d",
        "k_shift_dataset-64": "4519e656700f9209",
        "k_shift_snippet-3": "eb5feca00cf7b8b3",
        "k_shift_snippet-64": "b195102cbd12fd3a",
        "random_permutation": "bb4835c98d1c4d63",
        "most_popular": "d6e7187cb11cbb3e",
        "ordered_id": "bc1156e5cd78f941",
        "advtest_normalize_scoped": "ec4aa4c0773bcfad",
    },
    "php-gecs": {
        "no_comment": "92d7847acbfad094",
        "full_hash": "990750399069a5ca",
        "k_shift_dataset-3": "baadad6ab6eb0e25",
        "k_shift_dataset-64": "1bb8b24d9184c140",
        "k_shift_snippet-3": "f4e7e0c9f05c8666",
        "k_shift_snippet-64": "b6b4561a1d8ae96a",
        "random_permutation": "bb0c127b613afa9b",
        "most_popular": "d25e7830cdc627a3",
        "ordered_id": "32b34d7f5f2c3323",
        "advtest_normalize_scoped": "9f13d032e53572b8",
    },
    "ruby-gecs": {
        "no_comment": "266d31165c7c70a0",
        "full_hash": "d6fc4779283eeb35",
        "k_shift_dataset-3": "91ce440d12a80c75",
        "k_shift_dataset-64": "0fcaf23b596b2069",
        "k_shift_snippet-3": "f78a85deb401c782",
        "k_shift_snippet-64": "db6d2a67c84f1b24",
        "random_permutation": "6e903894c9e5e62f",
        "most_popular": "a567a9c79203d370",
        "ordered_id": "952a0d6daf09033d",
        "advtest_normalize_scoped": "bc089ef372dc7c9e",
    },
    "r-statcodesearch": {
        "no_comment": "a083d80f0cd072f3",
        "full_hash": "85de94837aa00530",
        "k_shift_dataset-3": "304c5c5158c831b5",
        "k_shift_dataset-64": "6b81643025591ca9",
        "k_shift_snippet-3": "f6aaf4caf3365a45",
        "k_shift_snippet-64": "5cde3cd3d9931225",
        "random_permutation": "0cfe50c7aa3c2023",
        "most_popular": "fdb8f3792b23236f",
        "ordered_id": "3bf1d4dd506bbeda",
        "advtest_normalize_scoped": "1b78ec941cc1a8df",
    },
    "java-tlcodesum": {
        "no_comment": "bea830f73732dbb1",
        "full_hash": "ce9867439fbae40e",
        "k_shift_dataset-3": "bcf563f563cb27ef",
        "k_shift_dataset-64": "d8cfc8622c5175b8",
        "k_shift_snippet-3": "fbfe6a7719756fb0",
        "k_shift_snippet-64": "0ac439fcf66b5abd",
        "random_permutation": "b5f145b481ba1fd3",
        "most_popular": "576e50fed26f481c",
        "ordered_id": "4a385bce6e10d28a",
        "advtest_normalize_scoped": "330f0f80bb4998f4",
    },
}

SETS = real_sets()


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_attacks_give_the_recorded_output_on_real_code(name: str) -> None:
    if name not in SETS:
        pytest.skip(f"{name}: its data is not in {SHARED_DATA}")
    language, codes = SETS[name]
    found = {spec: digest(language, codes, spec) for spec in DIGESTS[name]}
    assert found == DIGESTS[name]


def test_every_set_and_attack_is_pinned() -> None:
    if not SETS:
        pytest.skip(f"no released code in {SHARED_DATA}")
    for name, (language, _) in SETS.items():
        expected = [spec for spec in SPECS if language in languages(parse_spec(spec))]
        assert sorted(DIGESTS.get(name, {})) == sorted(expected), name


if __name__ == "__main__":  # print the digests of this checkout
    out = {
        name: {spec: digest(language, codes, spec) for spec in SPECS if language in languages(parse_spec(spec))}
        for name, (language, codes) in SETS.items()
    }
    print(json.dumps(out, indent=4))
