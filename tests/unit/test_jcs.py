"""RFC 8785 canonical JSON: agrees with the rfc8785 package, strict parsing, round trips."""

from __future__ import annotations

import json

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from verifier.errors import CanonicalFormError, LimitExceededError, MalformedError
from verifier.jcs import (
    MAX_SAFE_INTEGER,
    _check_tree,
    canonical_bytes,
    canonical_bytes_of_parsed,
    canonical_bytes_of_values,
    parse_canonical,
    parse_strict,
)

# Unicode text without lone surrogates (not representable in UTF-8 and rejected by JCS).
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER) | text,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(text, children, max_size=5),
    max_leaves=30,
)


@given(json_values)
def test_matches_the_rfc8785_package(value: object) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


@given(json_values)
def test_canonical_bytes_round_trip(value: object) -> None:
    data = canonical_bytes(value)
    assert parse_canonical(data, max_bytes=1 << 20) == value


@given(json_values)
def test_pretty_printed_json_is_not_canonical_unless_identical(value: object) -> None:
    pretty = json.dumps(value, indent=1, ensure_ascii=True).encode()
    if pretty == canonical_bytes(value):
        return
    with pytest.raises(CanonicalFormError):
        parse_canonical(pretty, max_bytes=1 << 20)


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is D83D DE00 in UTF-16, which sorts before U+FB01; code-point order is reversed.
    assert canonical_bytes({"\ufb01": 2, "\U0001f600": 1}) == '{"\U0001f600":1,"\ufb01":2}'.encode()


@pytest.mark.parametrize("value", [1.0, -0.0, 0.5, float("nan"), float("inf"), {"confidence": 1.0}])
def test_floats_are_refused_even_when_integral(value: object) -> None:
    # 1.0 would canonicalize to "1" and lose its type; the peers that sign floats diverge here.
    with pytest.raises(CanonicalFormError):
        canonical_bytes(value)


@pytest.mark.parametrize("value", [2**53, -(2**53), 10**20])
def test_unsafe_integers_are_refused(value: int) -> None:
    with pytest.raises(CanonicalFormError):
        canonical_bytes(value)


def test_size_limit_is_checked_before_parsing() -> None:
    with pytest.raises(LimitExceededError):
        parse_strict(b"[" + b"1," * 1000 + b"1]", max_bytes=100)


@pytest.mark.parametrize(
    "data",
    [b"\xff", b'{"a":1', b"{'a':1}", b"[1,]", b'{"a":1}x', b"\xef\xbb\xbf{}", b'"\xed\xa0\x80"'],
)
def test_malformed_input_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedError):
        parse_strict(data, max_bytes=1000)


def test_deep_nesting_is_refused_without_recursion_errors() -> None:
    with pytest.raises(LimitExceededError):
        parse_strict(b"[" * 100_000 + b"]" * 100_000, max_bytes=1 << 20)


@pytest.mark.parametrize(
    ("data", "check"),
    [
        (b"[" + b"{}," * 200 + b"{}]", "json.containers"),
        (b"[" + b"1," * 500 + b"1]", "json.values"),
        (b'["' + b"[" * 5000 + b'"]', None),  # brackets inside a string are not containers
        (b'["\\"[[[[[[", 1]', None),  # nor after an escaped quote
    ],
)
def test_containers_and_values_are_counted_before_parsing(data: bytes, check: str | None) -> None:
    if check is None:
        assert isinstance(parse_strict(data, max_bytes=1 << 20, max_containers=100, max_values=100), list)
        return
    with pytest.raises(LimitExceededError) as e:
        parse_strict(data, max_bytes=1 << 20, max_containers=100, max_values=100)
    assert e.value.check == check


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_refused(constant: bytes) -> None:
    with pytest.raises(MalformedError) as e:
        parse_strict(b'{"a":' + constant + b"}", max_bytes=100)
    assert e.value.check == "json.syntax"


@given(
    st.recursive(
        st.none() | st.integers(0, 9) | st.text(alphabet="ab ,", max_size=5),
        lambda c: st.lists(c, max_size=4),
        max_leaves=20,
    )
)
def test_the_shape_bound_never_undercounts(value: object) -> None:
    text = json.dumps(value)
    bare_values = text.count(",") + text.count("[") + 1  # an upper bound json.loads agrees with
    parse_strict(text.encode(), max_bytes=1 << 16, max_values=bare_values)
    if text.count("[") > 1:
        with pytest.raises(LimitExceededError):
            parse_strict(text.encode(), max_bytes=1 << 16, max_containers=text.count("[") - 1)


