"""Issue 29, Deliver 1: the supersession detector on a labelled set of memory pairs
(bench/supersession_set.py) never replaces on a weak match (precision >= 0.95, no false
positive) and finds most real changes. (The adversarial near misses of issue 40 are checked
in tests/unit/test_supersession_voice.py.)"""

from __future__ import annotations

from bench.supersession_set import PAIRS, Case, replaces, score


def test_issue29_labelled_supersession_set_precision_and_recall() -> None:
    cases = tuple(Case(old=o, new=n, replaces=y) for o, n, y in PAIRS)
    s = score(cases)
    wrong = [(c.old, c.new) for c in cases if not c.replaces and replaces(c)]
    assert wrong == [] and s["precision"] >= 0.95 and s["false_positive_rate"] == 0.0
    assert s["recall"] >= 0.9, s
    assert sum(1 for *_, y in PAIRS if y) >= 20 and sum(1 for *_, y in PAIRS if not y) >= 20
