"""Whatever a renaming strategy proposes, ``settle`` makes of it a renaming that ``rename_edits`` accepts.

``settle`` is where a renaming attack makes its proposals valid, unique and capture-free; ``rename_edits``
(the splice of every attack) checks the same rules again and raises on a violation, which stops the whole
attack. Where the two disagree, an attack crashes on some snippet of a real dataset: ``most_popular+
k_shift_dataset-2`` on the CoSQA code pool did, on a method that calls itself (``self.value`` in
``def value``): ``k_shift_dataset``'s donor gave the method its own name, ``settle`` kept it (a name that does
not change cannot capture anything) and ``rename_edits`` refused it as "a member of its class it uses".
This checks the two agree on every snippet of real code in all seven languages, for proposals aimed at
every rule: the names kept, shifted among the snippet's own, the members it uses, the names it uses
without defining them, the function-name keywords, one name for all.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from corpora import local_functions, shared_functions

from csbench.attacks import renaming as R
from csbench.code.identifiers import IMPLEMENTED, rename_edits

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PER_LANGUAGE = 400


def _codes(language: str) -> list[str]:
    codes = shared_functions(language)
    pool = SHARED_DATA / "cosqa" / "code_idx_map.txt"
    if language == "python" and pool.is_file():  # CodeSearchNet Python functions (methods calling themselves)
        codes += list(json.loads(pool.read_text(encoding="utf-8")))
    try:
        codes += local_functions(language, PER_LANGUAGE)
    except pytest.skip.Exception:
        if not codes:
            raise
    return list(dict.fromkeys(codes))


def _proposals(ids) -> list[dict[str, str]]:
    names = list(ids.names)
    aimed = sorted(ids.members) + sorted(ids.reserved)[:5] + sorted(ids.fun_keywords)[:5] + names + ["self", "cls"]
    return [
        {name: name for name in names},  # every name kept
        {name: names[(j + 1) % len(names)] for j, name in enumerate(names)},  # shifted among its own
        {name: names[(j + 2) % len(names)] if j else name for j, name in enumerate(names)},  # the first kept
        {name: aimed[j % len(aimed)] for j, name in enumerate(names)},  # members, used names, keywords
        {name: aimed[(j + 3) % len(aimed)] for j, name in enumerate(names)},
        {name: "value" for name in names},  # one name for all
        {name: f"{name}_1" for name in names},
    ]


@pytest.mark.parametrize("language", IMPLEMENTED)
def test_every_settled_renaming_is_accepted(language) -> None:
    codes = _codes(language)
    refused, tried = [], 0
    for code in codes:
        for keep_comments in (False, True):
            try:
                analysis = R.analyse(code, language, keep_comments)
            except Exception:  # the attack reports these snippets as not analysable
                continue
            ids = analysis.identifiers
            if not ids.names:
                continue
            for proposals, analysed_again in itertools.product(_proposals(ids), (False, True)):
                mapping = R.settle(ids, language, proposals, analysed_again)
                tried += 1
                try:
                    rename_edits(language, mapping, ids, analysis.edits)
                    analysis.renamed(mapping)
                except ValueError as err:
                    refused.append(f"{err}: {proposals} -> {mapping} in {code[:120]!r}")
    print(f"{language}: {len(codes)} functions, {tried} settled renamings")
    assert tried > len(codes)
    assert refused == [], refused[:3]


def test_a_method_may_keep_the_name_it_calls_itself_by() -> None:
    """The snippet of the CoSQA pool ``most_popular`` had renamed, keeping its name in the next step."""
    code = "def value(self,x):\n        if not x:\n            return ''\n        return ', '.join(map(self.value, x))"
    analysis = R.analyse(code, "python", True)
    assert "value" in analysis.identifiers.members and analysis.identifiers.roles["value"] == "fun"
    assert analysis.renamed({"value": "value", "x": "items"}) == code.replace("x", "items")
    other = R.analyse("def value(self, x):\n    return self.helper(x)\n", "python").identifiers
    with pytest.raises(ValueError, match="may not be named"):  # the name of another method it calls: refused
        rename_edits("python", {"value": "helper"}, other)
