"""Reference twin of ElasticSearch's default ``standard`` analyzer: Lucene's own StandardAnalyzer,
run, not transcribed.

Source: Apache Lucene 8.7.0, ``org.apache.lucene.analysis.standard.StandardAnalyzer`` (lucene-core),
as Debian packages it (``liblucene8-java`` 8.8.1-4, ``/usr/share/java/lucene-core-8.7.0.jar``), with an empty
stop-word set, which is ElasticSearch's default for the ``standard`` analyzer (``stopwords: _none_``).
CodeSearchNet's ElasticSearch baseline (Husain et al. 2019, section 4.2: "We use the default
ElasticSearch tokenizer") analysed its whole-function field and its queries with it; csbench's
:func:`csbench.code.tokens.standard_tokens` re-implements it in Python.

:func:`lucene_tokens` compiles ``LuceneStandardTokens.java`` (beside this file) once into a temporary
folder with ``javac`` and runs it on a batch of texts. :func:`unavailable` says why it cannot run
(no JDK, no Lucene jar) so that tests skip with that reason.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LUCENE_JARS = [Path("/usr/share/java/lucene-core.jar"), *sorted(Path("/usr/share/java").glob("lucene-core-8*.jar"))]


def _jar() -> Path | None:
    return next((jar for jar in LUCENE_JARS if jar.is_file()), None)


def unavailable() -> str | None:
    """Why the twin cannot run here, or None."""
    if not (shutil.which("javac") and shutil.which("java")):
        return "no JDK (javac / java) on PATH"
    if _jar() is None:
        return "Lucene not installed (Debian package liblucene8-java; scripts/setup.sh installs it)"
    return None


@functools.cache
def _compiled() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="csbench-lucene-"))
    subprocess.run(
        ["javac", "-cp", str(_jar()), "-d", str(folder), str(HERE / "LuceneStandardTokens.java")],
        check=True,
        capture_output=True,
    )
    return folder


def lucene_tokens(texts: list[str]) -> list[list[str]]:
    """Lucene StandardAnalyzer's tokens of each text (NUL characters, the batch separator, become spaces)."""
    payload = "\0".join(text.replace("\0", " ") for text in texts).encode("utf-8")
    done = subprocess.run(
        ["java", "-cp", f"{_jar()}:{_compiled()}", "LuceneStandardTokens"],
        input=payload,
        capture_output=True,
        check=True,
    )
    lines = done.stdout.decode("utf-8").split("\0")[: len(texts)]
    return [line.split("\1") if line else [] for line in lines]
