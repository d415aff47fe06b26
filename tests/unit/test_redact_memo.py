"""Issue 42, Deliver 5: one write's text is scanned for secrets by the client, the signer and
the log's edge; the scans after the first are answered from a bounded memo keyed by the
text's digest, with the same answer, and the memo keeps no secret."""

from __future__ import annotations

import pytest

from engram.protocol import redact

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_a_text_scanned_again_is_answered_from_the_memo_without_keeping_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rounds: list[str] = []
    real = redact._one_round

    def counting(text: str, *args: object, **kw: object) -> tuple[str, list[str]]:
        rounds.append(text)
        return real(text, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(redact, "_one_round", counting)
    text = f"deploy with token {TOKEN} tonight, memo test"
    first = redact.redact_secrets(text)
    scanned = len(rounds)
    assert TOKEN not in first[0] and first[1]  # redacted, and the rule named
    again = redact.redact_secrets(text)
    assert again == first and len(rounds) == scanned  # no rule ran the second time
    again[1].append("caller's own list")  # the answer is the caller's to change
    assert redact.redact_secrets(text) == first
    assert not any(TOKEN in out for out, _ in redact._SEEN.values())


def test_the_memo_is_bounded() -> None:
    for i in range(redact._SEEN_MAX + 50):
        redact.redact_secrets(f"note number {i} about the staging database")
    assert len(redact._SEEN) <= redact._SEEN_MAX


def test_a_redacted_text_is_remembered_as_clean_as_a_fresh_scan_answers() -> None:
    """Issue 43, Deliver 4: the text the signer produced is remembered as clean, so the log's
    edge in the same process does not scan it again; each entry is what a fresh scan of that
    exact text answers."""
    text = f"deploy with token {TOKEN} tonight, produced-text test"
    out, found = redact.redact_secrets(text)
    assert found and TOKEN not in out
    with redact._SEEN_LOCK:
        entry = redact._SEEN.get(redact._digest(out))
    assert entry == (out, ())
    with redact._SEEN_LOCK:
        redact._SEEN.clear()
    assert redact.redact_secrets(out) == (out, [])  # a fresh scan agrees


def test_a_text_left_by_the_last_round_still_finding_is_not_remembered_as_clean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redaction stops after its last allowed round; if that round still found something, the
    text it left was never checked, and must be scanned again wherever it is checked."""

    def always_finds(text: str, *args: object, **kw: object) -> tuple[str, list[str]]:
        return text + " [REDACTED:github_token]", ["github_token"]

    monkeypatch.setattr(redact, "_one_round", always_finds)
    out, found = redact.redact_secrets("a text that never settles, round test")
    assert len(found) == redact._MAX_ROUNDS
    with redact._SEEN_LOCK:
        assert redact._digest(out) not in redact._SEEN


@pytest.mark.parametrize("extra", [" " + TOKEN, TOKEN[:20], "\u200b"])
def test_a_produced_text_changed_in_any_way_is_not_answered_from_the_memo(extra: str) -> None:
    text = f"rotate {TOKEN} before friday, tamper test"
    out, _ = redact.redact_secrets(text)
    changed = out + extra
    with redact._SEEN_LOCK:
        assert redact._digest(changed) not in redact._SEEN
