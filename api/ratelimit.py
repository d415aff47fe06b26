"""Per-key token-bucket rate limits for the HTTP service.

Where the buckets live (``ENGRAM_RATE_LIMIT_SCOPE``):

* ``host`` (the default for ``engram serve``): in a small shared-memory table, a file in the
  service's home mapped by every worker process, each update under an exclusive ``flock``.
  So the limits hold across the workers of one host: two workers allow the limit, not twice
  it. Service instances on other hosts keep their own tables.
* ``process``: in the process, as an app built around a ledger passed to ``create_app`` does.

The table is bounded: when a key's probe window is full, the least recently used key in it
is dropped, which can only make a limit more lenient for a key not seen for a while, never
stricter. A damaged slot (a torn write of a killed worker) reads as a full bucket, for the
same reason.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import mmap
import os
import secrets
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from engram.protocol.errors import RateLimitedError

__all__ = ["HostBuckets", "ProcessBuckets", "RateLimiter"]

#: decide(tokens after refill) -> (tokens to store, result)
Decide = Callable[[float], "tuple[float, float]"]


class Buckets(Protocol):
    def update(
        self, key: str, now: float, burst: float, rate: float, decide: Decide, *, create: bool = True
    ) -> float:
        """Refill ``key``'s bucket to ``now``, store what ``decide`` returns, return its result.
        ``create=False``: a key without a bucket is decided as full and nothing is stored
        (a check before authorization never takes a slot)."""
        ...


#: a bucket updated this much "later" than now is from before a reboot (the clock restarted)
_REBOOTED_S = 60.0


def _refill(tokens: float, last: float, now: float, burst: float, rate: float) -> float:
    if not (math.isfinite(tokens) and math.isfinite(last)) or tokens > burst or tokens < -burst:
        return burst  # unknown or damaged: full
    if now < last:
        # Another process read the clock after this one but took the lock first (no time
        # passed for this bucket), or the host rebooted (the table is from another boot).
        return burst if last - now > _REBOOTED_S else tokens
    return min(burst, tokens + (now - last) * rate)


class ProcessBuckets:
    """Buckets in this process (an LRU-bounded dict)."""

    def __init__(self, max_keys: int = 100_000) -> None:
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def update(
        self, key: str, now: float, burst: float, rate: float, decide: Decide, *, create: bool = True
    ) -> float:
        with self._lock:
            if not create and key not in self._buckets:
                return decide(burst)[1]
            tokens, last = self._buckets.pop(key, (burst, now))
            stored, result = decide(_refill(tokens, last, now, burst, rate))
            self._buckets[key] = (stored, max(now, last))
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        return result


class HostBuckets:
    """Buckets shared by every process of this host that maps ``path``.

    The file: a 32-byte header (magic, version, slot count, a 16-byte random secret made
    when the file is) and ``slots`` slots of 32 bytes (a 16-byte BLAKE2b digest of the key
    *keyed with that secret*, the tokens and the time of the last update as float64). A key
    is looked up in a window of ``probe`` slots from its digest's position. The digest is
    keyed so that nobody can choose, offline, keys whose slots crowd out a named agent's
    window and reset its bucket; the file is 0600 in the home.
    Times are ``time.monotonic()``, one clock for every process of the host.
    """

    MAGIC = b"ENGRAMRL"
    VERSION = 2
    HEADER = struct.Struct("<8sII16s")
    SLOT = struct.Struct("<16sdd")

    def __init__(self, path: Path, *, slots: int = 1 << 16, probe: int = 32) -> None:
        if slots < probe or slots & (slots - 1):
            raise ValueError("slots must be a power of two, at least the probe window")
        self.path = path
        self.slots = slots
        self.probe = probe
        self.size = self.HEADER.size + slots * self.SLOT.size
        self._lock = threading.Lock()  # flock excludes processes, not the threads of one
        self._map: mmap.mmap | None = None
        self._fd = -1
        self._pid = -1
        self._secret = b""

    def _open(self) -> mmap.mmap:
        if self._map is not None and self._pid == os.getpid():
            return self._map
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                header = os.pread(fd, self.HEADER.size, 0)
                prefix = self.HEADER.pack(self.MAGIC, self.VERSION, self.slots, bytes(16))[:16]
                if (
                    header[:16] != prefix
                    or len(header) != self.HEADER.size
                    or os.fstat(fd).st_size != self.size
                ):
                    # New, or written by another version or slot count: start empty (more lenient).
                    header = self.HEADER.pack(self.MAGIC, self.VERSION, self.slots, secrets.token_bytes(16))
                    os.ftruncate(fd, 0)
                    os.ftruncate(fd, self.size)
                    os.pwrite(fd, header, 0)
                self._secret = self.HEADER.unpack(header)[3]
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            self._map = mmap.mmap(fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._pid = fd, os.getpid()
        return self._map

    def update(
        self, key: str, now: float, burst: float, rate: float, decide: Decide, *, create: bool = True
    ) -> float:
        with self._lock:
            table = self._open()
            digest = hashlib.blake2b(
                key.encode("utf-8", "surrogatepass"), digest_size=16, key=self._secret
            ).digest()
            start = int.from_bytes(digest[:8], "little") & (self.slots - 1)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                at, tokens, last = self._find(table, digest, start, now, burst)
                if not create and not self._holds(table, at, digest):
                    return decide(burst)[1]  # no bucket for this key: decided as full, nothing stored
                stored, result = decide(_refill(tokens, last, now, burst, rate))
                keep = now if not last <= now + _REBOOTED_S else max(now, last)
                self.SLOT.pack_into(table, at, digest, stored, keep)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        return result

    def _holds(self, table: mmap.mmap, at: int, digest: bytes) -> bool:
        return bytes(self.SLOT.unpack_from(table, at)[0]) == digest

    def _find(
        self, table: mmap.mmap, digest: bytes, start: int, now: float, burst: float
    ) -> tuple[int, float, float]:
        """(offset, tokens, last) of ``digest``'s slot; a new key takes an empty slot of
        its window, else the one updated longest ago (its key starts again full)."""
        oldest_at, oldest_last = -1, math.inf
        for i in range(self.probe):
            at = self.HEADER.size + ((start + i) & (self.slots - 1)) * self.SLOT.size
            d, tokens, last = self.SLOT.unpack_from(table, at)
            if d == digest:
                return at, tokens, last
            if d == bytes(16):
                return at, burst, now
            if not last >= oldest_last:  # also takes a NaN (damaged) slot first
                oldest_at, oldest_last = at, last
        return oldest_at, burst, now


class RateLimiter:
    """``per_minute`` requests per key on average, bursts of up to ``burst``."""

    def __init__(
        self,
        per_minute: int,
        burst: int,
        *,
        buckets: Buckets | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute <= 0 or burst <= 0:
            raise ValueError("rate limits must be positive")
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.buckets: Buckets = buckets if buckets is not None else ProcessBuckets()
        self.clock = clock

    def _update(self, key: str, decide: Decide, *, create: bool = True) -> float:
        return self.buckets.update(key, self.clock(), self.burst, self.rate, decide, create=create)

    def _refuse(self, key: str, short: float) -> None:
        wait = max(1, math.ceil(short / self.rate))
        raise RateLimitedError(f"too many requests for {key}; retry in {wait} s", retry_after_s=wait)

    def check(self, key: str, cost: float = 1.0) -> None:
        """Raise :class:`RateLimitedError` if ``key`` has fewer than ``cost`` tokens (takes none,
        and creates no bucket: a key gets one only when :meth:`charge` or :meth:`hit` bills it,
        after it was authorized)."""
        need = min(cost, self.burst)
        tokens = self._update(key, lambda t: (t, t), create=False)
        if tokens < need:
            self._refuse(key, need - tokens)

    def charge(self, key: str, cost: float = 1.0) -> None:
        """Take ``cost`` tokens after the work succeeded (may go into debt, never fails)."""
        self._update(key, lambda t: (max(-self.burst, t - cost), t))

    def hit(self, key: str, cost: float = 1.0) -> None:
        """Take ``cost`` tokens from ``key``'s bucket or raise :class:`RateLimitedError`."""
        tokens = self._update(key, lambda t: (t - cost, t) if t >= cost else (t, t))
        if tokens < cost:
            self._refuse(key, cost - tokens)
