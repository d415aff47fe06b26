"""A labelled set of statements for commitments (issue 42): is this sentence, said in a turn
of this role, a real promise by the agent? A ``COMMITMENT`` memory is filed COLD, a
permanent record the trust oracle counts, so precision comes first.

    python bench/commitment_set.py            # precision and recall, per half, and the misses

The statements (``bench/data/commitment-statements.json``, 170) are sentences of real
conversations: turns of LongMemEval-S (Di Wu et al., ICLR 2025, arXiv 2410.10813; MIT,
Copyright (c) 2024 Di Wu; the notice is in bench/data/README.md), each with its session id
and turn position in the development set. They were drawn with fixed seeds by pattern, so
that the near misses are there: the assistant's "I will" / "I'll" sentences at random, the
ones that name a later act (send, remind, follow up, update, from now on ...), noting and
keeping in mind, checking, hypotheticals and offers ("if you'd like", "I can"), the user's
requests and the user's own "I'll", and reported speech.

**Labels** (written by hand, one reading of each sentence as it stands): ``promise`` is true
when the agent (an assistant turn) commits itself, unconditionally and in its own voice, to
a concrete act after this reply (sending, reminding, following up, updating, passing on,
scheduling, keeping someone posted, continuing in the next response), or binds its conduct
from now on ("I'll be speaking in the first person from now on"). False for: the reply
narrating itself ("I'll provide some tips", "I'll walk you through", "I'll suggest"),
acknowledgements ("I will keep that in mind", "I'll add that to the notes"), checking
("I'll check if they have sales"), offers that wait for the listener ("let me know and I'll
...", "please share ..., and I'll ...", "once I have more information, I'll ..."),
hypotheticals and abilities ("I can", "I could"), vague resolutions ("I'll be more
careful", "I'll try to be more considerate"), quoted or example sentences, lyrics and
role-played characters, the speaker's own pastimes ("I'll get back to planning the
marathon"), every user sentence, and reported speech.

**Halves**: each statement is in the ``dev`` or the ``held-out`` half by the first byte of
the SHA-256 of its text (even: dev). The classifier (ledger.memory.promises) was written
before the set and then corrected on the dev half's misses only; the held-out half checks it.

:func:`score` asks what the distiller does: a statement is predicted a commitment when
:class:`~ledger.memory.distill.RuleBasedDistiller`, given the statement as a one-turn session
of its role, writes a ``COMMITMENT`` memory.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.memory.distill import RuleBasedDistiller, Turn

DATA = Path(__file__).resolve().parent / "data" / "commitment-statements.json"
HALVES = ("dev", "held-out")


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    """One labelled sentence: where it was said (session id, turn position), by which role,
    its text, whether it is a promise by the agent, its half, and the pattern it was drawn by."""

    session: str
    turn: int
    role: str
    text: str
    promise: bool
    half: str
    drawn_by: str


def load(path: Path = DATA) -> tuple[Statement, ...]:
    return tuple(Statement(**o) for o in json.loads(path.read_text(encoding="utf-8")))


STATEMENTS = load()


def committed(s: Statement) -> bool:
    """Whether the default distiller writes a COMMITMENT memory for the statement alone."""
    entries = RuleBasedDistiller().distill("s", [Turn(index=1, turn=0, role=s.role, content=s.text)])
    return any(e["category"] == "COMMITMENT" for e in entries)


def score(statements: tuple[Statement, ...] = STATEMENTS) -> dict[str, float]:
    """Precision and recall of :func:`committed` on ``statements``."""
    tp = sum(1 for s in statements if s.promise and committed(s))
    fp = sum(1 for s in statements if not s.promise and committed(s))
    fn = sum(1 for s in statements if s.promise and not committed(s))
    return {
        "statements": len(statements),
        "promises": sum(1 for s in statements if s.promise),
        "committed": tp + fp,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
    }


def main() -> int:
    print(f"{len(STATEMENTS)} statements from LongMemEval-S turns ({DATA.name})")
    for half in (*HALVES, "all"):
        part = tuple(s for s in STATEMENTS if half in (s.half, "all"))
        r = score(part)
        print(
            f"  {half:<9} {r['statements']:>4} statements, {r['promises']:>3} promises: "
            f"{r['committed']:>3} committed, precision {r['precision']:.2f}, recall {r['recall']:.2f}"
        )
    for s in STATEMENTS:
        if s.promise != committed(s):
            print(f"  {'false positive' if not s.promise else 'missed'} ({s.half}): {s.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
