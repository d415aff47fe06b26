"""Secrets in the forms people paste never reach a signed body, through the client's write
path and through import, on both backends (issue 40, finding 6): the SDK (``AgentMemory``,
what the hooks, MCP, Hermes and the CLI call) redacts before signing; a client that signs
without redacting is refused by the log (``gate.secret``) with nothing written; an import
redacts a long text before cutting it into entries, so no secret is cut in two."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engram.client.sdk import Agent
from engram.harness.transfer import import_source
from engram.protocol.gate import GateRejection
from ledger.log import Ledger
from tests.contract.conftest import MemoryOf

ROOT = Path(__file__).resolve().parents[2]
CORPUS: list[dict[str, Any]] = json.loads(
    (ROOT / "tests" / "fixtures" / "secrets" / "corpus.json").read_text(encoding="utf-8")
)
#: The families of forms issue 40 found signed in clear (and the encodings tried from outside).
NEW_FORMS = [
    c for c in CORPUS if c["family"] in ("config", "file", "prose", "encoding") or "token" in c["family"]
]


def _secrets(case: dict[str, Any]) -> list[str]:
    return case["secret"] if isinstance(case["secret"], list) else [case["secret"]]


def _stored(ledger: Ledger, index: int) -> bytes:
    got = ledger.store.body(index)
    assert got is not None
    return got[1]


def _assert_clean(raw: bytes, case: dict[str, Any]) -> None:
    text = raw.decode("utf-8")
    for secret in _secrets(case):
        assert secret not in text, (case["form"], secret)
        assert json.dumps(secret)[1:-1] not in text, (case["form"], secret)  # nor JSON-escaped


def test_every_pasted_form_is_redacted_before_signing_through_the_sdk(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Issue 40, finding 6: each form, as a turn (the hooks' path, a tool result and its
    arguments included), a session title and summary, and a memory's content and evidence:
    no byte of the secret is in what the log stored."""
    mem = memory_of(make_agent("ada"))
    for case in NEW_FORMS:
        text = case["text"]
        sid = mem.open_session(title=text[:200] if len(text) <= 200 else None)
        turn = mem.turn(
            sid, "tool", text, tool={"name": "Bash", "arguments": {"command": text}, "result": text}
        )
        _assert_clean(_stored(ledger, turn.index), case)
        try:
            w = mem.write(category="CONTEXT", content=f"noted: {text}", evidence=text)
        except GateRejection:
            pass  # a text the write gate refuses as a memory (curl ... --data) is not signed at all
        else:
            _assert_clean(_stored(ledger, w.index), case)
        closed = mem.close_session(sid, summary=text[:500])
        _assert_clean(_stored(ledger, closed.closed), case)
    for index in range(ledger.size()):
        body = ledger.store.body(index)
        if body is not None:
            for case in NEW_FORMS:
                _assert_clean(body[1], case)


@pytest.mark.parametrize(
    "case", [c for c in NEW_FORMS if c["family"] != "token"][:60], ids=lambda c: c["form"]
)
def test_a_signed_body_still_carrying_a_pasted_form_is_refused(
    case: dict[str, Any],
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that signs without redacting: the log's check finds what the signer would
    have redacted (the same detector on both sides) and writes nothing."""
    ada = make_agent("ada")
    sid = memory_of(ada).open_session()
    size = ledger.size()
    monkeypatch.setattr("engram.protocol.signer.redact_body", lambda body: body)
    with pytest.raises(GateRejection) as e:
        ada.append("session.turn", {"session": sid, "turn": 0, "role": "user", "content": case["text"]})
    assert e.value.check == "gate.secret"
    assert ledger.size() == size


def _mem0(tmp_path: Path, memories: list[str]) -> Path:
    src = tmp_path / "mem0.json"
    src.write_text(
        json.dumps({"results": [{"id": f"m-{i}", "memory": m} for i, m in enumerate(memories)]}),
        encoding="utf-8",
    )
    return src


def test_every_pasted_form_is_redacted_before_signing_through_import(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf, tmp_path: Path
) -> None:
    """Issue 40, finding 6: an imported memory file carrying each form (a Mem0 export here;
    every format reads into the same entries) signs none of them."""
    mem = memory_of(make_agent("ada"))
    report = import_source(mem, "mem0", _mem0(tmp_path, [c["text"] for c in NEW_FORMS]))
    assert report.entries == len(NEW_FORMS)
    assert len(report.written) + len(report.refused) == len(NEW_FORMS)
    assert all(r["check"].startswith("gate.") for r in report.refused)
    for item in report.written:
        raw = _stored(ledger, item["index"])
        for case in NEW_FORMS:
            _assert_clean(raw, case)


def test_a_secret_across_the_cut_of_a_long_import_entry_is_redacted_whole(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf, tmp_path: Path
) -> None:
    """A text longer than one memory is cut in parts; a token that straddled the cut used to
    reach the log as two halves no rule recognised. Now the text is redacted before the cut."""
    token = "ghp_7Hd8Kq2mPz9RtV4wLs8NbY3cJdQe5fGh6iJk"
    blob = "a1," * 1330 + token + ",b2" * 150  # no space or line: the cut falls at 4,000 characters
    mem = memory_of(make_agent("ada"))
    report = import_source(mem, "mem0", _mem0(tmp_path, [blob]))
    assert len(report.written) == 2
    for item in report.written:
        raw = _stored(ledger, item["index"]).decode()
        assert "ghp_7Hd8Kq" not in raw and "3cJdQe5fGh6iJk" not in raw
