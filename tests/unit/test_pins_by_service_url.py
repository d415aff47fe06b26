"""Issue 44, finding 5: the log key a client pins on first use was keyed by the URL's
spelling, so ``http://127.0.0.1:8080``, ``...:8080/`` and ``HTTP://127.0.0.1:8080`` each
trusted a new key on first use. Pins are keyed by the normalised URL (scheme and host case,
default port, trailing slash); different host names stay different services (``localhost``
is not ``127.0.0.1``); a pin an older version kept under the URL as typed is still read."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.agent_memory import pin_file, pinned_key, reset_pin, resolve_log_key, service_url
from engram.protocol.errors import ConfigError
from engram.protocol.keyfiles import LogKey


def _vkey(name: str) -> str:
    return LogKey(name, Ed25519PrivateKey.generate()).vkey


@dataclass
class _Answer:
    text: str


class _Service:
    """A transport that serves one log key."""

    def __init__(self, key: str) -> None:
        self.key = key

    def request(self, method: str, path: str, **kw: Any) -> _Answer:
        assert (method, path) == ("GET", "/v1/log/key")
        return _Answer(self.key + "\n")


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENGRAM_VERIFIER_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.mark.parametrize(
    ("spelling", "normal"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("HTTP://127.0.0.1:8080//", "http://127.0.0.1:8080"),
        (" http://Example.COM:80/ ", "http://example.com"),
        ("https://example.com:443", "https://example.com"),
        ("https://example.com:8443/engram/", "https://example.com:8443/engram"),
        ("http://[::1]:8080/", "http://[::1]:8080"),
        ("http://localhost:8080", "http://localhost:8080"),
    ],
)
def test_service_urls_normalise_case_default_port_and_slash(spelling: str, normal: str) -> None:
    assert service_url(spelling) == normal


@pytest.mark.parametrize(
    "bad",
    ["127.0.0.1:8080", "ftp://host", "http://", "http://host:99999", "http://u:p@host", "http://h/?q=1"],
)
def test_what_is_not_a_service_url_is_refused_saying_what_one_looks_like(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"http://127\.0\.0\.1:8080|valid port"):
        service_url(bad)


def test_three_spellings_of_one_service_trust_one_key(state: Path) -> None:
    first = _vkey("first.example/log")
    assert resolve_log_key("http://127.0.0.1:8080", None, _Service(first)) == first  # type: ignore[arg-type]
    other = _Service(_vkey("second.example/log"))
    for spelling in ("http://127.0.0.1:8080/", "HTTP://127.0.0.1:8080", "http://127.0.0.1:8080//"):
        with pytest.raises(ConfigError, match="another log is served there now"):
            resolve_log_key(spelling, None, other)  # type: ignore[arg-type]
    assert len(list((state / "log-keys").iterdir())) == 1
    assert pin_file("http://127.0.0.1:8080/") == pin_file("http://127.0.0.1:8080")


def test_localhost_and_the_loopback_address_are_different_services(state: Path) -> None:
    a, b = _vkey("a.example/log"), _vkey("b.example/log")
    assert resolve_log_key("http://127.0.0.1:8080", None, _Service(a)) == a  # type: ignore[arg-type]
    assert resolve_log_key("http://localhost:8080", None, _Service(b)) == b  # type: ignore[arg-type]
    assert pin_file("http://localhost:8080") != pin_file("http://127.0.0.1:8080")


def test_a_pin_kept_under_the_typed_url_is_still_read_and_moved(state: Path) -> None:
    old = _vkey("old.example/log")
    typed = "http://127.0.0.1:8080/"
    legacy = state / "log-keys" / hashlib.sha256(typed.encode()).hexdigest()
    legacy.parent.mkdir(parents=True)
    legacy.write_text(old + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="another log is served there now"):
        resolve_log_key(typed, None, _Service(_vkey("new.example/log")))  # type: ignore[arg-type]
    assert pinned_key("http://127.0.0.1:8080") == old
    assert resolve_log_key("http://127.0.0.1:8080", None, _Service(old)) == old  # type: ignore[arg-type]
    assert reset_pin(typed) is not None
    assert not legacy.exists() and pinned_key(typed) is None


def test_a_spelled_out_url_reaches_the_service_at_its_normal_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outsider's spellings (upper-case scheme, a stray space, the default port) reach the
    same service: the transport is given the normalised URL, not the text as typed."""
    from engram.client import agent_memory
    from engram.protocol.keyfiles import format_agent_key, write_private_file

    key = tmp_path / "ada.key"
    write_private_file(key, format_agent_key("ada", Ed25519PrivateKey.generate()))
    seen: list[str] = []

    def resolve(url: str, log_key: str | None, transport: Any) -> str:
        seen.append(transport.base_url)
        return _vkey("ada.example/log")

    monkeypatch.setattr(agent_memory, "resolve_log_key", resolve)
    agent_memory.connect_remote(" HTTP://127.0.0.1:80/ ", key)
    assert seen == ["http://127.0.0.1"]
