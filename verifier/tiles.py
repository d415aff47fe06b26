"""Reading a static C2SP tlog-tiles directory, strictly (specs/tiles.md).

Trust role: turns files into leaves and tile hashes for :mod:`verifier.replay`; it trusts
nothing it reads. Every entry bundle must hold exactly the entries its name implies and no
trailing bytes; every hash tile must be exactly 32 bytes per hash. Paths are built from
numbers, never taken from the directory listing, so nothing outside the directory is read.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from verifier.errors import LimitExceededError, MalformedError

__all__ = ["TILE_HEIGHT", "TILE_WIDTH", "read_bundle", "read_file", "tile_path", "tiles_for_size"]

TILE_HEIGHT = 8
TILE_WIDTH = 256
MAX_TILE_FILE = TILE_WIDTH * (2 + 65_535)  # a full entry bundle of maximal leaves


def _index_path(n: int) -> str:
    digits = str(n)
    digits = digits.zfill(-(-len(digits) // 3) * 3)
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([f"x{g}" for g in groups[:-1]] + [groups[-1]])


def tile_path(level: int | str, n: int, width: int = TILE_WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]``; level ``"entries"`` for entry bundles."""
    if not 0 < width <= TILE_WIDTH:
        raise ValueError(f"tile width {width} is not in 1..256")
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{level}/{_index_path(n)}{suffix}"


def tiles_for_size(size: int) -> Iterator[tuple[int, int, int]]:
    """Every hash tile ``(level, n, width)`` of a tree of ``size`` leaves."""
    level, count = 0, size
    while count > 0:
        full, rest = divmod(count, TILE_WIDTH)
        for n in range(full):
            yield level, n, TILE_WIDTH
        if rest:
            yield level, full, rest
        level += 1
        count >>= TILE_HEIGHT


def read_file(root: Path, rel: str, *, max_bytes: int = MAX_TILE_FILE) -> bytes:
    path = root / rel
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError as e:
        raise MalformedError(f"{rel} is missing", check="tiles.missing") from e
    except OSError as e:
        raise MalformedError(f"{rel} cannot be read: {e}", check="tiles.missing") from e
    if len(data) > max_bytes:
        raise LimitExceededError(f"{rel} is larger than {max_bytes} bytes", check="tiles.size")
    return data


def read_bundle(root: Path, n: int, width: int) -> list[bytes]:
    """The ``width`` leaves of entry bundle ``n`` (uint16 big-endian length prefixes)."""
    rel = tile_path("entries", n, width)
    data = read_file(root, rel)
    out, pos = [], 0
    while pos < len(data):
        if pos + 2 > len(data):
            raise MalformedError(f"{rel}: truncated length prefix at byte {pos}", check="tiles.bundle")
        (length,) = struct.unpack(">H", data[pos : pos + 2])
        if pos + 2 + length > len(data):
            raise MalformedError(f"{rel}: entry at byte {pos} runs past the end", check="tiles.bundle")
        out.append(data[pos + 2 : pos + 2 + length])
        pos += 2 + length
    if len(out) != width:
        raise MalformedError(f"{rel}: holds {len(out)} entries, its name says {width}", check="tiles.bundle")
    return out
