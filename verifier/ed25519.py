"""Ed25519 public-key validation: canonical encoding, on the curve, not of small order.

Trust role: Ed25519 verification as implemented by OpenSSL accepts public keys of small
order, such as the identity point ``01 00 .. 00``. Under such a key, a signature with
R = B and S = 1 verifies for *every* message, so a registered small-order key would let
anyone sign as that agent (and let the agent disown what it signed). Every public key that
becomes trusted in Engram (agent keys in ``key.registered`` / ``key.rotated``, log verifier
keys) passes :func:`check_public_key` first.

Checks (RFC 8032 §5.1.3 decoding, plus the small-order test):

1. the y coordinate is canonical (< p);
2. the point decompresses (x exists, and x = 0 is not encoded with the sign bit set);
3. [8]A is not the identity, i.e. A is not in the 8-element torsion subgroup.

Pure integer arithmetic in affine coordinates; it runs once per key, not per signature.
"""

from __future__ import annotations

from verifier.errors import MalformedError

__all__ = ["check_public_key"]

_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _decompress(encoded: bytes) -> tuple[int, int]:
    n = int.from_bytes(encoded, "little")
    x_sign = n >> 255
    y = n & ((1 << 255) - 1)
    if y >= _P:
        raise MalformedError("Ed25519 public key is not canonically encoded", check="key.encoding")
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x = (u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P)) % _P
    if (v * x * x - u) % _P != 0:
        x = (x * _SQRT_M1) % _P
        if (v * x * x - u) % _P != 0:
            raise MalformedError("Ed25519 public key is not a curve point", check="key.encoding")
    if x == 0 and x_sign:
        raise MalformedError("Ed25519 public key is not canonically encoded", check="key.encoding")
    if x & 1 != x_sign:
        x = _P - x
    return x, y


def _double(pt: tuple[int, int]) -> tuple[int, int]:
    # Twisted Edwards addition with a = -1 (complete for edwards25519, as d is a non-square).
    x, y = pt
    t = (_D * x * x * y * y) % _P
    x3 = (2 * x * y * pow((1 + t) % _P, _P - 2, _P)) % _P
    y3 = ((y * y + x * x) * pow((1 - t) % _P, _P - 2, _P)) % _P
    return x3, y3


def check_public_key(public_key: bytes) -> bytes:
    """Return ``public_key`` if it is a valid, canonical Ed25519 key of large order.

    Raises:
        MalformedError: wrong length, non-canonical encoding, not on the curve, or small order.
    """
    if not isinstance(public_key, bytes) or len(public_key) != 32:
        raise MalformedError("Ed25519 public keys are 32 bytes", check="key.encoding")
    point = _decompress(public_key)
    for _ in range(3):
        point = _double(point)
    if point == (0, 1):
        raise MalformedError(
            "Ed25519 public key has small order; signatures under it prove nothing",
            check="key.small_order",
        )
    return public_key
