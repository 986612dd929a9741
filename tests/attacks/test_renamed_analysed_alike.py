"""A renamed snippet, analysed again, is analysed as the renaming says: what a composed attack relies on.

A composed spec (``most_popular+k_shift_dataset-2``) analyses the code its first renaming wrote. If that
renaming changed how the code reads to the analysis, the second renaming works from a wrong analysis and
can change what the code does: ``most_popular`` gave a plain function's first parameter the name ``self``
(``def checkfuncname(b, frame): ... b.line`` became ``def line(self, a): ... self.line``), the analysis
then read a method whose ``self.line`` is the method itself, and ``k_shift_dataset`` renamed the attribute
with the function (``self.b``). A single renaming may name a parameter ``self`` (the code means the same);
a renaming whose code a later one analyses settles with ``analysed_again`` (only a receiver takes a
receiver's name), as the engine does for every renaming of a spec but its last.

So for every renaming strategy, on real code of all seven languages: every name the renamed code's
analysis defines is the new name of one the original's defines, with the same role and the same number
of occurrences, when settled for code analysed again; and also without it in every language that has no
such rule (where a method renamed to a member it calls would call itself: Java's ``this.duration(...)``,
PHP's ``$this->duration(...)``, Ruby's ``self.duration``). (A name the second analysis leaves alone only
keeps more of the code as it is: allowed, counted and printed.)
"""

from __future__ import annotations

import pytest
from test_meaning_preservation import corpus
from test_settle_accepted import _codes

from csbench.attacks import parse_spec
from csbench.attacks import renaming as R
from csbench.code.identifiers import IMPLEMENTED, receiver_names

SPECS = ["ordered_id", "most_popular", "k_shift_dataset-3", "k_shift_snippet-3", "random_permutation", "full_hash"]


def _differ(language: str, analyses: list, spec: str, analysed_again: bool) -> tuple[list, int]:
    (component,) = parse_spec(spec)
    items = [R.Item(language, code, analysis.identifiers) for code, analysis in analyses]
    proposals = component.attack.strategy(items, component.params)
    differ, left_alone = [], 0
    for (code, analysis), proposal in zip(analyses, proposals, strict=True):
        old = analysis.identifiers
        mapping = R.settle(old, language, proposal, analysed_again)
        new = analysis.renamed(mapping)
        image = {mapping.get(name, name): name for name in old.names}
        again = R.analyse(new, language, keep_comments=True).identifiers
        for name in again.names:
            source = image.get(name)
            if source is None or again.roles[name] != old.roles[source] or len(again.occurrences[name]) != len(
                old.occurrences[source]
            ):
                differ.append((spec, analysed_again, name, source, code[:160], new[:160]))
                break
        left_alone += len(set(image) - set(again.names))
    return differ, left_alone


@pytest.mark.parametrize("language", IMPLEMENTED)
def test_the_renamed_code_is_analysed_as_the_renaming_says(language) -> None:
    analyses = []
    for code in dict.fromkeys(_codes(language) + corpus(language)):
        try:
            analyses.append((code, R.analyse(code, language)))
        except Exception:  # not analysable: the attack reports it and keeps the code
            continue
    flags = [True] if receiver_names(language) else [True, False]
    for spec in SPECS:
        for analysed_again in flags:
            differ, left_alone = _differ(language, analyses, spec, analysed_again)
            print(f"{language} {spec} analysed_again={analysed_again}: {len(analyses)} snippets, {len(differ)} "
                  f"analysed otherwise, {left_alone} names left alone")  # fmt: skip
            assert differ == [], differ[:3]
