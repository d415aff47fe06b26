"""``engram hook <harness>``: lifecycle hooks of Claude Code and Codex over Engram.

The harness runs the hook as a shell command with one JSON object on stdin (its documented
hook payload: ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the
event's own fields) and reads context to inject from stdout. What each event does:

=====================  ==================================================================
``SessionStart``       open (or, on resume, reuse) the Engram session of this harness
                       session; inject its frozen HOT block
``UserPromptSubmit``   log the prompt as a user turn; recall for it and inject the block
``Stop``               log the assistant's answer (``last_assistant_message``, else the
                       last assistant text in the transcript) as a turn
``PreCompact``         context-pressure flush: a session-state snapshot, then the session
                       so far is closed (distilled; every turn is already logged) and the
                       conversation continues in a new Engram session
``SubagentStop``       note the sub-agent for the next snapshot
``SessionEnd``         close the session: it is distilled and filed
=====================  ==================================================================

Session-state snapshots (the Cortical Stack pattern): every ``ENGRAM_SNAPSHOT_EVERY``
exchanges (default 10; 0 turns them off) and at each flush the hook writes a signed
memory tagged ``session-state``: the current focus (the last prompt), the agent's open
commitments and decisions, and the sub-agents that ran. A session that restarts
(``SessionStart`` with ``resume`` or ``compact``) gets the newest snapshot first, before its
HOT block, to resume mid-thought.

The Engram session id is derived from the harness's session id (``cc-<id>``, ``codex-<id>``),
so a hook needs no state of its own except which continuation the session is on (a small
JSON file under ``$ENGRAM_HOOK_STATE``, else ``$XDG_STATE_HOME/engram/hooks``).

A hook never breaks the harness and never loses a prompt silently. It
always exits 0: both harnesses read exit code 2 as "block this prompt" and any other non-zero
code as a failed hook, so a hook that cannot reach memory (the service down, a bad key, a
payload that is not JSON, any error) lets the prompt through unchanged and says why in one
line on stderr (``engram hook: <event>: <what> [<check>]``); whatever it could do is still
done (a prompt whose recall failed is still logged, and the other way round). A prompt of
any length is logged: secrets redacted, in marked parts of at most ``MAX_TURN_CHARS``
characters when it is longer (engram.protocol.longtext.turn_parts), and it is recalled for
with the bounded query derived from it (``recall_query``).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from engram.client.agent_memory import AgentMemory
from engram.protocol.errors import EngramError, MalformedError
from engram.protocol.files import loads_bounded
from engram.protocol.gate import quote_for_block
from engram.protocol.longtext import bounded_text, recall_query, turn_parts
from engram.protocol.recall_block import without_hot

_SNAPSHOT_FOCUS = re.compile(r"Focus: the turn at log index (\d{1,16})\.")
_SNAPSHOT_REFS = re.compile(r"Open commitments and decisions: refs ([0-9., ]{1,200})\.")
_REF = re.compile(r"\d{1,16}\.\d{1,2}")

__all__ = ["HARNESSES", "MAX_PAYLOAD_BYTES", "engram_session", "handle", "run_hook"]

#: The harnesses ``engram hook`` serves.
HARNESSES = ("claude-code", "codex")
#: Engram session ids are ``<prefix>-<the harness's session id>``.
PREFIXES = {"claude-code": "cc", "codex": "codex", "hermes": "hermes"}
#: A hook payload larger than this is refused before it is parsed (a prompt or answer in it
#: longer than ``longtext.MAX_TEXT_CHARS`` is cut with a marker, never refused).
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
#: Both harnesses cap injected context at 10,000 characters.
MAX_CONTEXT_CHARS = 9_500
RECALL_BUDGET_TOKENS = 1_800
DEFAULT_SNAPSHOT_EVERY = 10
SNAPSHOT_TAG = "session-state"
#: Seconds a hook waits on the service for one answer (the harnesses' own timeouts are 15 s
#: and up: a hung service must not make the harness kill the hook).
HOOK_TIMEOUT_S = 10.0
_SESSION_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def engram_session(harness: str, session_id: str, part: int = 0) -> str:
    """The Engram session of a harness session (``part`` > 0: its continuation after a flush)."""
    prefix = PREFIXES[harness]
    base = f"{prefix}-{session_id}"
    if not _SESSION_OK.fullmatch(base) or len(base) > 56:
        base = f"{prefix}-{hashlib.sha256(session_id.encode('utf-8')).hexdigest()[:40]}"
    return base if part == 0 else f"{base}.{part}"


def _state_dir(env: Mapping[str, str]) -> Path:
    if env.get("ENGRAM_HOOK_STATE"):
        return Path(env["ENGRAM_HOOK_STATE"]).expanduser()
    base = Path(env.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "engram" / "hooks"


class _State:
    """Which continuation of the harness session is current (a flush moves it on)."""

    def __init__(self, directory: Path, harness: str, session_id: str) -> None:
        digest = hashlib.sha256(f"{harness}\0{session_id}".encode()).hexdigest()[:32]
        self.path = directory / f"{digest}.json"
        self.data: dict[str, Any] = {}
        if self.path.is_file():
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
                self.data = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self.data = {}

    @property
    def part(self) -> int:
        p = self.data.get("part", 0)
        return p if isinstance(p, int) and 0 <= p < 10_000 else 0

    def save(self, **changes: Any) -> None:
        self.data.update(changes)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(self.data))
        os.replace(tmp, self.path)


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text blocks of a block list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") in ("text", "output_text", "input_text")
        )
    return ""


def last_assistant_text(transcript: Path, *, max_bytes: int = 4 * 1024 * 1024) -> str | None:
    """The last assistant text in a transcript (JSONL; Claude Code's ``{"type": "assistant",
    "message": {...}}`` lines or Codex's ``response_item`` messages), reading at most the
    last ``max_bytes``; None if there is none or the file cannot be read."""
    try:
        with transcript.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            tail = f.read()
    except OSError:
        return None
    for raw in reversed(tail.splitlines()):
        try:
            line = loads_bounded(raw)
        except MalformedError:  # a line too deep is skipped like a line that is not JSON
            continue
        if not isinstance(line, dict):
            continue
        msg = line.get("message") if line.get("type") == "assistant" else None
        if msg is None and line.get("type") == "response_item":
            p = line.get("payload")
            msg = (
                p
                if isinstance(p, dict) and p.get("type") == "message" and p.get("role") == "assistant"
                else None
            )
        if isinstance(msg, dict):
            text = _text_of(msg.get("content")).strip()
            if text:
                return text
    return None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 40] + "\n[... clipped by engram hook]"


_BLOCK_END = "</memory-context>"


def _only_a_memory_block(text: str) -> bool:
    """``text`` (stripped) is one ``<memory-context>`` block and nothing else: what a harness
    echoing Engram's injected context hands back."""
    return (
        text.startswith("<memory-context")
        and text.endswith(_BLOCK_END)
        and text.count(_BLOCK_END) == 1
        and text.count("<memory-context") == 1
    )


