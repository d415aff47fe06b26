"""Remembered verification state: the newest checkpoint verified for each log.

Trust role: a verifier that forgets what it verified can be shown an old log (rollback)
or a rewritten one (fork) tomorrow. Like Go's sumdb client, which keeps its latest
verified tree, a :class:`CheckpointStore` keeps, per log verifier key, the newest
checkpoint that passed verification, and every later verification must prove that what
it is shown extends it: an older checkpoint is a rollback, a different root at a size
already seen (or a failing consistency proof) is a fork. Both fail loudly with
``state.rollback`` / ``state.fork``; nothing is written then.

Layout (one directory per log key, so a re-initialised log that reuses an origin under a
new key does not collide with the old one; a log key is the trust anchor, and a fork
signed by the same key is exactly what this detects)::

    <state dir>/<hex SHA-256 of the verifier key string>/checkpoint   the note, verbatim
    <state dir>/<...>/vkey                                           the verifier key
    <state dir>/<...>/lock                                           flock: one updater

Updates are compare-and-swap under an exclusive ``flock``: the stored checkpoint is read,
checked against the new one and replaced within one lock, so two verifiers racing cannot
overwrite a newer checkpoint with an older one. The new file is written to a temporary
name, fsynced and renamed over the old one, so a crash leaves the old or the new note,
never a torn one. The stored note is re-verified with the log key every time it is read:
the state directory is a cache of signed data, not a trust root of its own.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from verifier.errors import MalformedError, ProofError, VerificationError
from verifier.merkle import verify_consistency
from verifier.note import MAX_NOTE_BYTES, VerifiedCheckpoint, VerifierKey, verify_checkpoint

__all__ = [
    "STATE_ENV",
    "CheckpointStore",
    "StateError",
    "default_state_dir",
    "require_extends",
]

#: Environment variable naming the state directory; ``off`` disables remembered state.
STATE_ENV = "ENGRAM_VERIFIER_STATE"

ConsistencyProver = Callable[[int, int], Sequence[bytes] | None]


class StateError(ProofError):
    """What the verifier is shown does not extend what it verified before (a rollback or a
    fork: a consistency failure, hence a :class:`ProofError`), or its state is unusable."""

    default_check = "state"


def default_state_dir(env: dict[str, str] | None = None) -> Path | None:
    """``$ENGRAM_VERIFIER_STATE``, else ``$XDG_STATE_HOME/engram/verifier``, else
    ``~/.local/state/engram/verifier``; ``None`` when the variable is ``off``."""
    env = dict(os.environ) if env is None else env
    raw = env.get(STATE_ENV, "")
    if raw.lower() in ("off", "none", "0"):
        return None
    if raw:
        return Path(raw).expanduser()
    xdg = env.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(xdg) / "engram" / "verifier"


def require_extends(
    remembered: VerifiedCheckpoint,
    cp: VerifiedCheckpoint,
    proof: Sequence[bytes] | None,
    *,
    prefix: str,
) -> None:
    """``cp`` must extend ``remembered``: same origin, not smaller, the same root at the
    same size, and (when larger) a consistency ``proof`` from ``remembered.size``.

    ``prefix`` names the checks: ``state`` for remembered state, ``trusted`` for a
    checkpoint the caller passed in."""
    if remembered.origin != cp.origin:
        raise StateError(
            f"checkpoint of {cp.origin!r} checked against state of {remembered.origin!r}",
            check=f"{prefix}.origin",
        )
    if remembered.size > cp.size:
        raise StateError(
            f"rollback: the checkpoint of size {cp.size} is older than the checkpoint of size "
            f"{remembered.size} already verified for {cp.origin}",
            check=f"{prefix}.rollback" if prefix == "state" else f"{prefix}.stale",
        )
    if remembered.size == cp.size:
        if remembered.root != cp.root:
            raise StateError(
                f"FORK: the log signed two different roots at size {cp.size} "
                f"({remembered.root.hex()[:16]}... verified before, {cp.root.hex()[:16]}... now)",
                check=f"{prefix}.fork",
            )
        return
    if proof is None:
        raise StateError(
            f"no consistency proof from the size {remembered.size} already verified to {cp.size}",
            check=f"{prefix}.missing",
        )
    try:
        verify_consistency(
            old_size=remembered.size,
            new_size=cp.size,
            old_root=remembered.root,
            new_root=cp.root,
            proof=list(proof),
        )
    except ProofError as e:
        raise StateError(
            f"FORK: the checkpoint of size {cp.size} does not extend the one of size "
            f"{remembered.size} verified before ({e})",
            check=f"{prefix}.fork",
        ) from e


class CheckpointStore:
    """The newest verified checkpoint per log key, kept in a directory."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def _dir(self, key: VerifierKey) -> Path:
        return self.directory / hashlib.sha256(str(key).encode("utf-8")).hexdigest()

    def _read(self, key: VerifierKey) -> VerifiedCheckpoint | None:
        path = self._dir(key) / "checkpoint"
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_NOTE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StateError(f"cannot read {path}: {e}", check="state.io") from e
        try:
            return verify_checkpoint(data, key)
        except VerificationError as e:
            raise StateError(
                f"{path} does not hold a checkpoint signed by {key.name} ({e}); "
                "it was changed outside the verifier: inspect it, then remove it to start over",
                check="state.corrupt",
            ) from e

    def latest(self, key: VerifierKey) -> VerifiedCheckpoint | None:
        """The newest checkpoint verified for this log key, re-verified; ``None`` if none."""
        return self._read(key)

    @contextmanager
    def locked(self, key: VerifierKey) -> Iterator[_Update]:
        """Hold the log's lock: read the remembered checkpoint, verify, then ``advance``."""
        d = self._dir(key)
        try:
            d.mkdir(parents=True, exist_ok=True)
            (d / "vkey").write_text(str(key) + "\n", encoding="utf-8")
            lock = open(d / "lock", "a+b")  # noqa: SIM115 -- closed in the finally below
        except OSError as e:
            raise StateError(f"cannot use the state directory {d}: {e}", check="state.io") from e
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            yield _Update(self, key, self._read(key))
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
            lock.close()

    def advance(self, key: VerifierKey, cp: VerifiedCheckpoint, prove: ConsistencyProver | None) -> None:
        """Remember ``cp`` if it extends what is remembered (proofs from ``prove(old, new)``);
        keep the remembered one if it is newer and ``cp`` is a prefix of it; else raise."""
        with self.locked(key) as update:
            update.advance(cp, prove)

    def _write(self, key: VerifierKey, cp: VerifiedCheckpoint) -> None:
        d = self._dir(key)
        tmp = d / f"checkpoint.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(cp.note)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, d / "checkpoint")
        except OSError as e:
            raise StateError(f"cannot write {d / 'checkpoint'}: {e}", check="state.io") from e


