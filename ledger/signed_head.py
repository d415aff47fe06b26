"""The signer's own record of the last checkpoint it signed, kept outside the database.

Why: the log's promise is that every checkpoint it ever signs extends every
earlier one. The database cannot keep that promise on its own: whoever owns its tables can
roll the log back (delete the last leaves, nodes and checkpoints, set ``log_state`` back)
or restore an old backup, and the next append would then sign a second checkpoint of a size
already signed, with another root: a fork that clients holding the first checkpoint can
prove but never reconcile, and that a fresh export hides.

So the holder of the log key keeps, beside the key file, the size and root of the latest
checkpoint it signed (:class:`SignedHead`), and the log checks, under the writer lock and
before it signs, that the tree it is about to extend extends that checkpoint: the same root
at the same size, or an RFC 9162 consistency proof from the recorded size, computed from
the stored nodes and checked against the recorded root. A database behind the record, or
a tree that does not extend it, is refused (:class:`ForkRefusedError`, check
``signer.fork``) and nothing is signed.

The record is advanced after each commit: written to a temporary file, fsynced, renamed
over the record, and the directory fsynced, under an exclusive ``flock`` so that the
worker processes of one host that share the key file only ever move it forward. Written
after the commit, not before: a crash between the two leaves the record behind the
database (harmless: the next append proves the database's tree extends it), never ahead of
it (which would read as a rollback and stop the log). What it leaves open: a rollback made
within the moment between a commit and the record's fsync, and service instances on other
hosts, each of which guards only against forks of what it signed itself.

Several hosts: hosts that serve one log from one PostgreSQL database
share one record (``ENGRAM_SIGNER_RECORD`` on storage every host mounts, with working
``flock``) and write it before each commit (``ENGRAM_SIGNER_RECORD_WRITE=before-commit``,
:meth:`SignedHeadRecord.claim`): a checkpoint is recorded before any client can see it, and
only if no other host moved the record since this batch checked its tree against it. A host
failed over to a replica that lost the last commits finds the record ahead of its database
and refuses (``signer.fork``), as does a host racing another on a second copy of the
database. The price: a commit that fails after its record was written leaves the record
ahead, and signing stops until an operator re-anchors (``engram log reanchor``).

Fail closed: a record that is missing while the database holds entries
(``signer.record_missing``), unreadable (``signer.record``) or that a commit could not
advance (``signer.record_unwritable``, e.g. a key on a read-only secret mount) stops signing
until an operator re-anchors it knowingly (``engram log reanchor``): a record that silently
stops moving would let a consistently rolled-back database make the key sign a fork.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engram.protocol.errors import LogIntegrityError

__all__ = ["ForkRefusedError", "SignedHead", "SignedHeadRecord", "record_path"]

_log = logging.getLogger(__name__)

_MAGIC = "engram-signed-head/v1"
#: The record is a few lines; anything longer is not one.
_MAX_BYTES = 1024


class ForkRefusedError(LogIntegrityError):
    """The database's log does not extend the last checkpoint this signer signed."""

    def __init__(self, message: str, *, check: str = "signer.fork") -> None:
        super().__init__(message, check=check)


@dataclass(frozen=True, slots=True)
class SignedHead:
    """Size and root hash of the latest checkpoint the signer signed."""

    size: int
    root: bytes


def record_path(log_key_file: Path) -> Path:
    """Where the record of ``log_key_file``'s signer lives: beside the key."""
    return log_key_file.with_name(log_key_file.name + ".signed-head")


