"""Issue 25, finding 9: ``memory export`` followed a pre-planted symlink in the target folder
and overwrote its target; a deeply nested Mem0 import file or chat-distiller reply raised an
untyped ``RecursionError``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engram.harness.formats import FormatError, read_mem0, write_claude_code, write_hermes, write_mem0
from engram.harness.hooks import parse_payload
from engram.protocol.errors import MalformedError
from engram.protocol.files import loads_bounded, write_file
from ledger.memory.distill import ChatCompletionsDistiller, DistillerError
from tests.unit.test_memory_distill_recall import TURNS, FakeChat

ITEMS = [
    {"ref": "3.0", "index": 3, "category": "LEARNING", "content": "Deploys happen on Tuesdays", "tags": []}
]
DEEP = "[" * 100_000 + "]" * 100_000


def _planted(tmp_path: Path, name: str) -> tuple[Path, Path]:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / name)
    return out, victim


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("MEMORY.md", lambda out: write_hermes(ITEMS, out)),
        ("MEMORY.md", lambda out: write_claude_code(ITEMS, out)),
        ("mem0.json", lambda out: write_mem0(ITEMS, "ada", out / "mem0.json")),
    ],
)
def test_export_refuses_a_symlink(tmp_path: Path, name: str, write: object) -> None:
    out, victim = _planted(tmp_path, name)
    with pytest.raises(MalformedError) as e:
        write(out)  # type: ignore[operator]
    assert e.value.check == "file.symlink"
    assert victim.read_text(encoding="utf-8") == "precious\n"


def test_write_file_replaces_a_link_planted_meanwhile(tmp_path: Path) -> None:
    target = tmp_path / "bundle.json"
    write_file(target, b"{}")
    assert target.read_bytes() == b"{}" and not target.is_symlink()
    assert [p.name for p in tmp_path.iterdir()] == ["bundle.json"]  # no temporary file left


def test_a_nested_mem0_import_is_a_typed_error(tmp_path: Path) -> None:
    f = tmp_path / "mem0.json"
    f.write_text('{"results": ' + DEEP + "}", encoding="utf-8")
    with pytest.raises(FormatError) as e:
        read_mem0(f)
    assert e.value.check == "import.json"


def test_a_nested_distiller_reply_is_a_typed_error() -> None:
    chat = FakeChat()
    try:
        chat.reply = ('{"choices": [{"message": {"content": ' + DEEP + "}}]}").encode()
        d = ChatCompletionsDistiller(url=chat.url, model="tiny", max_reply_bytes=1 << 20)
        with pytest.raises(DistillerError):
            d.distill("s-1", TURNS)
        chat.content({"entries": [{"deep": DEEP}]})  # too deep inside the content string too
        with pytest.raises(DistillerError):
            d.distill("s-1", TURNS)
    finally:
        chat.server.shutdown()


def test_a_nested_hook_payload_is_a_typed_error() -> None:
    with pytest.raises(MalformedError) as e:
        parse_payload(('{"hook_event_name": ' + "[" * 50_000 + "]" * 50_000 + "}").encode())
    assert e.value.check == "hook.json"


def test_loads_bounded_refuses_deep_and_malformed_json() -> None:
    assert loads_bounded('{"a": [[1]]}') == {"a": [[1]]}
    with pytest.raises(MalformedError):
        loads_bounded(DEEP)
    with pytest.raises(MalformedError) as e:
        loads_bounded("{nope")
    assert e.value.check == "json.syntax"