def _one_line(error: BaseException) -> str:
    """An error as one bounded line: its text and, when it names one, its check."""
    check = getattr(error, "check", None)
    text = " ".join(str(error).split())[:600] or type(error).__name__
    return text if not check or f"[{check}]" in text else f"{text} [{check}]"


class Hook:
    def __init__(
        self,
        harness: str,
        payload: Mapping[str, Any],
        mem: Callable[[], AgentMemory],
        state_dir: Path,
        warn: Callable[[str], None] | None = None,
    ):
        self.harness = harness
        self.p = payload
        self._warn = warn or (lambda line: sys.stderr.write(f"engram hook: {line}\n"))
        self._open = mem
        self._mem: AgentMemory | None = None
        sid = payload.get("session_id")
        if not isinstance(sid, str) or not 0 < len(sid) <= 256:
            raise MalformedError("the hook payload has no session_id", check="hook.session_id")
        self.session_id = sid
        self.state = _State(state_dir, harness, sid)

    @property
    def mem(self) -> AgentMemory:
        if self._mem is None:
            self._mem = self._open()
        return self._mem

    @property
    def session(self) -> str:
        return engram_session(self.harness, self.session_id, self.state.part)

    def _field(self, name: str) -> str | None:
        v = self.p.get(name)
        return v if isinstance(v, str) else None

    def ensure_open(self) -> str:
        """The current Engram session, opened if it is not (or was closed by an earlier end)."""
        sid = self.session
        turns = self.mem.session_turns(sid)
        if turns is None:
            title = f"{self.harness} session in {self._field('cwd') or '?'}"
            self.mem.open_session(title=title[:200], session=sid)
        elif self.state.data.get("closed") == sid:
            # a resumed session whose Engram session was closed: continue in the next part
            self.state.save(part=self.state.part + 1, closed=None)
            return self.ensure_open()
        return sid

    def warn(self, what: str, error: BaseException | None = None) -> None:
        """One line on stderr: what was not done, and why."""
        event = self._field("hook_event_name") or "?"
        self._warn(f"{event}: {what}" + (f": {_one_line(error)}" if error is not None else ""))

    def _log(self, role: str, text: str) -> int | None:
        """Log a turn, in parts when it is longer than a turn may be; the log index of its
        first part (None: nothing was logged). A part that fails stops the rest and raises."""
        text = text.strip()
        if not text:
            return None
        if _only_a_memory_block(text):
            # Engram's own block coming back (a harness echoing injected context): not a turn.
            # A prompt that quotes a block and says anything more is the user's, and logged.
            self.warn(f"the {role} turn was not logged: it is an Engram <memory-context> block")
            return None
        sid = self.ensure_open()
        first: int | None = None
        text, dropped = bounded_text(text)
        for part in turn_parts(text, dropped=dropped):
            index = self.mem.turn(sid, role, part).index
            first = index if first is None else first
        return first

    @property
    def scopes(self) -> list[str] | None:
        """Global plus the project of the working directory (its repository), for Claude
        Code the same project its memory directory is imported as; ``ENGRAM_HOOK_SCOPES=all``
        searches every scope."""
        if os.environ.get("ENGRAM_HOOK_SCOPES", "").strip().lower() == "all":
            return None
        cwd = self._field("cwd")
        if not cwd:
            return None
        from engram.protocol.scopes import GLOBAL, claude_project_scope

        return [GLOBAL, claude_project_scope(cwd)]

    def _context(self, event: str, text: str) -> str:
        text = _clip(text, MAX_CONTEXT_CHARS)
        return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})

    # -- events -------------------------------------------------------------------------

    def session_start(self) -> str:
        sid = self.ensure_open()
        block = self.mem.hot_block(sid, self.scopes)
        ref = self.state.data.get("snapshot")
        if self._field("source") in ("resume", "compact") and isinstance(ref, str):
            try:
                snap = self.mem.item(ref).item.content
            except EngramError:
                snap = ""
            if snap:
                # Resolved now (an erased focus turn or commitment stays erased), then shown as
                # data: it can neither close this block nor open another, and a quoted
                # directive is withheld.
                text = quote_for_block(self._resume_block(snap))
                block = f'<session-state ref="{html.escape(ref)}">\n{text}\n</session-state>\n' + block
        return self._context("SessionStart", block)

    def _snapshot_every(self) -> int:
        raw = os.environ.get("ENGRAM_SNAPSHOT_EVERY", str(DEFAULT_SNAPSHOT_EVERY)).strip()
        if not raw.isdigit() or int(raw) > 100_000:
            raise MalformedError(
                f"ENGRAM_SNAPSHOT_EVERY={raw!r} is not a number of exchanges", check="hook.config"
            )
        return int(raw)

    def snapshot(self, why: str) -> None:
        """A signed session-state memory (see the module docstring). It quotes nothing: it
         names the focus turn by its log index (and cites it, so erasing the turn erases the
         snapshot) and the open commitments by their refs; :meth:`_resume_block` resolves both
         when a session resumes, so an erased turn or memory is never brought back by it
        ."""
        n = int(self.state.data.get("exchanges", 0))
        focus = self.state.data.get("focus_turn")
        focus = focus if isinstance(focus, int) and focus >= 0 else None
        subs = [str(s) for s in self.state.data.get("subagents", [])][-10:]
        open_items = self.mem.recall(
            "open commitments decisions tasks promises next steps", limit=20, scopes=self.scopes
        )
        refs = [
            r.ref
            for r in [*open_items.hot, *open_items.ranked]
            if r.category == "COMMITMENT" and r.tier != "RECORD" and r.ref
        ][:5]
        text = (
            f"Session state of {self.harness} session {self.session_id[:64]} ({why}, after {n} exchanges). "
            f"Focus: {'the turn at log index ' + str(focus) if focus is not None else 'none yet'}. "
            f"Open commitments and decisions: {'refs ' + ', '.join(refs) if refs else 'none recorded'}. "
            f"Sub-agents: {', '.join(subs) or 'none'}."
        )
        tags = [SNAPSHOT_TAG, *[t for t in (self._scope_tag(),) if t]]
        cites = [] if focus is None else [{"source_type": "turn", "source_ref": str(focus)}]
        try:
            out = self.mem.write(
                category="CONTEXT", content=text[:4000], tags=tags, tier="WARM", provenance=cites
            )
        except EngramError as e:
            sys.stderr.write(f"engram hook: session-state snapshot skipped: {e}\n")
            return
        self.state.save(snapshot=out.ref)

    def _live_text(self, ref: str) -> str | None:
        """The current text of an item (a turn record or a memory), None if it is gone."""
        try:
            item = self.mem.item(ref).item
        except EngramError:
            return None
        if item.status != "active" or not item.content:
            return None
        return " ".join(item.content.split())

    def _resume_block(self, snap: str) -> str:
        """The snapshot with its references resolved against the log as it is now."""
        m = _SNAPSHOT_FOCUS.search(snap)
        focus = self._live_text(f"{m.group(1)}.0") if m else None
        c = _SNAPSHOT_REFS.search(snap)
        refs = _REF.findall(c.group(1)) if c else []
        open_items = [t[:200] for t in (self._live_text(r) for r in refs[:5]) if t]
        head = snap.split(" Focus:", 1)[0]
        subs = snap.rsplit("Sub-agents:", 1)[1].strip() if "Sub-agents:" in snap else "none."
        return (
            f"{head} Current focus: {focus[:600] if focus else '(none, or erased)'} "
            f"Open commitments and decisions: {'; '.join(open_items) or 'none recorded'}. "
            f"Sub-agents: {subs}"
        )

    def _scope_tag(self) -> str | None:
        from engram.protocol.scopes import scope_tag

        project = [s for s in self.scopes or [] if s.startswith("project:")]
        return scope_tag(project[0]) if project else None

    def user_prompt_submit(self) -> str:
        """Recall for the prompt (with the bounded query derived from it), then log it; each
        goes on when the other fails, and says so."""
        prompt = self._field("prompt") or ""
        if self.p.get("prompt") is not None and not isinstance(self.p.get("prompt"), str):
            self.warn("the payload's prompt is not text: nothing of it was logged")
        sid = self.ensure_open()
        context = ""
        try:
            out = self.mem.recall(
                recall_query(prompt), session=sid, budget_tokens=RECALL_BUDGET_TOKENS, scopes=self.scopes
            )
            # SessionStart injected the HOT section; each prompt adds what it recalls.
            context = without_hot(out.context)
        except Exception as e:  # whatever failed, the prompt is still logged
            self.warn("no memory was recalled for this prompt", e)
        try:
            turn = self._log("user", prompt)
        except Exception as e:  # and what was recalled is still injected
            self.warn("the prompt was not logged", e)
            turn = None
        n = int(self.state.data.get("exchanges", 0)) + 1
        # The state file is a copy on disk: it keeps the focus turn's log index, never its
        # text (an erased prompt must not survive here).
        self.state.data.pop("focus", None)  # written by earlier versions
        self.state.save(
            exchanges=n, focus_turn=turn if turn is not None else self.state.data.get("focus_turn")
        )
        try:
            every = self._snapshot_every()
            if every and n % every == 0:
                self.snapshot(f"every {every} exchanges")
        except EngramError as e:
            self.warn("no session-state snapshot was written", e)
        return self._context("UserPromptSubmit", context) if context else ""

    def stop(self) -> str:
        text = self._field("last_assistant_message")
        if not text:
            tp = self._field("transcript_path")
            text = last_assistant_text(Path(tp).expanduser()) if tp else None
        if text:
            self._log("assistant", text)
        else:
            self.warn(
                "no assistant answer was logged: the payload has no last_assistant_message and "
                "the transcript has no assistant text"
            )
        return ""

    def pre_compact(self) -> str:
        """Flush before the harness compacts its context: the session so far is closed and
        distilled (its turns are all logged), and the conversation goes on in the next part."""
        sid = self.session
        if self.mem.session_turns(sid):
            self.snapshot("the harness is compacting its context")
            self.mem.close_session(
                sid,
                summary=f"flushed before the harness compacted its context ({self._field('trigger') or 'auto'})",
            )
            self.state.save(part=self.state.part + 1, closed=None)
            self.ensure_open()
        return ""

    def subagent_stop(self) -> str:
        kind = self._field("agent_type") or self._field("agent_id") or "sub-agent"
        subs = [str(s) for s in self.state.data.get("subagents", [])]
        self.state.save(subagents=[*subs, kind[:64]][-20:])
        return ""

    def session_end(self) -> str:
        sid = self.session
        if self.mem.session_turns(sid) is not None and self.state.data.get("closed") != sid:
            self.mem.close_session(
                sid, summary=f"{self.harness} session ended ({self._field('reason') or 'other'})"
            )
            self.state.save(closed=sid)
        return ""


