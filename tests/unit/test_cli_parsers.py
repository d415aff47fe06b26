"""Issue 25, finding 10 ("the fuzz harness covers every parser a command line reaches"): what
the new atheris targets found, and the export parser they cover. Each a regression test."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from engram.protocol.entries import parse_entry_lines
from engram.protocol.errors import ConfigError
from engram.protocol.keyfiles import load_agent_key, load_log_key
from verifier.errors import MalformedError
from verifier.merkle import leaf_hash


def test_a_log_key_file_that_is_not_ascii_is_a_typed_error(tmp_path: Path) -> None:
    """Found by the ``keyfiles`` target: a log key file with a byte over 0x7f raised an
    untyped UnicodeDecodeError from every command that opens the log."""
    path = tmp_path / "log.key"
    path.write_bytes(b"PRIVATE+KEY+fuzz.example/log+18ad62be+AQAB\xff\xffBUWF")
    path.chmod(0o600)
    for load in (load_log_key, load_agent_key):
        with pytest.raises(ConfigError, match=r"not ASCII|not a valid"):
            load(path)
    path.write_bytes(b"x" * 100_000)  # bounded before it is read
    with pytest.raises(ConfigError, match="larger than any key file"):
        load_log_key(path)


def _line(at: int, data: bytes, **over: object) -> str:
    row = {"index": at, "leaf": base64.b64encode(data).decode(), "leaf_hash": leaf_hash(data).hex()}
    return json.dumps({**row, **over})


def test_the_leaves_export_is_parsed_strictly() -> None:
    """The auditor's replay and ``prove`` read ``GET /v1/log/entries`` with json.loads and
    row["leaf"]: a service answering anything else raised KeyError/TypeError."""
    good = _line(4, b"a") + "\n" + _line(5, b"b") + "\n"
    assert parse_entry_lines(good, start=4) == [b"a", b"b"]
    assert parse_entry_lines(b"", start=0) == []
    bad = [
        _line(5, b"a"),  # not the index asked for
        _line(4, b"a", leaf_hash="00" * 32),  # a hash that is not its leaf's
        _line(4, b"a", extra=1),  # a member too many
        _line(4, b"a", index=True),
        _line(4, b"a", leaf=7),
        "[]",
        "{",
        _line(4, b"a") + "\n" + _line(4, b"a"),  # repeated
    ]
    for text in bad:
        with pytest.raises(MalformedError) as e:
            parse_entry_lines(text, start=4)
        assert e.value.check.startswith(("export.", "json.")), e.value.check
    with pytest.raises(MalformedError):
        parse_entry_lines(_line(4, b"a") + "\n" + _line(5, b"b"), start=4, max_entries=1)
