"""Issue 21, item 10: every release file with a public copy readable here is pinned, each pin says
where it was measured, the others say why they are not, and the download error says it too.

The pins were measured on the repository snapshots the search tools' ``fetch`` brings (``git
cat-file blob <commit>:<path> | sha256sum``); blobs of 4 MiB or more are not in those snapshots, so
those files are pinned by their git object id (``git-blob:``, from the tree), which download checks
as ``git hash-object`` would.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_releases import PINNED_COPIES

from csbench.datasets import DATASETS
from csbench.datasets.base import DatasetSpec, Need, RemoteFile
from csbench.datasets.download import (
    DownloadError,
    fetch_dataset,
    git_blob_id,
    pins_of,
    unpinned_reason,
)
from csbench.datasets.releases import RELEASES

# (dataset, file) -> (pin, repository, commit, path there). The commit is the one the blob was read
# at (the newest of the snapshot unless the file was deleted later).
REPOSITORY_PINS = {
    ("statcodesearch", "statcodesearch.json"): (
        "sha256:b516bc8701662be9cada93010587c378043ba6338852b4e837736f433cc6124b",
        "drndr/gencodesearchnet", "70db22a", "data/statcodesearch_full/statcodesearch.json",
    ),
    ("cosqa", "cosqa-train.json"): (
        "git-blob:2a6097da0e2c714fd4b43176d6aaa7ae5eb58b89",
        "microsoft/CodeXGLUE", "ac74a62", "Text-Code/NL-code-search-WebQuery/CoSQA/cosqa-train.json",
    ),
    ("cosqa", "cosqa-dev.json"): (
        "sha256:247d48d6072f122cdd16b38974d50bc3253d80d42c3ca89790df3a7a28627cad",
        "microsoft/CodeXGLUE", "ac74a62", "Text-Code/NL-code-search-WebQuery/CoSQA/cosqa-dev.json",
    ),
    ("cosqa-retrieval", "code_idx_map.txt"): (
        "sha256:be8a910ca03cb9f1b38a0eba6dc8109eeb8040a40aaba1a467a7b8426d261f3f",
        "Jun-jie-Huang/CoCLR", "14ebcac", "data/search/code_idx_map.txt",
    ),
    ("cosqa-retrieval", "cosqa-retrieval-dev-500.json"): (
        "sha256:ccdfffee7ae1f1cf1a0406566a61c984f4fbce678c8ea108eedd03d11bff9518",
        "Jun-jie-Huang/CoCLR", "14ebcac", "data/search/cosqa-retrieval-dev-500.json",
    ),
    ("cosqa-retrieval", "cosqa-retrieval-test-500.json"): (
        "sha256:27d3552b2e7dd86cf9f9a0b3c135e6777d4faafa9c29fb1b9b01ece945974ad6",
        "Jun-jie-Huang/CoCLR", "14ebcac", "data/search/cosqa-retrieval-test-500.json",
    ),
    ("cosqa-webquerytest", "test_webquery.json"): (
        "sha256:a96ce5afe45c414251defac32b4af6c2a872c4ea3dc46f7c7c1f83eab142139f",
        "microsoft/CodeXGLUE", "ac74a62", "Text-Code/NL-code-search-WebQuery/data/test_webquery.json",
    ),
    ("cosqa-webquerytest", "test_webquery.json#labelled"): (
        "sha256:7f255dac10e521ccc51a68caaa83a4ab064bb6617d40bbf39618144d5cdea933",
        "Jun-jie-Huang/CoCLR", "778daa8", "data/qa/test_webquery.json",
    ),
    ("advtest", "advtest-dataset.zip"): (
        "git-blob:42715ad1bc0a134ba7cda59fef11de6d01520f1d",
        "microsoft/CodeXGLUE", "ac74a62", "Text-Code/NL-code-search-Adv/dataset.zip",
    ),
    ("tl-codesum", "data/test/test.token.code"): (
        "sha256:45200ca3034a13da30de45f65204d1ee315ddf2774718d1c2953f6b7de267eef",
        "xing-hu/TL-CodeSum", "51b6849", "data/test/test.token.code",
    ),
    ("tl-codesum", "data/test/test.token.nl"): (
        "sha256:8423e91de9fabef049b350c58df4772539cc14b6a7b35129e9ef877cdf52efaa",
        "xing-hu/TL-CodeSum", "51b6849", "data/test/test.token.nl",
    ),
    ("tl-codesum", "data/valid/valid.token.code"): (
        "sha256:e2f6a12244ea0f1078fc10ad3db3fce61bce3e0182e14b334e280475845d7477",
        "xing-hu/TL-CodeSum", "51b6849", "data/valid/valid.token.code",
    ),
    ("tl-codesum", "data/valid/valid.token.nl"): (
        "sha256:b5e729fd0f35f07a8c8ef32bd141b2c0db1a536021eed2b3db6bfaffc659508c",
        "xing-hu/TL-CodeSum", "51b6849", "data/valid/valid.token.nl",
    ),
    ("tl-codesum", "data/train/train.token.code"): (
        "git-blob:d1e00f9ba1786415d27e29ec2204d5eb30e242b4",
        "xing-hu/TL-CodeSum", "51b6849", "data/train/train.token.code",
    ),
    ("tl-codesum", "data/train/train.token.nl"): (
        "git-blob:6705f7c3ee36a5325788a02c20ac0aa1e3317170",
        "xing-hu/TL-CodeSum", "51b6849", "data/train/train.token.nl",
    ),
    ("csn-challenge", "queries.csv"): (
        "sha256:037509c717c2e164721f0fd3ea45cb05f36669551af643f53930a92b76b146cf",
        "github/CodeSearchNet", "106e827", "resources/queries.csv",
    ),
    ("csn-challenge", "annotationStore.csv"): (
        "sha256:0340af32b551ceadb74fec147f97642b7fedf3ff039e38fb86baff49ee899846",
        "github/CodeSearchNet", "106e827", "resources/annotationStore.csv",
    ),
    **{
        (f"csn-filtered-{lang}", "codexglue-code-to-text-dataset.zip"): (
            "git-blob:4a9e2be266988cb5fe0c27fa1e0e52cc59587ded",
            "microsoft/CodeXGLUE", "ac74a62", "Code-Text/code-to-text/dataset.zip",
        )
        for lang in ("go", "java", "javascript", "php", "python", "ruby")
    },
    **{
        (f"csn-filtered-{lang}", "graphcodebert-codesearch-dataset.zip"): (
            "git-blob:e229c0247430feeb5a3c0f22ffd7acbe3b2165f4",
            "microsoft/CodeBERT", "c0de43d", "GraphCodeBERT/codesearch/dataset.zip",
        )
        for lang in ("go", "java", "javascript", "php", "python", "ruby")
    },
}  # fmt: skip
# Pinned from shared/data's copies only (identical to CodeXGLUE's code-to-text output; no repository
# holds these derived files).
SHARED_ONLY_PINS = {
    ("csn-filtered-ruby", "dataset/ruby/test.jsonl"),
    ("csn-filtered-ruby", "dataset/ruby/valid.jsonl"),
}
# Unpinned, by reason: in no git repository (official zips on S3 / Hugging Face / Zenodo, GeCS's
# Zenodo files, Funcom's S3 archives), or derived by a kit's script.
UNPINNED_REASONS = {
    "zip": re.compile(r"^the zip is in no git repository|^it is in no git repository"),
    "zenodo": re.compile(r"^the file is only on Zenodo"),
    "s3": re.compile(r"^the archive is only on the authors' S3 bucket"),
    "derived": re.compile(r"^no repository holds the derived file"),
}


def all_files() -> dict[tuple[str, str], RemoteFile]:
    return {(spec.name, f.path): f for spec in RELEASES for f in spec.files}


def test_every_release_file_is_pinned_or_says_why_not():
    unpinned = {key: f for key, f in all_files().items() if not pins_of(f)}
    kinds = {}
    for key, remote in unpinned.items():
        reason = unpinned_reason(remote)
        matched = [kind for kind, pattern in UNPINNED_REASONS.items() if pattern.search(reason)]
        assert matched, f"{key}: no reason why it is not pinned ({reason!r})"
        kinds.setdefault(matched[0], []).append(key)
    # 6 language zips of csn-*, 6 of csn-filtered-*, AdvTest's python.zip; 6 Zenodo files of GeCS; 2 Funcom
    # archives; 3 AdvTest and 22 csn-filtered jsonl derived by the kits' scripts
    assert {kind: len(keys) for kind, keys in kinds.items()} == {"zip": 13, "zenodo": 6, "s3": 2, "derived": 25}


def test_pins_are_well_formed_and_say_where_they_were_measured():
    files = all_files()
    pinned = {key for key, f in files.items() if pins_of(f)}
    expected = {(name, path.split("#")[0]) for name, path in REPOSITORY_PINS} | SHARED_ONLY_PINS
    assert pinned == expected
    for (name, path), (pin, repository, commit, _) in REPOSITORY_PINS.items():
        remote = files[(name, path.split("#")[0])]
        assert pin in pins_of(remote), (name, path)
        assert repository in remote.note and f"commit {commit}" in remote.note, (name, path, remote.note)
    for remote in files.values():
        for pin in pins_of(remote):
            kind, _, value = pin.partition(":")
            assert re.fullmatch({"sha256": "[0-9a-f]{64}", "git-blob": "[0-9a-f]{40}"}[kind], value), pin
        sha256_pins = [p for p in pins_of(remote) if p.startswith("sha256:")]
        if len(sha256_pins) > 1:  # several published versions: no single size
            assert remote.size is None


def test_pinned_urls_name_the_commit_first_where_the_branch_may_move():
    files = all_files()
    for (name, path), (_, repository, commit, where) in REPOSITORY_PINS.items():
        remote = files[(name, path.split("#")[0])]
        first = remote.urls[0] if "#" not in path else remote.urls[-1]
        assert repository in first and where in first and re.search(rf"/{commit}[0-9a-f]*/", first), (name, path)


def test_git_blob_id_is_git_hash_object(tmp_path):
    sample = tmp_path / "sample.bin"
    sample.write_bytes(b"csbench\x00\xff" * 1000)
    data = sample.read_bytes()
    expected = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert git_blob_id(sample) == expected
    if shutil.which("git"):
        git = subprocess.run(["git", "hash-object", str(sample)], capture_output=True, text=True)
        assert git.stdout.strip() == expected


def _spec(*files: RemoteFile) -> DatasetSpec:
    return DatasetSpec(
        name="toy", kind="release", languages=("python",), description="", licence="", files=files,
        needs=lambda options, raw_dir: tuple(Need(f.path) for f in files),
    )  # fmt: skip


def test_a_file_pinned_by_its_git_object_id_is_verified_by_it(tmp_path):
    data = b"a kit\n" * 100
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    remote = RemoteFile("kit.txt", ("https://example.org/kit.txt",), None, pins=(f"git-blob:{blob}",))
    placed = tmp_path / "toy" / "kit.txt"
    placed.parent.mkdir(parents=True)
    placed.write_bytes(data)
    manifest = fetch_dataset(_spec(remote), tmp_path, offline=True, progress=False)
    record = manifest["reads"]["kit.txt"]
    assert record["verified"] == "pinned git blob id" and record["git_blob"] == blob and record["pinned"] is True
    assert record["sha256"] == hashlib.sha256(data).hexdigest()
    placed.write_bytes(data + b"!")
    with pytest.raises(DownloadError, match="matches none of the pinned checksums"):
        fetch_dataset(_spec(remote), tmp_path, offline=True, progress=False, accept_changed=True)


def test_a_file_with_two_published_versions_accepts_both_and_nothing_else(tmp_path):
    plain, labelled = b'[{"idx": 1}]', b'[{"idx": 1, "label": 1}]'
    remote = RemoteFile(
        "w.json",
        ("https://example.org/w.json",),
        hashlib.sha256(plain).hexdigest(),
        pins=(f"sha256:{hashlib.sha256(labelled).hexdigest()}",),
    )
    for i, data in enumerate((plain, labelled)):
        placed = tmp_path / str(i) / "toy" / "w.json"
        placed.parent.mkdir(parents=True)
        placed.write_bytes(data)
        assert fetch_dataset(_spec(remote), tmp_path / str(i), offline=True, progress=False)["complete"]
    placed.write_bytes(b"[]")
    with pytest.raises(DownloadError, match="matches none of the pinned checksums"):
        fetch_dataset(_spec(remote), tmp_path / "1", offline=True, progress=False, accept_changed=True)


def test_the_download_error_says_which_files_stay_unpinned_and_why(tmp_path):
    with pytest.raises(DownloadError) as failed:
        fetch_dataset(DATASETS.get("gecs-csn-ruby"), tmp_path, offline=True, progress=False)
    message = str(failed.value)
    assert "test_ruby.jsonl  (size unknown, sha256 not pinned)" in message
    assert "not pinned: the file is only on Zenodo (doi:10.5281/zenodo.8310891)" in message
    with pytest.raises(DownloadError) as failed:
        fetch_dataset(DATASETS.get("csn-filtered-go"), tmp_path, options={"splits": ["test"]}, offline=True)
    message = str(failed.value)
    assert "pinned: git blob id 4a9e2be266988cb5fe0c27fa1e0e52cc59587ded" in message  # the kit
    assert "not pinned: the zip is in no git repository" in message  # go.zip


def test_an_unpinned_file_is_recorded_on_first_use_and_its_change_noticed(tmp_path):
    placed = tmp_path / "gecs-csn-ruby" / "test_ruby.jsonl"
    placed.parent.mkdir(parents=True)
    placed.write_text('{"input": "a [CODESPLIT] b", "target": 1}\n')
    spec = DATASETS.get("gecs-csn-ruby")
    first = fetch_dataset(spec, tmp_path, offline=True, progress=False)["reads"]["test_ruby.jsonl"]
    assert first["verified"] == "first use" and first["sha256"] == hashlib.sha256(placed.read_bytes()).hexdigest()
    placed.write_text('{"input": "a [CODESPLIT] c", "target": 1}\n')
    with pytest.raises(DownloadError, match="does not match the recorded checksum"):
        fetch_dataset(spec, tmp_path, offline=True, progress=False)


def test_pinned_files_with_a_copy_in_shared_data_match_it(shared_data: Path):
    files = all_files()
    for key, relative in PINNED_COPIES.items():  # the release files shared/data holds verbatim
        data = (shared_data / relative).read_bytes()
        assert f"sha256:{hashlib.sha256(data).hexdigest()}" in pins_of(files[key]), key
    sample = (shared_data / "statcodesearch" / "sample.json").read_text()
    assert sample.startswith("[")  # the 60-record sample of the pinned statcodesearch.json (not the file)
