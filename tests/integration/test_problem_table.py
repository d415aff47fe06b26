"""The error <-> problem mapping is one table (engram.protocol.problems) read by both sides: every
row survives the round trip service -> RFC 9457 problem -> client, with its class, status and
the failed check."""

from __future__ import annotations

import json

import httpx
import pytest

from api.problems import problem_for
from engram.client.http import _raise_problem
from engram.protocol.errors import (
    ConflictError,
    EngramError,
    LogIntegrityError,
    RateLimitedError,
    StorageError,
    VerificationError,
    VersionConflictError,
)
from engram.protocol.problems import PROBLEMS, ProblemType


def _instance(row: ProblemType) -> EngramError:
    if issubclass(row.error, ConflictError):
        return VersionConflictError(
            "moved", agent="a", kind="commitment", head_version=3, head_leaf_hash="ab" * 32
        )
    if issubclass(row.error, RateLimitedError):
        return RateLimitedError("slow down", retry_after_s=7)
    if issubclass(row.error, VerificationError):
        return row.error("bad input", check="some.check")
    if issubclass(row.error, LogIntegrityError):
        return LogIntegrityError("a row changed", check="state.agent_keys")
    return row.error("failed")


def _response(error: EngramError) -> httpx.Response:
    served = problem_for(error)
    return httpx.Response(
        served.status_code,
        headers={k: v for k, v in served.headers.items() if k != "content-length"},
        content=bytes(served.body),
        request=httpx.Request("GET", "http://test/"),
    )


@pytest.mark.parametrize("row", PROBLEMS, ids=lambda r: r.slug)
def test_every_row_round_trips(row: ProblemType) -> None:
    error = _instance(row)
    resp = _response(error)
    body = json.loads(resp.content)
    assert resp.status_code == row.status and body["type"] == row.uri and body["title"] == row.title
    with pytest.raises(row.error) as raised:
        _raise_problem(resp)
    got = raised.value
    assert type(got) is type(error) or (
        isinstance(error, ConflictError) and isinstance(got, VersionConflictError)
    )
    if isinstance(error, VerificationError):
        assert isinstance(got, VerificationError) and got.check == error.check
    if isinstance(error, ConflictError):
        assert isinstance(got, ConflictError)
        assert (got.agent, got.kind, got.head_version) == ("a", "commitment", 3)
    if isinstance(error, RateLimitedError):
        assert isinstance(got, RateLimitedError) and got.retry_after_s == 7
    if isinstance(error, LogIntegrityError):
        assert isinstance(got, LogIntegrityError) and got.check == error.check


def test_rows_are_ordered_most_specific_first() -> None:
    """A row never shadows a later one: no class is a subclass of an earlier row's class."""
    for i, later in enumerate(PROBLEMS):
        for earlier in PROBLEMS[:i]:
            assert not issubclass(later.error, earlier.error), (earlier.slug, later.slug)


def test_storage_errors_never_leak_the_driver_message() -> None:
    body = json.loads(bytes(problem_for(StorageError("psycopg: password=hunter2")).body))
    assert "hunter2" not in body["detail"]


def test_unknown_problem_types_are_not_trusted() -> None:
    resp = httpx.Response(
        418,
        json={"type": "https://elsewhere.example/teapot", "title": "x", "status": 418, "detail": "d"},
        request=httpx.Request("GET", "http://test/"),
    )
    with pytest.raises(StorageError, match="418"):
        _raise_problem(resp)


@pytest.mark.parametrize(
    "row", [r for r in PROBLEMS if issubclass(r.error, VerificationError)], ids=lambda r: r.slug
)
def test_a_check_name_prints_once_after_the_round_trip(row: ProblemType) -> None:
    """Issue 44: the service's detail already starts with ``[check]``, and the client put it in
    front again (``[token.signature] [token.signature] ...``, ``[auth.signer] [auth.signer]``)."""
    error = row.error("bad input", check="some.check")
    with pytest.raises(row.error) as raised:
        _raise_problem(_response(error))
    assert str(raised.value) == str(error) == "[some.check] bad input"
