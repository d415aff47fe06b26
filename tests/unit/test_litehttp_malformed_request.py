"""LiteHttp (the SDK's client for a plain ``http://`` service) refuses a request that would
split or cannot be written, a CR/LF in a header (a share token pasted from elsewhere) or in
the path, with a typed MalformedError naming ``http.request``: never an untyped ValueError,
and never a StorageError that reads as a transport failure worth retrying."""

from __future__ import annotations

import pytest

from engram.client.litehttp import LiteHttp
from engram.protocol.errors import MalformedError

#: Nothing listens here; the request is refused before a connection is made.
_URL = "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/v1/shared", {"engram-share-token": "t\r\nX-Injected: 1"}),
        ("/v1/shared", {"engram-share-token": "t\nX-Injected: 1"}),
        ("/v1/shared", {"engram-share-token": "\u2603"}),
        ("/v1/shared", {"x\r\ny": "1"}),
        ("/v1/agents/a b\r\nX-Injected: 1", {}),
        ("/v1/agents/a\x00b", {}),
    ],
)
def test_a_request_that_would_split_is_refused_typed_before_sending(
    path: str, headers: dict[str, str]
) -> None:
    client = LiteHttp(timeout_s=5)
    with pytest.raises(MalformedError) as refused:
        client.request("GET", _URL + path, headers=headers)
    assert refused.value.check == "http.request"
    client.close()


@pytest.mark.parametrize("url", ["http://127.0.0.1:port/v1", "http://127.0.0.1:99999/v1", "http://[::1/v1"])
def test_a_url_whose_port_or_host_does_not_parse_is_refused_typed(url: str) -> None:
    """A service URL with a port that is no number, out of range, or a broken address is a
    MalformedError naming ``http.url``, never the ValueError urllib raises."""
    client = LiteHttp(timeout_s=5)
    with pytest.raises(MalformedError) as refused:
        client.request("GET", url)
    assert refused.value.check == "http.url"