class SignedHeadRecord:
    """The record file of one log key (see the module docstring)."""

    def __init__(self, path: Path, origin: str) -> None:
        self.path = path
        self.origin = origin
        #: the head a commit could not record (the signer refuses to sign until it is)
        self.stale: SignedHead | None = None
        self.stale_reason = ""
        #: record each checkpoint before its commit (:meth:`claim`), not after it
        self.before_commit = False

    @contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def read(self) -> SignedHead | None:
        """The record, or None when this signer has not recorded a checkpoint yet.

        Raises:
            ForkRefusedError: the file exists but is not a record of this log (check
                ``signer.record``): the log must not sign until an operator looks.
        """
        try:
            with open(self.path, "rb") as f:
                data = f.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        return self._parse(data)

    def _parse(self, data: bytes) -> SignedHead:
        def bad(why: str) -> ForkRefusedError:
            return ForkRefusedError(
                f"the signer's record {self.path} is unreadable ({why}); refusing to sign until it is "
                "restored (it holds the last checkpoint this key signed)",
                check="signer.record",
            )

        if len(data) > _MAX_BYTES:
            raise bad("too long")
        try:
            lines = data.decode("ascii").split("\n")
        except UnicodeDecodeError:
            raise bad("not ASCII") from None
        if len(lines) != 5 or lines[0] != _MAGIC or lines[4] != "":
            raise bad("not a signed-head record")
        if lines[1] != self.origin:
            raise bad(f"it is the record of log {lines[1]!r}, not {self.origin!r}")
        if not lines[2].isdigit() or (len(lines[2]) > 1 and lines[2][0] == "0") or len(lines[2]) > 19:
            raise bad("bad size")
        try:
            root = base64.b64decode(lines[3], validate=True)
        except binascii.Error:
            raise bad("bad root") from None
        if len(root) != 32:
            raise bad("bad root")
        return SignedHead(int(lines[2]), root)

    def advance(self, head: SignedHead, *, force: bool = False) -> None:
        """Record ``head`` unless the record already holds a larger size (another process
        of this host signed further meanwhile); ``force`` (a re-anchoring) records it
        whatever the record held. Durable when it returns."""
        with self._locked():
            current = None
            if not force:
                current = self.read()
            if current is not None and current.size >= head.size:
                return
            self._write(head)

    def _write(self, head: SignedHead) -> None:
        """Replace the record with ``head`` durably (the caller holds the lock)."""
        text = f"{_MAGIC}\n{self.origin}\n{head.size}\n{base64.b64encode(head.root).decode()}\n"
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def claim(self, head: SignedHead, *, seen: SignedHead | None) -> None:
        """Record ``head`` before the commit that releases it (several hosts sharing this
        record; ``ENGRAM_SIGNER_RECORD_WRITE=before-commit``), provided the record still holds
        ``seen``, what the batch checked its tree against under the writer lock. A record
        moved since is another host that signed meanwhile on another database (a failover, a
        split brain): :class:`ForkRefusedError` (check ``signer.fork``), and the caller's
        transaction rolls back, so this checkpoint is never released. Durable when it
        returns."""
        try:
            with self._locked():
                self._claim(head, seen)
        except OSError as e:  # the lock file (or the record) cannot be opened: nothing signed
            raise ForkRefusedError(
                f"the signer's record {self.path} cannot be locked or read ({e}); refusing to sign the "
                f"checkpoint of size {head.size} before it is recorded",
                check="signer.record_unwritable",
            ) from e

    def _claim(self, head: SignedHead, seen: SignedHead | None) -> None:
        """:meth:`claim` under the record's lock."""
        current = self.read()
        if current != seen:
            now = "no record" if current is None else f"size {current.size}"
            was = "no record" if seen is None else f"size {seen.size}"
            raise ForkRefusedError(
                f"the signer's record {self.path} moved from {was} to {now} while this host "
                f"prepared the checkpoint of size {head.size}: another host signed on another copy "
                "of the database; refusing to sign a fork (run `engram audit`)"
            )
        try:
            self._write(head)
        except OSError as e:
            raise ForkRefusedError(
                f"the signer's record {self.path} cannot be written ({e}); refusing to sign the "
                f"checkpoint of size {head.size} before it is recorded",
                check="signer.record_unwritable",
            ) from e

    def advance_quietly(self, head: SignedHead) -> None:
        """:meth:`advance` after a commit: the entries are durable and are answered with their
        receipts either way, so no failure is raised, whatever it is (a
        caller told "refused" for a committed entry writes it twice when it retries). It is
        logged and kept as :attr:`stale`, and the next append retries it first and is refused
        while it fails (``signer.record_unwritable``)."""
        try:
            self.advance(head)
        except Exception as e:  # see the docstring: never raised into an acknowledged write
            _log.warning(
                "could not record the signed checkpoint of size %d in %s: %s", head.size, self.path, e
            )
            if self.stale is None or head.size > self.stale.size:
                self.stale = head
            self.stale_reason = str(e)
            return
        if self.stale is not None and self.stale.size <= head.size:
            self.stale = None
