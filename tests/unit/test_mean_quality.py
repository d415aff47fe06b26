"""One definition of "mean quality" (verifier.bundle.mean_quality), used by bundles, the
oracle, the verifier and the client: two places, rounded half to even."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.bundle import mean_quality


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([94], "94.00"),
        ([1, 2], "1.50"),
        ([1, 0, 0, 0, 0, 0, 0, 0], "0.12"),  # 0.125: half to even rounds down
        ([3, 0, 0, 0, 0, 0, 0, 0], "0.38"),  # 0.375: half to even rounds up
        ([100, 99, 99], "99.33"),
    ],
)
def test_known_answers(values: list[int], expected: str) -> None:
    assert mean_quality(values) == expected


def test_no_values_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        mean_quality([])


@given(st.lists(st.integers(0, 100), min_size=1, max_size=50))
def test_within_half_a_cent_of_the_exact_mean(values: list[int]) -> None:
    from fractions import Fraction

    exact = Fraction(sum(values), len(values))
    assert abs(Fraction(mean_quality(values)) - exact) <= Fraction(1, 200)
