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

Pure integer arithmetic; it runs once per key, not per signature. The doublings use
projective coordinates (no field inversion: issue 28 found the affine form, six modular
inversions per key, a large share of a batch of fresh agents' appends).
"""

from __future__ import annotations

import functools

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


def _times8_is_identity(x: int, y: int) -> bool:
    """Whether [8](x, y) is the identity: three doublings in projective coordinates
    (X : Y : Z), a = -1 (RFC 8032 §5.1.4's doubling, without the T coordinate), then the
    identity (0 : Z : Z)."""
    px, py, pz = x, y, 1
    for _ in range(3):
        b = (px + py) * (px + py) % _P
        c = px * px % _P
        d = py * py % _P
        e = -c % _P  # a * C with a = -1
        f = (e + d) % _P
        h = pz * pz % _P
        j = (f - 2 * h) % _P
        px, py, pz = (b - c - d) * j % _P, f * (e - d) % _P, f * j % _P
    return px == 0 and py == pz


def check_public_key(public_key: bytes) -> bytes:
    """Return ``public_key`` if it is a valid, canonical Ed25519 key of large order.

    Raises:
        MalformedError: wrong length, non-canonical encoding, not on the curve, or small order.
    """
    if not isinstance(public_key, bytes) or len(public_key) != 32:
        raise MalformedError("Ed25519 public keys are 32 bytes", check="key.encoding")
    _checked(bytes(public_key))  # exactly bytes: a subclass's equality never reaches the cache
    return public_key


@functools.lru_cache(maxsize=16_384)
def _checked(public_key: bytes) -> bytes:
    """The checks of a 32-byte key, remembered for the keys that pass (a failure raises and
    is not cached): one key is parsed from its registration, its leaf and its log entries
    several times in one process, and each check costs a modular exponentiation (about as
    much as a signature verify)."""
    if _times8_is_identity(*_decompress(public_key)):
        raise MalformedError(
            "Ed25519 public key has small order; signatures under it prove nothing",
            check="key.small_order",
        )
    return public_key