# -- the C-encoder fast path of parse_canonical (issue 14) ----------------------------------

# Keys from every plane, weighted towards the characters where code-point and UTF-16 orders
# disagree (U+E000..U+FFFF against supplementary characters).
order_text = st.text(
    st.characters(blacklist_categories=("Cs",))
    | st.characters(min_codepoint=0xE000, max_codepoint=0xFFFF, blacklist_categories=("Cs",))
    | st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),
    max_size=4,
)
order_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER) | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(order_text, children, max_size=5),
    max_leaves=25,
)


@given(json_values | order_values)
def test_the_fast_canonical_form_is_byte_identical_to_the_reference(value: object) -> None:
    data = canonical_bytes(value)
    assert canonical_bytes_of_parsed(parse_strict(data, max_bytes=1 << 20), data) == data


@given(json_values | order_values)
def test_the_fast_canonical_form_of_built_values_is_byte_identical_to_the_reference(value: object) -> None:
    assert canonical_bytes_of_values(value) == canonical_bytes(value)


@pytest.mark.parametrize("value", ["\ud800", {"\udc00": 1}, [{"k": "a\ud800"}]])
def test_the_fast_canonical_form_of_built_values_leaves_lone_surrogates_to_the_reference(
    value: object,
) -> None:
    with pytest.raises(CanonicalFormError):
        canonical_bytes(value)
    with pytest.raises(CanonicalFormError):
        canonical_bytes_of_values(value)


def _reference_outcome(data: bytes) -> object:
    """What parse_canonical answered before the fast path: parse strictly, re-encode with
    the reference encoder, compare."""
    try:
        value = parse_strict(data, max_bytes=1 << 20)
        if canonical_bytes(value) != data:
            return CanonicalFormError
        return ("ok", value)
    except Exception as e:
        return type(e)


def _outcome(data: bytes) -> object:
    try:
        return ("ok", parse_canonical(data, max_bytes=1 << 20))
    except Exception as e:
        return type(e)


@given(
    json_values | order_values,
    st.sampled_from(["canonical", "ascii", "spaced", "unsorted", "reversed"]),
)
def test_parse_canonical_accepts_and_refuses_exactly_as_the_reference(value: object, form: str) -> None:
    if form == "canonical":
        data = canonical_bytes(value)
    elif form == "ascii":
        data = json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=True).encode()
    elif form == "spaced":
        data = json.dumps(value, ensure_ascii=False, sort_keys=True).encode()
    elif form == "unsorted":
        data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    else:
        data = json.dumps(_reverse_keys(value), ensure_ascii=False, separators=(",", ":")).encode()
    assert _outcome(data) == _reference_outcome(data)


@given(st.binary(max_size=64))
def test_parse_canonical_matches_the_reference_on_arbitrary_bytes(data: bytes) -> None:
    assert _outcome(data) == _reference_outcome(data)


def _reverse_keys(value: object) -> object:
    if isinstance(value, dict):
        return {k: _reverse_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_keys(v) for v in value]
    return value


def test_keys_ordered_by_code_point_only_are_refused_on_the_fast_path_too() -> None:
    # U+1F600 (D83D DE00 in UTF-16) sorts before U+FB01 by code units, after it by code point.
    by_utf16 = '{"\U0001f600":1,"\ufb01":2}'.encode()
    by_code_point = '{"\ufb01":2,"\U0001f600":1}'.encode()
    assert _outcome(by_utf16) == ("ok", {"\U0001f600": 1, "\ufb01": 2})
    assert _outcome(by_code_point) is CanonicalFormError


@given(
    st.integers(min_value=28, max_value=36),
    st.sampled_from(["", "1", '"x"', '"\\ud800"', '"\\\\ud800"', '{"a":1}', "[]"]),
    st.booleans(),
)
def test_skipping_the_tree_walk_never_admits_what_it_refuses(depth: int, inner: str, objects: bool) -> None:
    """parse_strict walks the parsed tree only when the text could hold a lone surrogate or
    nest too deep; whatever it admits, the walk admits too."""
    text = inner
    for _ in range(depth):
        text = '{"k":' + text + "}" if objects and text else "[" + text + "]"
    data = text.encode()
    try:
        value = parse_strict(data, max_bytes=1 << 20)
    except (MalformedError, CanonicalFormError, LimitExceededError):
        return
    _check_tree(value)  # raises if the skip admitted something the walk refuses
