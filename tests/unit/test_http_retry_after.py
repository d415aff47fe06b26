"""The SDK's HTTP transport waits out a 429 only as its ``Retry-After`` says within bounds:
a service (or anything between) answering a value that is zero, negative, not a number or
not finite can neither make the client ask again forever nor crash it with an untyped error;
the client ends with :class:`RateLimitedError` after at most ``max_wait_s`` of waiting."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import pytest

from engram.client import http as http_module
from engram.client.http import HttpTransport
from engram.client.litehttp import LiteResponse, _Headers
from engram.protocol.errors import RateLimitedError
from engram.protocol.problems import TYPE_BASE

#: More asks than any bounded wait makes (30 s of waiting at one second a time is 31).
_MAX_ASKS = 1000


class _AlwaysLimited:
    """An HTTP client whose every answer is a 429 with the given Retry-After."""

    def __init__(self, retry_after: str) -> None:
        self.retry_after = retry_after
        self.asks = 0

    def request(
        self, method: str, url: str, *, content: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> LiteResponse:
        self.asks += 1
        if self.asks > _MAX_ASKS:
            raise AssertionError(f"asked {self.asks} times: the client does not stop")
        body = json.dumps({"type": TYPE_BASE + "rate-limited", "detail": "slow down"}).encode()
        return LiteResponse(429, _Headers([("retry-after", self.retry_after)]), body)


@pytest.mark.parametrize(
    "retry_after", ["0", "-1", "nan", "inf", "-inf", "1e-300", "soon", "1.5", "", "\u0661", "9" * 5000]
)
def test_a_hostile_retry_after_ends_in_a_typed_rate_limit_within_the_wait_bound(
    retry_after: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    monkeypatch.setattr(http_module.time, "sleep", waits.append)
    client = _AlwaysLimited(retry_after)
    transport = HttpTransport("http://engram.invalid", http=client, max_wait_s=30.0)
    with pytest.raises(RateLimitedError) as limited:
        transport.request("GET", "/v1/log/size")
    assert client.asks <= 31
    assert all(math.isfinite(w) and w > 0 for w in waits) and sum(waits) <= 30.0
    assert limited.value.retry_after_s >= 1
