#!/usr/bin/env bash
# Set up csbench on a fresh machine: Debian packages (when apt is usable), a virtualenv in .venv
# with torch 2.13.0 (CPU) installed first and everything else pinned by requirements.lock.
# requirements.lock also pins mkdocs and mkdocs-material, which build the documentation site (docs/,
# mkdocs.yml; tests/package/test_docs.py runs `mkdocs build --strict`).
# Idempotent: a second run checks stamps and returns in about a second.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV=.venv
STAMPS=$VENV/.csbench-stamps
PYTHON=${PYTHON:-python3}
# System packages later phases need: WordNet for synonym perturbations (nltk reads its files),
# apertium with the English→Spanish pair for the comment-translation attack, and real source
# code in six more languages for the local multi-language corpus (workflow/configs/local-7lang.yaml).
# chromium: only tests/results/test_report.py needs it (it opens the HTML report headless; skipped without it).
# liblucene8-java: only tests/models/test_bm25_analyzer.py needs it (Lucene's StandardAnalyzer, the twin of BM25's
# analyzer; skipped without it).
# golang-1.19-go php-cli ruby r-base-core: the compiler front ends (gofmt, php, ruby, R's parse(); javac
# and node come with the packages above) that tests/attacks/test_meaning_preservation.py parses attacked code
# with (skipped without them).
APT_PACKAGES=(
  wordnet-base wordnet-sense-index apertium apertium-eng-spa
  golang-1.19-src openjdk-17-source libruby3.1 node-lodash node-express
  php-symfony-console php-monolog php-guzzlehttp-psr7 php-league-commonmark
  chromium liblucene8-java
  golang-1.19-go php-cli ruby r-base-core
)

say() { printf 'setup: %s\n' "$*" >&2; }

install_system_packages() {
  local missing=()
  if ! command -v dpkg-query >/dev/null 2>&1; then
    say "no dpkg: install ${APT_PACKAGES[*]} by hand for synonym perturbations and translation attacks"
    return 0
  fi
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
      say "cannot install ${missing[*]} (not root, no sudo): the features needing them will say so"
      return 0
    fi
  fi
  say "installing Debian packages: ${missing[*]}"
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null; }; then
    say "apt-get failed for ${missing[*]}: the features needing them will fail with a message"
  fi
}

create_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" - <<'PY' || { say "csbench needs Python 3.11 (the pinned torch 2.13.0 CPU build is for 3.11)"; exit 1; }
import sys
sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)
PY
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
}

# The hot modules of the code attacks, which `pip install -e .` compiles with Cython (setup.py;
# csbench._native.HOT_MODULES), and the C modules it compiles (csbench._native.C_MODULES): editing one
# reinstalls, so the compiled modules are rebuilt.
COMPILED_SOURCES=(
  src/csbench/code/identifiers.py src/csbench/code/comments.py src/csbench/code/parsing.py
  src/csbench/code/treequery.py src/csbench/attacks/__init__.py src/csbench/attacks/renaming.py
  src/csbench/attacks/engine.py
  src/csbench/code/languages/_python_scopes.py src/csbench/code/languages/go.py
  src/csbench/code/languages/java.py src/csbench/code/languages/javascript.py src/csbench/code/languages/php.py
  src/csbench/code/languages/ruby.py src/csbench/code/languages/r.py
  src/csbench/evaluate/_select.py
  src/csbench/code/_tswalk.c
)

install_python_packages() {
  local want have=""
  want=$(cat requirements.lock pyproject.toml setup.py "${COMPILED_SOURCES[@]}" | sha256sum | cut -d' ' -f1)
  [ -f "$STAMPS/python" ] && have=$(cat "$STAMPS/python")
  if [ "$want" = "$have" ] && "$VENV/bin/python" -c "import csbench" 2>/dev/null; then
    return 0
  fi
  local pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
  say "installing torch==2.13.0 first (CPU build), then requirements.lock"
  "${pip[@]}" install torch==2.13.0
  local constraint
  constraint=$(mktemp)
  echo "torch==2.13.0" >"$constraint"
  "${pip[@]}" install -c "$constraint" -r requirements.lock
  say "installing csbench, its code attack modules compiled with Cython (about a minute)"
  "${pip[@]}" install --no-deps -e .
  rm -f "$constraint"
  "$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import os
import sys

import csbench._native as native

assert md.version("torch").startswith("2.13.0"), md.version("torch")
assert md.version("tree-sitter") == "0.21.3", "tree-sitter-languages needs tree-sitter 0.21.3"
pure = [name for name, how in native.status().items() if how != native.COMPILED]
if pure and os.environ.get(native.PURE_ENV) != "1":
    print("setup: not compiled with Cython (pip install -v --no-deps -e . shows why), running as pure Python: "
          + ", ".join(pure), file=sys.stderr)
PY
  mkdir -p "$STAMPS"
  echo "$want" >"$STAMPS/python"
}

# Real R code with roxygen documentation for the r-cran corpus: the CRAN sources of three Debian
# packages (binary r-cran packages hold no R sources). apt-get source with a private sources list
# (system apt configuration untouched); apt verifies the tarballs against the signed .dsc files.
R_SOURCE_DIR=.sources/r-cran-src
R_SOURCE_PACKAGES=(r-cran-glue r-cran-stringr r-cran-purrr)
fetch_r_sources() {
  [ -d "$R_SOURCE_DIR" ] && [ -n "$(ls -A "$R_SOURCE_DIR" 2>/dev/null)" ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get: the r-cran corpus needs the CRAN sources of ${R_SOURCE_PACKAGES[*]} in $R_SOURCE_DIR"
    return 0
  fi
  local tmp
  tmp=$(mktemp -d)
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
    >"$tmp/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache")
  say "fetching R sources (${R_SOURCE_PACKAGES[*]}) for the r-cran corpus"
  if apt-get "${opts[@]}" -qq update >/dev/null 2>&1; then
    # exits 100 here because the .debian.tar.xz parts answer 404; the .orig tarballs we need arrive
    (cd "$tmp" && apt-get "${opts[@]}" -qq source --download-only "${R_SOURCE_PACKAGES[@]}" >/dev/null 2>&1) || true
  fi
  if ls "$tmp"/*.orig.tar.gz >/dev/null 2>&1; then
    mkdir -p "$R_SOURCE_DIR.tmp"
    for archive in "$tmp"/*.orig.tar.gz; do tar xzf "$archive" -C "$R_SOURCE_DIR.tmp"; done
    mv "$R_SOURCE_DIR.tmp" "$R_SOURCE_DIR"
  else
    say "could not fetch the R sources: the r-cran corpus will say what is missing"
  fi
  rm -rf "$tmp"
}

install_system_packages
fetch_r_sources
create_venv
install_python_packages
say "ready ($VENV)"