EVENTS: dict[str, Callable[[Hook], str]] = {
    "SessionStart": Hook.session_start,
    "UserPromptSubmit": Hook.user_prompt_submit,
    "Stop": Hook.stop,
    "PreCompact": Hook.pre_compact,
    "SubagentStop": Hook.subagent_stop,
    "SessionEnd": Hook.session_end,
}


def parse_payload(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise MalformedError(f"the hook payload is larger than {MAX_PAYLOAD_BYTES} bytes", check="hook.size")
    try:
        payload = loads_bounded(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise MalformedError(f"the hook payload is not JSON: {e}", check="hook.json") from e
    except MalformedError as e:  # not JSON, or nested deeper than any payload is
        raise MalformedError(f"the hook payload is not JSON: {e}", check="hook.json") from e
    if not isinstance(payload, dict):
        raise MalformedError("the hook payload is not a JSON object", check="hook.json")
    return payload


def handle(
    harness: str,
    payload: Mapping[str, Any],
    mem: Callable[[], AgentMemory],
    *,
    env: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> str:
    """What the hook prints for ``payload`` (an unknown event does nothing). ``warn`` gets a
    line for each thing the event could not do while it went on (default: stderr)."""
    if harness not in HARNESSES:
        raise MalformedError(
            f"unknown harness {harness!r} (one of {', '.join(HARNESSES)})", check="hook.harness"
        )
    event = payload.get("hook_event_name")
    fn = EVENTS.get(event) if isinstance(event, str) else None
    if fn is None:
        return ""
    return fn(Hook(harness, payload, mem, _state_dir(os.environ if env is None else env), warn))


def run_hook(
    harness: str,
    mem: Callable[[], AgentMemory],
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Read the payload, act, print; always 0 (see the module docstring): what the hook could
    not do is one line each on stderr, and the harness goes on."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    err = stderr or sys.stderr

    def warn(line: str) -> None:
        err.write(f"engram hook: {line}\n")

    event = "?"
    try:
        payload = parse_payload(stdin.read(MAX_PAYLOAD_BYTES + 1))
        event = str(payload.get("hook_event_name") or "?")[:64]
        out = handle(harness, payload, mem, warn=warn)
    except Exception as e:  # a hook never breaks the harness, whatever failed
        what = "the prompt goes on without memory" if event == "UserPromptSubmit" else "nothing was done"
        warn(f"{' '.join(event.split()) or '?'}: {what}: {_one_line(e)}")
        return 0
    if out:
        stdout.write(out + "\n")
    return 0
