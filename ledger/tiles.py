"""C2SP tlog-tiles: paths, tile contents, and a static export of the whole log.

Layout (c2sp.org/tlog-tiles, height 8, specs/tiles.md):

* ``checkpoint``: the signed checkpoint note the directory is consistent with.
* ``tile/<L>/<N>``: 256 hashes of 32 bytes. Level 0 holds leaf hashes; level L holds the
  hashes of perfect subtrees of 256**L leaves. These are exactly the stored Merkle nodes at
  tree level 8L, so a tile is read, never recomputed.
* ``tile/<L>/<N>.p/<W>``: the partial tile with the W < 256 hashes that exist at the
  checkpoint's size (served only where the level has a non-empty remainder).
* ``tile/entries/<N>[.p/<W>]``: leaves ``256N ...``, each prefixed by its big-endian uint16
  length (which is why leaves are capped at 65,535 bytes).
* ``engram/checkpoints.jsonl``: every checkpoint signed up to that size (Engram's addition;
  ignored by tlog-tiles clients, checked by ``engram-verify log``).
* ``N`` is written in groups of three digits, all but the last prefixed with ``x``:
  1234067 -> ``x001/x234/067``.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engram.protocol.errors import ConfigError, StorageError
from ledger.storage.store import SqlStore
from verifier.merkle import leaf_hash
from verifier.tiles import TILE_HEIGHT, TILE_WIDTH, tile_path, tiles_for_size

__all__ = [
    "HISTORY_PATH",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "ExportSummary",
    "entry_bundle",
    "export_tiles",
    "hash_tile",
    "tile_path",
    "tiles_for_size",
]

HISTORY_PATH = "engram/checkpoints.jsonl"
# Paths and tile shapes come from verifier.tiles: the exporter writes what the auditor reads.


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportSummary:
    size: int
    hash_tiles: int
    entry_bundles: int
    bytes_written: int


def hash_tile(store: SqlStore, level: int, n: int, width: int) -> bytes:
    """The bytes of hash tile ``(level, n)`` of ``width`` hashes (stored nodes at level 8L)."""
    return b"".join(store.nodes_at_level(level * TILE_HEIGHT, n * TILE_WIDTH, n * TILE_WIDTH + width))


def entry_bundle(store: SqlStore, n: int, width: int) -> bytes:
    """The bytes of entry bundle ``n`` holding ``width`` leaves, each checked against its hash."""
    start = n * TILE_WIDTH
    leaves = store.leaves(start, start + width)
    tile_hashes = store.nodes_at_level(0, start, start + width)
    parts = []
    for i, (leaf, expected) in enumerate(zip(leaves, tile_hashes, strict=True)):
        if leaf_hash(leaf) != expected:
            raise StorageError(f"leaf {start + i} does not hash to its stored tile hash")
        parts.append(struct.pack(">H", len(leaf)) + leaf)
    return b"".join(parts)


def _write(root: Path, rel: str, data: bytes) -> int:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return len(data)


def _mirror_size(directory: Path, log_vkey: str, root_at: Callable[[int], bytes], size: int) -> int:
    """The size of the mirror's checkpoint, checked: signed by this log and consistent with
    the log now (the same root at that size), and not newer than the log."""
    from verifier.errors import VerificationError
    from verifier.note import VerifierKey, verify_checkpoint

    path = directory / "checkpoint"
    if not path.is_file():
        raise ConfigError(
            f"{directory} holds no checkpoint: not a tiles mirror (export into a new directory)"
        )
    try:
        old = verify_checkpoint(path.read_bytes()[:65536], VerifierKey.parse(log_vkey))
    except VerificationError as e:
        raise ConfigError(f"{path} is not a checkpoint of this log: {e}") from e
    if old.size > size:
        raise ConfigError(
            f"{directory} holds size {old.size}, newer than this log's {size}: a different or rolled-back log"
        )
    if root_at(old.size) != old.root:
        raise ConfigError(
            f"{directory} holds size {old.size} with a root this log does not have at that size: "
            "the log was rewritten or the mirror is of another log"
        )
    return old.size


def export_tiles(
    store: SqlStore,
    directory: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    update: tuple[str, Callable[[int], bytes]] | None = None,
) -> ExportSummary:
    """Write a complete static tlog-tiles tree for the latest checkpoint into ``directory``.

    The directory must be empty or absent, unless ``update`` (the log's verifier key and
    its ``root_at``) is given: then it must be a mirror of this log, whose checkpoint is
    verified and must be consistent with the log now (same root at its size), and only what
    changed since is written (tiles and entry bundles from its last full tile on; full
    tiles never change). Everything is written before ``checkpoint``, so a reader that finds
    the checkpoint finds every tile it implies.
    """
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{directory} is not a directory")
    cp = store.latest_checkpoint()
    size = cp.size
    start = 0
    if update is not None:
        start = _mirror_size(directory, update[0], update[1], size)
    elif directory.exists() and any(directory.iterdir()):
        raise ConfigError(
            f"{directory} is not empty; export into a new directory, or bring a mirror up to date with --update"
        )
    directory.mkdir(parents=True, exist_ok=True)
    # A full tile whose leaves all lie below the mirror's size never changes: the rest is written.
    hash_todo = [
        (lv, n, w)
        for lv, n, w in tiles_for_size(size)
        if not (w == TILE_WIDTH and (n + 1) * TILE_WIDTH ** (lv + 1) <= start)
    ]
    full = start // TILE_WIDTH
    entry_todo = range(full, -(-size // TILE_WIDTH))
    total = len(hash_todo) + len(entry_todo)
    done = written = hash_tiles = bundles = 0

    for level, n, width in hash_todo:
        written += _write(directory, tile_path(level, n, width), hash_tile(store, level, n, width))
        hash_tiles += 1
        done += 1
        if progress:
            progress(done, total)

    for n in entry_todo:
        width = min(TILE_WIDTH, size - n * TILE_WIDTH)
        written += _write(directory, tile_path("entries", n, width), entry_bundle(store, n, width))
        bundles += 1
        done += 1
        if progress:
            progress(done, total)

    # Not part of tlog-tiles (its clients ignore it): every checkpoint the log signed up to
    # this size, so an auditor can check that none of them was a fork (engram-verify log).
    lines = [
        json.dumps({"size": c.size, "note": c.note.decode("utf-8")}, separators=(",", ":"))
        for c in store.checkpoints_upto(size)
    ]
    written += _write(directory, HISTORY_PATH, ("\n".join(lines) + "\n").encode())
    # The checkpoint with the witness cosignatures collected for it (auditors may require them).
    cosigned = cp.note + "".join(store.cosignature_lines(cp.size)).encode("utf-8")
    written += _write(directory, "checkpoint", cosigned)
    return ExportSummary(size=size, hash_tiles=hash_tiles, entry_bundles=bundles, bytes_written=written)
