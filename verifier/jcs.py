"""RFC 8785 (JCS) canonical JSON for Engram's signed data, with a strict parser.

Trust role: every JSON object that is signed or hashed (event envelopes, leaves, bodies) is
produced by :func:`canonical_bytes` and, when received, accepted only if
``canonical_bytes(parse(b)) == b`` (:func:`parse_canonical`). Verifiers therefore check the
exact bytes they were given; re-encoding is used only to prove the bytes are the one
canonical form.

Invariants (specs/event-envelope.md §2):

* Only the JSON subset without numbers other than integers is allowed: no floats, no
  exponents, no fractions, integers within ``[-(2**53-1), 2**53-1]`` (the I-JSON safe range).
  RFC 8785 serialises numbers the ECMAScript way; the safe-integer subset makes that the
  plain decimal form, so no float formatting is needed and none is implemented.
* Object keys are unique (RFC 7493); a duplicate is rejected, never silently overwritten.
* Keys are sorted by UTF-16 code units (RFC 8785 §3.2.3), not by code points.
* Strings are valid Unicode scalar values (no lone surrogates); the text is UTF-8 without BOM.
* Nesting depth and input size are bounded by the caller-provided limits.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring as _c_encode_string
from typing import Any

from verifier.errors import CanonicalFormError, LimitExceededError, MalformedError

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "JSONValue",
    "canonical_bytes",
    "canonical_bytes_of_parsed",
    "canonical_bytes_of_values",
    "check_shape",
    "parse_canonical",
    "parse_strict",
]

MAX_SAFE_INTEGER = 2**53 - 1
MAX_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")
#: An escape that may decode to a surrogate code unit (a false alarm only costs the walk).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

JSONValue = Any  # None | bool | int | str | list[JSONValue] | dict[str, JSONValue]


def _encode_string(s: str, out: list[str]) -> None:
    # The standard library's C string encoder (ensure_ascii=False) produces exactly the
    # RFC 8785 / ECMAScript escaping: \" \\ \b \f \n \r \t, other controls as \u00xx in
    # lowercase hex, everything else (DEL and U+2028/9 included) as is. Checked against
    # the rfc8785 package by tests/unit/test_jcs.py.
    if _SURROGATE.search(s):
        raise CanonicalFormError("string holds a lone surrogate", check="canonical.string")
    out.append(_c_encode_string(s))


def _utf16_key(s: str) -> bytes:
    # RFC 8785 §3.2.3: sort by UTF-16 code units. Big-endian UTF-16 bytes compare in the
    # same order as the code-unit sequence.
    try:
        return s.encode("utf-16-be")
    except UnicodeEncodeError as e:
        raise CanonicalFormError("key holds a lone surrogate", check="canonical.string") from e


def _encode(value: JSONValue, out: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise LimitExceededError(f"nesting deeper than {MAX_DEPTH}", check="canonical.depth")
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise CanonicalFormError(
                f"integer {value} is outside the safe range +-(2^53-1)", check="canonical.integer"
            )
        out.append(str(int(value)))
    elif isinstance(value, str):
        _encode_string(value, out)
    elif isinstance(value, float):
        raise CanonicalFormError(
            "floats are not allowed in signed data; use integers or decimal strings",
            check="canonical.float",
        )
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise CanonicalFormError("object keys must be strings", check="canonical.key")
        out.append("{")
        for i, k in enumerate(sorted(value, key=_utf16_key)):
            if i:
                out.append(",")
            _encode_string(k, out)
            out.append(":")
            _encode(value[k], out, depth + 1)
        out.append("}")
    else:
        raise CanonicalFormError(f"type {type(value).__name__} has no JSON form", check="canonical.type")


def canonical_bytes(value: JSONValue) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of ``value``.

    Raises:
        CanonicalFormError: floats, out-of-range integers, lone surrogates, non-string keys.
        LimitExceededError: nesting deeper than :data:`MAX_DEPTH`.
    """
    out: list[str] = []
    _encode(value, out, 0)
    return "".join(out).encode("utf-8")


