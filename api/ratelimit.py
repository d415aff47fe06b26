"""Per-key token-bucket rate limits for the HTTP service.

Buckets live in the process: with several workers the effective limit is the per-worker
limit times the number of workers (documented in the README). The table of buckets is
bounded: the least recently used key is dropped first, which can only make a limit more
lenient for a key not seen in a long time, never stricter.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from engram.protocol.errors import RateLimitedError

__all__ = ["RateLimiter"]


class RateLimiter:
    """``per_minute`` requests per key on average, bursts of up to ``burst``."""

    def __init__(
        self,
        per_minute: int,
        burst: int,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute <= 0 or burst <= 0:
            raise ValueError("rate limits must be positive")
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def _refill(self, key: str, now: float) -> float:
        tokens, last = self._buckets.pop(key, (self.burst, now))
        return min(self.burst, tokens + (now - last) * self.rate)

    def check(self, key: str, cost: float = 1.0) -> None:
        """Raise :class:`RateLimitedError` if ``key`` has fewer than ``cost`` tokens (takes none)."""
        now = self.clock()
        with self._lock:
            tokens = self._refill(key, now)
            self._buckets[key] = (tokens, now)
            self._trim()
        if tokens < min(cost, self.burst):
            wait = math.ceil((min(cost, self.burst) - tokens) / self.rate)
            raise RateLimitedError(f"too many requests for {key}; retry in {wait} s", retry_after_s=wait)

    def charge(self, key: str, cost: float = 1.0) -> None:
        """Take ``cost`` tokens after the work succeeded (may go into debt, never fails)."""
        now = self.clock()
        with self._lock:
            tokens = self._refill(key, now)
            self._buckets[key] = (max(-self.burst, tokens - cost), now)
            self._trim()

    def _trim(self) -> None:
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)

    def hit(self, key: str, cost: float = 1.0) -> None:
        """Take ``cost`` tokens from ``key``'s bucket or raise :class:`RateLimitedError`."""
        now = self.clock()
        with self._lock:
            tokens = self._refill(key, now)
            if tokens < cost:
                self._buckets[key] = (tokens, now)
                wait = math.ceil((cost - tokens) / self.rate)
                raise RateLimitedError(f"too many requests for {key}; retry in {wait} s", retry_after_s=wait)
            self._buckets[key] = (tokens - cost, now)
            self._trim()
