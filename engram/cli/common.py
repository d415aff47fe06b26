"""What the ``engram`` command's sub-apps share: the consoles, opening the log or the
services from the environment, the agent of a key file (embedded or on a service), typed
options, a progress bar and the JSON forms of proofs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engram.protocol.errors import ConfigError, MalformedError
from verifier.note import b64encode

if TYPE_CHECKING:
    from engram.client.agent_memory import AgentMemory
    from ledger.log import ConsistencyProof, InclusionProof, Ledger

# The service (ledger) is imported inside the functions that open the embedded log, never
# here: the agent's commands run with --server on the client extra alone (issue 44), and a
# command that needs the service says which extra it needs (engram.cli.app.main).

out = Console(highlight=False, soft_wrap=True)


err = Console(stderr=True, highlight=False, soft_wrap=True)  # one line per error, never wrapped mid-word


def log_from_env() -> Ledger:
    from ledger.compose import open_ledger
    from ledger.config import Settings

    return open_ledger(Settings.from_env())


def inclusion_json(p: InclusionProof) -> dict[str, Any]:
    return {
        "index": p.index,
        "size": p.size,
        "leaf_hash": p.leaf_hash.hex(),  # hashes naming an entry are hex on every surface
        "root": b64encode(p.root),
        "proof": [b64encode(h) for h in p.hashes],
        "checkpoint": None if p.checkpoint is None else p.checkpoint.decode("utf-8"),
    }


def consistency_json(p: ConsistencyProof) -> dict[str, Any]:
    return {
        "old_size": p.old_size,
        "new_size": p.new_size,
        "old_root": b64encode(p.old_root),
        "new_root": b64encode(p.new_root),
        "proof": [b64encode(h) for h in p.hashes],
        "old_checkpoint": None if p.old_checkpoint is None else p.old_checkpoint.decode("utf-8"),
        "new_checkpoint": None if p.new_checkpoint is None else p.new_checkpoint.decode("utf-8"),
    }


def tlog_proof_text(p: InclusionProof) -> str:
    """The proof as a c2sp.org/tlog-proof@v1 file (needs the checkpoint of that size)."""
    if p.checkpoint is None:
        raise ConfigError(f"no checkpoint was signed at size {p.size}; pick a checkpointed size")
    lines = ["c2sp.org/tlog-proof@v1", f"index {p.index}", *(b64encode(h) for h in p.hashes), ""]
    return "\n".join(lines) + "\n" + p.checkpoint.decode("utf-8")


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[[int, int], None]]:
    """A transient progress bar on stderr; yields ``tick(done, total)``. The bar appears at
    the first tick: a command that fails before it has work to show prints its error alone."""
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task: list[Any] = []

    def tick(done: int, total: int) -> None:
        if not task:
            progress.start()
            task.append(progress.add_task(description, total=None))
        progress.update(task[0], completed=done, total=total)

    try:
        yield tick
    finally:
        if task:
            progress.stop()


def memory_from_env() -> tuple[Ledger, Any]:
    from ledger.compose import open_services
    from ledger.config import Settings

    services = open_services(Settings.from_env())
    return services.ledger, services.memory


def agent_of(ledger: Ledger, key_file: Path) -> Any:
    """The agent of ``key_file`` on the bare embedded log (key and token events; memory
    events go through :func:`agent_memory`)."""
    from engram.client.sdk import Agent
    from ledger.inprocess import InProcess

    return Agent.load(key_file, log_vkey=ledger.vkey, transport=InProcess(ledger))


def require_agent(ledger: Ledger, agent: str) -> None:
    """An agent id that names no agent of this log is an error, not an empty answer."""
    if not ledger.store.keys_of(agent):
        from engram.protocol.errors import NotFoundError

        raise NotFoundError(
            f"no agent {agent!r} in the log {ledger.origin} (engram agent create {agent} ...)"
        )


KeyFile = Annotated[Path, typer.Option("--key-file", help="The agent's key file.", envvar="ENGRAM_KEY_FILE")]


SessionId = Annotated[str, typer.Option("--session", help="Session id.")]


Server = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="ENGRAM_URL",
        help="Act on the Engram service at this URL (the client only; default: ENGRAM_URL, else the embedded log).",
    ),
]


LogKey = Annotated[
    str | None,
    typer.Option(
        "--log-key",
        envvar="ENGRAM_LOG_KEY",
        help="With --server: the log's verifier key (else pinned on first use).",
    ),
]


AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def agent_memory(key_file: Path, server: str | None, log_key: str | None) -> AgentMemory:
    """The agent of ``key_file``: on the service at ``server`` (client only), else embedded."""
    if server:
        from engram.client.agent_memory import connect_remote

        return connect_remote(server, key_file, log_key=log_key)
    from engram.cli.local import open_local

    return open_local(key_file)


def emit(as_json: bool, data: Any, text: str) -> None:
    if as_json:
        out.print_json(json.dumps(data, sort_keys=True))
    else:
        out.print(text)


def duration_s(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit():
        raise MalformedError(f"duration {text!r} is not like 30m, 12h or 7d", check="cli.duration")
    return int(text[:-1]) * units[text[-1]]


def agent_public_keys(ledger: Ledger, agent: str) -> list[bytes]:
    return [k.public_key for k in ledger.store.keys_of(agent) if k.retired_how != "revoked"]