class _Update:
    """What a verifier may do while it holds a log's state lock."""

    def __init__(self, store: CheckpointStore, key: VerifierKey, remembered: VerifiedCheckpoint | None):
        self._store = store
        self._key = key
        self.remembered = remembered

    def advance(self, cp: VerifiedCheckpoint, prove: ConsistencyProver | None = None) -> None:
        """Check ``cp`` against the remembered checkpoint and remember it if it is newer.

        A ``cp`` smaller than the remembered one is accepted only with ``prove``: a proof
        that it is a prefix of the remembered tree (a lagging replica, not a rollback)."""
        if cp.origin != self._key.name:
            raise MalformedError("checkpoint of another log", check="state.origin")
        old = self.remembered
        if old is not None and old.size > cp.size:
            if prove is None:
                require_extends(old, cp, None, prefix="state")  # raises state.rollback
            else:
                require_extends(cp, old, prove(cp.size, old.size), prefix="state")
            return
        if old is not None:
            proof = prove(old.size, cp.size) if prove is not None and old.size < cp.size else None
            require_extends(old, cp, proof, prefix="state")
            if old.size == cp.size and len(cp.note) <= len(old.note):
                return  # same tree, nothing new (no extra cosignatures) to remember
        self._store._write(self._key, cp)
        self.remembered = cp

    def advance_replayed(self, cp: VerifiedCheckpoint, root_at: Callable[[int], bytes | None]) -> None:
        """Like :meth:`advance` for a verifier that replayed the whole tree of ``cp``:
        ``root_at(size)`` is the replayed root at an earlier size (no proof needed)."""
        old = self.remembered
        if old is not None:
            if old.size > cp.size:
                require_extends(old, cp, None, prefix="state")  # raises state.rollback
            root = root_at(old.size)
            if root is None:
                raise StateError(f"no replayed root at size {old.size}", check="state.missing")
            if root != old.root:
                raise StateError(
                    f"FORK: the replayed log's root at size {old.size} is not the one verified before",
                    check="state.fork",
                )
            if old.size == cp.size and len(cp.note) <= len(old.note):
                return
        self._store._write(self._key, cp)
        self.remembered = cp
