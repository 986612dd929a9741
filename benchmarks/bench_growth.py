"""How the phases grow with the corpus (issue #28 item 3): wall time, CPU time and peak RSS of
prepare -> attack (ordered_id) -> index -> evaluate (full-corpus) for bm25, nbow and MiniLM, each
phase run through the package CLI under ``/usr/bin/time -v``, on corpora of 10 k, 100 k and 1 M
functions, with the growth exponent log(t2/t1)/log(n2/n1) between consecutive sizes.

The corpora are real functions: the Python standard library of the running interpreter, extracted by
the ``local-source`` reader (``prepare``) from a generated source tree. The standard library has
about 4,500 documented functions after CodeSearchNet's filters and de-duplication, so the tree
holds the library ``copies`` times, each copy in its own folder (``copy_<k>/``, distinct paths and
therefore distinct ids) and, in copies k >= 1, every ``def name`` renamed ``name_c<k>`` so that the
copies are not dropped as duplicates. The output says how many copies each size needed.

Every size is a scratch project under ``--work`` (nothing is written to the checkout):

    .venv/bin/python benchmarks/bench_growth.py --work /tmp/growth --json /tmp/growth/growth.json \
        --sizes 10000,100000,1000000 --minilm-max 10000 --deadline 01:50

``--deadline HH:MM`` (UTC) kills a phase still running then and skips the rest (reported as not
run). The nbow checkpoint is trained per size (tiny.yaml's settings: dim 32, one epoch, capped at 50 steps) on that
size's train split; training is timed but is not one of the measured phases. The embedding cache is
pointed at an empty folder per size (``CSBENCH_EMBEDDING_CACHE``), so nothing is served from it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CSBENCH = Path(sys.executable).parent / "csbench"
EXCLUDE = ["site-packages", "test", "tests", "idle_test", "__pycache__"]
DEF = re.compile(r"(?m)^([ \t]*(?:async[ \t]+)?def[ \t]+)(\w+)")
# functions a full copy of the standard library gives (the prepared python-stdlib corpus, all splits);
# measured again by each run (the card's counts), only used to choose how many copies to write
FUNCTIONS_PER_COPY = 4527
SPLIT = {"train": 80, "valid": 10, "test": 10}  # the default study's (and about CodeSearchNet's) split
MODELS = {
    "bm25": [],
    "nbow": ["--loss", "ce", "--seed", "0", "--inference", "confused"],
    "minilm": [],
}


def stdlib_files() -> list[Path]:
    """The standard library's .py files, without the excluded folders, in sorted order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDE and not os.path.islink(os.path.join(dirpath, d)))
        found.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
    return sorted(found)


