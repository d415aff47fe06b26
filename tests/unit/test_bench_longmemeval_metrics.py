"""The LongMemEval-S benchmark's metrics (bench/longmemeval.py) on hand-made rankings.

Issue 42: the public benchmark's figures are only as good as these functions; a recall_all
that counted any hit, or a session metric that counted a session twice, would report a win
that is not there.
"""

from __future__ import annotations

import pytest

from bench.longmemeval import clean, dedup_sessions, parse_date, recall_all, recall_any, scores

E = frozenset({3, 7})  # two evidence turns
RANKED = [frozenset({1}), frozenset({3}), frozenset({5}), frozenset({7}), frozenset({9})]


def test_recall_any_counts_one_evidence_turn_within_k() -> None:
    assert recall_any(RANKED, E, 1) == 0.0
    assert recall_any(RANKED, E, 2) == 1.0
    assert recall_any(RANKED, E, 20) == 1.0


def test_recall_all_needs_every_evidence_turn_within_k() -> None:
    assert recall_all(RANKED, E, 2) == 0.0
    assert recall_all(RANKED, E, 3) == 0.0
    assert recall_all(RANKED, E, 4) == 1.0


def test_a_distilled_item_citing_several_turns_covers_them_all() -> None:
    ranked = [frozenset({2}), frozenset({3, 7})]
    assert recall_all(ranked, E, 2) == 1.0
    assert recall_all(ranked, E, 1) == 0.0


def test_a_ranking_without_evidence_scores_zero() -> None:
    ranked = [frozenset({1}), frozenset(), frozenset({2})]
    assert recall_any(ranked, E, 10) == 0.0
    assert recall_all(ranked, E, 10) == 0.0


def test_no_evidence_is_refused_not_scored() -> None:
    with pytest.raises(ValueError, match="at least one evidence id"):
        recall_any(RANKED, frozenset(), 5)
    with pytest.raises(ValueError, match="at least one evidence id"):
        recall_all(RANKED, frozenset(), 5)


def test_sessions_are_deduplicated_in_rank_order() -> None:
    session_of = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]  # turn -> session
    ranked = [frozenset({0}), frozenset({1}), frozenset({6}), frozenset({2, 9})]
    assert dedup_sessions(ranked, session_of) == [
        frozenset({0}),
        frozenset({3}),
        frozenset({1}),
        frozenset({4}),
    ]


def test_scores_session_level_counts_distinct_sessions() -> None:
    session_of = [0, 0, 1, 1, 2, 2, 3, 3]
    # Evidence in sessions 1 and 3; the two first turns are both in session 0.
    evidence = frozenset({2, 7})
    ranked = [frozenset({0}), frozenset({1}), frozenset({3}), frozenset({4}), frozenset({5}), frozenset({6})]
    s = scores(ranked, evidence, session_of)
    assert s["turn_any@5"] == 0.0  # turns 0, 1, 3, 4, 5: neither 2 nor 7
    assert s["turn_any@10"] == 0.0
    # Sessions in order: 0, 1, 2, 3: both evidence sessions within the first 5.
    assert s["session_any@5"] == 1.0
    assert s["session_all@5"] == 1.0
    assert set(s) == {
        f"{lvl}_{kind}@{k}" for lvl in ("turn", "session") for kind in ("any", "all") for k in (5, 10, 20)
    }


def test_dates_and_texts_are_read_as_the_dataset_writes_them() -> None:
    assert parse_date("2023/05/30 (Tue) 10:18") == 1_685_441_880_000_000
    assert clean("a\x00b\x85c") == "a b c"
    assert clean(" \x01 ") == "(empty)"
