"""Reference twin of CodeXGLUE code-to-text's ``read_examples``: the source and target text its model is fed.

Source: microsoft/CodeXGLUE at commit ac74a62802a0dd159b3258c78a2df8ad36cdf2b9,
``Code-Text/code-to-text/code/run.py`` (blob e30eaf1b149ae9408794b4da5a2a2ab443c72024, last changed in
bac029cb01c2d4476afa812c424439846b5c9920). ``Example`` and ``read_examples`` are the original's code,
statement for statement (re-indented for ruff).
"""

from __future__ import annotations

import json


class Example:
    """A single training/test example."""

    def __init__(
        self,
        idx,
        source,
        target,
    ):
        self.idx = idx
        self.source = source
        self.target = target


def read_examples(filename):
    """Read examples from filename."""
    examples = []
    with open(filename, encoding="utf-8") as f:
        for idx, line in enumerate(f):
            line = line.strip()
            js = json.loads(line)
            if "idx" not in js:
                js["idx"] = idx
            code = " ".join(js["code_tokens"]).replace("\n", " ")
            code = " ".join(code.strip().split())
            nl = " ".join(js["docstring_tokens"]).replace("\n", "")
            nl = " ".join(nl.strip().split())
            examples.append(
                Example(
                    idx=idx,
                    source=code,
                    target=nl,
                )
            )
    return examples