def write_tree(target: Path, size: int) -> dict:
    """A source tree of about ``size`` documented functions: whole copies of the standard library,
    the last one cut by file count. Returns what was written."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = stdlib_files()
    copies = math.ceil(size / FUNCTIONS_PER_COPY)
    last = round(len(files) * (size / FUNCTIONS_PER_COPY - (copies - 1)))
    if target.exists():
        shutil.rmtree(target)
    written = 0
    for k in range(copies):
        for file in files if k < copies - 1 else files[:last]:
            try:
                text = file.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if k:
                text = DEF.sub(lambda m, k=k: f"{m.group(1)}{m.group(2)}_c{k}", text)
            out = target / f"copy_{k:04d}" / file.relative_to(root)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
            written += 1
    return {"copies": copies, "files": written, "stdlib_files": len(files)}


def config(dataset: str, source: Path) -> dict:
    return {
        "study": f"growth-{dataset}",
        "grid": {
            "datasets": [dataset],
            "attacks": ["no_comment", "ordered_id"],
            "models": ["bm25", "minilm"],
            "trained": {
                "models": ["nbow"],
                "attacks": ["no_comment", "ordered_id"],
                "losses": ["ce"],
                "seeds": [0],
                "inference": ["confused"],
            },
            "summarization": {"models": [], "zero_shot": []},
        },
        "datasets": {dataset: {"kind": "local-source", "language": "python", "source": str(source)}},
        "extraction": {"min_query_tokens": 3, "min_code_lines": 3, "split": SPLIT},
        "robustness": {"datasets": [], "attacks": []},
        "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
        "models": {
            "nbow": {
                "dim": 32,
                "max_code_len": 64,
                "code_min_count": 2,
                "training": {
                    "lr": 0.01,
                    "batch_size": 32,
                    "epochs": 1,
                    "max_steps": 50,
                    "schedule": "constant",
                    "validations_per_epoch": 1,
                    "checkpoint_every": None,
                },
            }
        },
    }


def parse_time(text: str) -> dict:
    """wall / user / sys seconds and the peak RSS (MiB) of a ``/usr/bin/time -v`` report."""
    fields = dict(line.strip().rsplit(": ", 1) for line in text.splitlines() if ": " in line and line.startswith("\t"))
    wall = fields.get("Elapsed (wall clock) time (h:mm:ss or m:ss)", "0:0")
    seconds = 0.0
    for part in wall.split(":"):
        seconds = seconds * 60 + float(part)
    user, system = float(fields.get("User time (seconds)", 0)), float(fields.get("System time (seconds)", 0))
    return {
        "wall_s": round(seconds, 2),
        "cpu_s": round(user + system, 2),
        "peak_rss_mib": round(int(fields.get("Maximum resident set size (kbytes)", 0)) / 1024, 1),
    }


def run_phase(project: Path, args: list[str], env: dict, deadline: float | None, log: Path) -> dict:
    """One CLI call under /usr/bin/time -v in ``project``; its measures, or why it did not finish."""
    remaining = None if deadline is None else deadline - time.time()
    if remaining is not None and remaining < 5:
        return {"status": "not run: deadline reached before it started"}
    timing = project / "time.txt"
    cmd = ["/usr/bin/time", "-v", "-o", str(timing), str(CSBENCH), "-q", *args]
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=out, stderr=out, start_new_session=True)
        try:
            rc = proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"status": f"not run to the end: killed at the deadline after {remaining:.0f} s"}
    if rc:
        return {"status": f"failed (exit {rc}, see {log})"}
    return {"status": "ok", **parse_time(timing.read_text())}


def card_counts(project: Path, dataset: str) -> dict:
    card = json.loads((project / "data/prepared" / dataset / "card.json").read_text())
    return {split: stats["pairs"] for split, stats in card["splits"].items()}


def bench_size(size: int, work: Path, models: list[str], minilm_max: int, jobs: int, deadline: float | None) -> dict:
    dataset = f"growth-{size // 1000}k"
    project = work / dataset
    project.mkdir(parents=True, exist_ok=True)
    tree = write_tree(work / f"source-{dataset}", size)
    (project / "growth.yaml").write_text(yaml.safe_dump(config(dataset, work / f"source-{dataset}"), sort_keys=False))
    cache = project / "embedding-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", CSBENCH_OFFLINE="1", CSBENCH_EMBEDDING_CACHE=str(cache))
    log = project / "phases.log"
    cfg = ["--config", str(ROOT / "params.yaml"), "--config", "growth.yaml"]
    base = [*cfg, "--dataset", dataset]
    result: dict = {"size": size, "dataset": dataset, "tree": tree, "phases": {}}
    phases = result["phases"]
    phases["prepare"] = run_phase(project, ["prepare", *base, "--jobs", str(jobs)], env, deadline, log)
    if phases["prepare"]["status"] == "ok":
        result["splits"] = card_counts(project, dataset)
    if "attack" not in models:
        return result
    attack = ["attack", *base, "--attack", "ordered_id", "--jobs", str(jobs)]
    phases["attack"] = run_phase(project, attack, env, deadline, log)
    for model in (m for m in models if m in MODELS):
        if model == "minilm" and size > minilm_max:
            skip = {"status": f"not run: size above --minilm-max {minilm_max}"}
            phases["index minilm"] = phases["evaluate minilm"] = skip
            continue
        run = [*base, "--attack", "ordered_id", "--model", model, *MODELS[model]]
        if model == "nbow":
            phases["train nbow (setup)"] = run_phase(project, ["train", *run[:-2]], env, deadline, log)
        phases[f"index {model}"] = run_phase(project, ["index", *run], env, deadline, log)
        phases[f"evaluate {model}"] = run_phase(project, ["evaluate", *run], env, deadline, log)
    return result


def exponents(results: list[dict]) -> None:
    """Adds each phase's growth exponents against the previous size that measured it."""
    for prev, cur in itertools.pairwise(results):
        for phase, m in cur["phases"].items():
            p = prev["phases"].get(phase, {})
            if m.get("status") != "ok" or p.get("status") != "ok":
                continue
            n1, n2 = prev.get("splits"), cur.get("splits")
            ratio = (sum(n2.values()) / sum(n1.values())) if n1 and n2 else cur["size"] / prev["size"]
            for key, name in (("wall_s", "wall_exp"), ("cpu_s", "cpu_exp"), ("peak_rss_mib", "rss_exp")):
                if p[key] > 0 and m[key] > 0:
                    m[name] = round(math.log(m[key] / p[key]) / math.log(ratio), 2)


def markdown(results: list[dict], load: str) -> str:
    lines = [
        f"Load average at the start: {load}",
        "",
        "| size | functions (train/valid/test) | copies of the stdlib | phase | wall s | CPU s | peak RSS MiB "
        "| exponent wall / CPU / RSS |",
        "|---:|---|---:|---|---:|---:|---:|---|",
    ]
    for r in results:
        s = r.get("splits")
        counts = f"{sum(s.values()):,} ({s['train']:,}/{s['valid']:,}/{s['test']:,})" if s else "-"
        for phase, m in r["phases"].items():
            if m.get("status") != "ok":
                lines.append(f"| {r['size']:,} | {counts} | {r['tree']['copies']} | {phase} | {m['status']} | | | |")
                continue
            exp = " / ".join(str(m.get(k, "-")) for k in ("wall_exp", "cpu_exp", "rss_exp"))
            lines.append(
                f"| {r['size']:,} | {counts} | {r['tree']['copies']} | {phase} | {m['wall_s']} | {m['cpu_s']} "
                f"| {m['peak_rss_mib']} | {exp} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="scratch folder for the trees and projects")
    parser.add_argument("--json", type=Path, required=True, help="where to write the results")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument(
        "--phases",
        default="attack,bm25,nbow,minilm",
        help="after prepare (always run): attack, then each model's index and evaluate (e.g. '' for prepare alone)",
    )
    parser.add_argument("--minilm-max", type=int, default=10000, help="largest size MiniLM runs on")
    parser.add_argument("--jobs", type=int, default=1, help="prepare / attack worker processes")
    parser.add_argument("--deadline", help="HH:MM UTC: kill a phase running then, skip the rest")
    args = parser.parse_args()
    deadline = None
    if args.deadline:
        now = dt.datetime.now(dt.UTC)
        hh, mm = map(int, args.deadline.split(":"))
        deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0).timestamp()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results.append(bench_size(size, args.work, args.phases.split(","), args.minilm_max, args.jobs, deadline))
        exponents(results)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"load_start": load, "results": results}, indent=1))
    end_load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(markdown(results, load) + f"\n\nLoad average at the end: {end_load}")
    args.json.write_text(json.dumps({"load_start": load, "load_end": end_load, "results": results}, indent=1))


if __name__ == "__main__":
    main()