def _reject_float(text: str) -> Any:
    raise CanonicalFormError(f"number {text!r} is not an integer", check="canonical.float")


def _reject_constant(text: str) -> Any:
    raise MalformedError(f"{text} is not JSON", check="json.syntax")


def _checked_int(text: str) -> int:
    # Bound the digits before int() so a huge literal costs nothing.
    if len(text) > 17:
        raise CanonicalFormError(
            f"integer literal of {len(text)} digits is outside the safe range",
            check="canonical.integer",
        )
    value = int(text)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise CanonicalFormError(
            f"integer {value} is outside the safe range +-(2^53-1)", check="canonical.integer"
        )
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for k, v in pairs:
        if k in obj:
            raise MalformedError(f"duplicate object key {k!r}", check="json.duplicate_key")
        obj[k] = v
    return obj


def _check_tree(value: JSONValue, depth: int = 0) -> None:
    """Bound the nesting and reject lone surrogates (escaped ``\\ud800`` parses without error)."""
    if depth > MAX_DEPTH:
        raise LimitExceededError(f"nesting deeper than {MAX_DEPTH}", check="canonical.depth")
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise CanonicalFormError("string holds a lone surrogate", check="canonical.string")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_tree(k, depth + 1)
            _check_tree(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_tree(v, depth + 1)


def parse_strict(
    data: bytes,
    *,
    max_bytes: int,
    max_containers: int | None = None,
    max_values: int | None = None,
) -> JSONValue:
    """Parse JSON strictly: UTF-8 without BOM, no duplicate keys, integers only, bounded.

    The size is checked first, then a linear pre-scan (:func:`check_shape`) bounds the
    nesting depth and, when given, the number of containers (objects and arrays) and of
    values before ``json.loads`` builds anything: a document of millions of empty objects
    is refused at the cost of one scan, not of building millions of dicts.

    Raises:
        LimitExceededError: ``data`` is longer than ``max_bytes``, nests too deep, or holds
            more containers or values than allowed.
        MalformedError: not UTF-8, not JSON, duplicate keys, NaN/Infinity.
        CanonicalFormError: floats or integers outside the safe range.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MalformedError("input must be bytes", check="json.type")
    data = bytes(data)
    if len(data) > max_bytes:
        raise LimitExceededError(f"{len(data)} bytes exceeds the limit of {max_bytes}", check="json.size")
    if data.startswith(b"\xef\xbb\xbf"):
        raise MalformedError("byte order mark is not allowed", check="json.encoding")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise MalformedError(f"not valid UTF-8: {e.reason}", check="json.encoding") from e
    depth = check_shape(text, max_depth=MAX_DEPTH, max_containers=max_containers, max_values=max_values)
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_object,
            parse_float=_reject_float,
            parse_int=_checked_int,
            parse_constant=_reject_constant,
        )
    except (MalformedError, CanonicalFormError):
        raise
    except (ValueError, RecursionError) as e:
        raise MalformedError(f"not JSON: {e}", check="json.syntax") from e
    # The walk finds lone surrogates, which only an escape can produce (the text is valid
    # UTF-8), and values nested deeper than MAX_DEPTH, which needs more than MAX_DEPTH
    # brackets: without either in the text it cannot fail, and is skipped.
    if depth > MAX_DEPTH or _SURROGATE_ESCAPE.search(text):
        _check_tree(value)
    return value


# A JSON string, unrolled so that the regex engine runs in linear time: a quote, runs of
# plain characters separated by single escapes, a quote. An unterminated string does not
# match and is left for json.loads to refuse.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def check_shape(
    text: str,
    *,
    max_depth: int = MAX_DEPTH,
    max_containers: int | None = None,
    max_values: int | None = None,
) -> int:
    """Bound a JSON text's nesting depth, containers and values before parsing it; return
    the deepest bracket nesting (0: no container).

    Linear in the text and done mostly in C: strings are blanked by one regular
    expression, containers are counted with ``str.count``, and values are bounded by
    commas + containers + 1 (every value but the first of a container follows a comma).
    Only the brackets are walked in Python to measure the depth, and only once their
    number is known to be within bounds.

    Raises:
        LimitExceededError: check ``json.containers``, ``json.values`` or ``canonical.depth``.
    """
    bare = _STRING.sub('""', text)
    containers = bare.count("{") + bare.count("[")
    if max_containers is not None and containers > max_containers:
        raise LimitExceededError(
            f"{containers} objects and arrays exceed the limit of {max_containers}",
            check="json.containers",
        )
    if max_values is not None:
        values = bare.count(",") + containers + 1
        if values > max_values:
            raise LimitExceededError(
                f"about {values} values exceed the limit of {max_values}", check="json.values"
            )
    if not containers:
        return 0
    depth = deepest = 0
    for ch in _NOT_BRACKETS.sub("", bare):
        if ch in "[{":
            depth += 1
            if depth > max_depth + 1:
                raise LimitExceededError(f"nesting deeper than {max_depth}", check="canonical.depth")
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


#: The standard library's C encoder with JCS separators and escaping (ensure_ascii=False:
#: the same C string encoder as _encode_string) and keys sorted by code point.
_C_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False, check_circular=False
)
#: UTF-8 lead bytes of U+E000..U+10FFFF: the only characters whose code-point order can
#: differ from UTF-16 code-unit order (a BMP character at or above U+E000 sorts after a
#: supplementary one in code points, before it in UTF-16).
_ORDER_MAY_DIFFER = re.compile(rb"[\xee-\xf4]")


def canonical_bytes_of_parsed(value: JSONValue, data: bytes) -> bytes:
    """:func:`canonical_bytes` of a value :func:`parse_strict` returned for ``data``, by the
    C encoder where that is provably the same bytes, else by :func:`canonical_bytes`.

    Why it is the same: parse_strict admits only null, booleans, safe integers, strings
    without lone surrogates, lists and objects with string keys, nested at most
    :data:`MAX_DEPTH` deep. On those, the C encoder writes integers, literals and strings
    exactly as :func:`_encode` does (same string encoder; ``int.__repr__``), and sorts keys
    by code point, which equals the UTF-16 order RFC 8785 asks for unless a key holds a
    character at or above U+E000, which needs one of the bytes ``_ORDER_MAY_DIFFER`` finds
    in ``data`` (then the slow path decides). Property tests check the two agree
    (tests/unit/test_jcs.py). About 10x faster on leaves and bodies.
    """
    if _ORDER_MAY_DIFFER.search(data):
        return canonical_bytes(value)
    return _C_ENCODER.encode(value).encode("utf-8")


def canonical_bytes_of_values(value: JSONValue) -> bytes:
    """:func:`canonical_bytes` of a value built in process from the types parse_strict
    returns (null, booleans, safe integers, strings, lists, objects with string keys), by
    the C encoder where that is provably the same bytes. The caller guarantees the types
    (floats, unsafe integers and nesting beyond MAX_DEPTH are not looked for: use
    :func:`canonical_bytes` for anything else); a lone surrogate goes to the reference,
    which refuses it.

    The argument of :func:`canonical_bytes_of_parsed`, with the C encoder's own output in
    place of the source bytes: a key holding a character at or above U+E000 puts one of the
    lead bytes ``_ORDER_MAY_DIFFER`` finds into the output too, and then the reference
    encoder decides. Used where the projection digest encodes every row."""
    try:
        out = _C_ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        return canonical_bytes(value)  # a lone surrogate: the reference refuses it
    if _ORDER_MAY_DIFFER.search(out):
        return canonical_bytes(value)
    return out


def parse_canonical(data: bytes, *, max_bytes: int) -> JSONValue:
    """Parse ``data`` strictly and require it to be exactly its RFC 8785 canonical form.

    Raises:
        CanonicalFormError: the bytes parse but are not the canonical encoding.
        (and everything :func:`parse_strict` raises)
    """
    value = parse_strict(data, max_bytes=max_bytes)
    if canonical_bytes_of_parsed(value, bytes(data)) != bytes(data):
        raise CanonicalFormError(
            "JSON is not in RFC 8785 canonical form (key order, whitespace or escapes)",
            check="canonical.form",
        )
    return value
