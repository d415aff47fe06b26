"""``engram session`` and ``engram memory``: one agent's memory, on the embedded log or
(``--server``) on an Engram service."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from engram.cli.common import (
    AsJson,
    KeyFile,
    LogKey,
    Server,
    SessionId,
    agent_memory,
    emit,
    memory_from_env,
    out,
    progress_bar,
    require_agent,
)
from engram.protocol.errors import MalformedError

session_app = typer.Typer(
    rich_markup_mode=None,
    help="Working sessions: open, record turns, close (distill + compact).",
    no_args_is_help=True,
)
memory_app = typer.Typer(
    rich_markup_mode=None, help="Memory: write, recall, show, compact, rebuild.", no_args_is_help=True
)


def _redacted(n: int) -> str:
    """What a write's answer adds when it redacted secrets before signing."""
    return f"; {n} secret{'' if n == 1 else 's'} redacted before signing" if n else ""


@session_app.command("open")
def session_open(
    key_file: KeyFile,
    title: Annotated[str | None, typer.Option(help="A title for the session.")] = None,
    session: Annotated[str | None, typer.Option(help="Choose the session id (default: random).")] = None,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Open a session; prints its id. HOT memory is frozen for the session from now."""
    sid = agent_memory(key_file, server, log_key).open_session(title=title, session=session)
    emit(as_json, {"session": sid}, sid)


@session_app.command("turn")
def session_turn(
    key_file: KeyFile,
    session: SessionId,
    role: Annotated[str, typer.Option(help="user, assistant, system or tool.")],
    content: Annotated[str, typer.Option(help="The message or tool output, in full.")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Record one turn of a session (full fidelity)."""
    r = agent_memory(key_file, server, log_key).turn(session, role, content)
    emit(as_json, r.to_json(), f"turn recorded at index {r.index}{_redacted(r.redacted)}")


@session_app.command("distill")
def session_distill(
    agent: Annotated[str, typer.Option(help="Agent id.")],
    session: SessionId,
    as_json: AsJson = False,
) -> None:
    """Distill and file a closed session that was not (distiller down, or compaction off)."""
    ledger, mem = memory_from_env()
    require_agent(ledger, agent)
    distilled, entries, decisions = mem.finish_session(agent, session)
    where = (
        "already distilled"
        if distilled is None
        else f"distilled {entries} memories at index {distilled.index}"
    )
    data = {
        "distilled": None if distilled is None else distilled.index,
        "entries": entries,
        "decisions": len(decisions),
    }
    emit(as_json, data, f"{where}; {len(decisions)} tier decisions")


@session_app.command("close")
def session_close(
    key_file: KeyFile,
    session: SessionId,
    summary: Annotated[str | None, typer.Option(help="An optional summary.")] = None,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Close a session: distill it into memories and file them in their tiers."""
    mem = agent_memory(key_file, server, log_key)
    res = mem.close_session(session, summary=summary)
    text = f"closed at index {res.closed}{_redacted(res.redacted)}"
    if res.distilled is not None:
        text += f"\ndistilled {res.entries} memories at index {res.distilled}; {res.decisions} tier decisions"
    else:  # the close stands either way; the service files it later on request
        text += (
            "\nnot filed into memories yet (compaction off, or the distiller failed): "
            f"engram session distill --agent {mem.agent_id} --session {session}"
        )
    emit(as_json, res.to_json(), text)


@memory_app.command("write")
def memory_write(
    key_file: KeyFile,
    category: Annotated[
        str, typer.Option(help="COMMITMENT, PERFORMANCE, LEARNING, FAILURE, PREFERENCE, ANOMALY or CONTEXT.")
    ],
    content: Annotated[str, typer.Option(help="The observation to remember.")],
    tag: Annotated[list[str] | None, typer.Option(help="A tag (repeatable).")] = None,
    confidence: Annotated[int, typer.Option(help="0-100.")] = 70,
    session: Annotated[str | None, typer.Option(help="The session it belongs to.")] = None,
    tier: Annotated[
        str | None, typer.Option(help="HOT or WARM (COLD takes records and supersessions only).")
    ] = None,
    source_log: Annotated[
        list[int] | None, typer.Option(help="Provenance: a log index it comes from (repeatable).")
    ] = None,
    evidence: Annotated[str | None, typer.Option(help="Evidence for it.")] = None,
    scope: Annotated[
        str, typer.Option(help="global, project:<name> (only for that project) or user:<name>.")
    ] = "global",
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Write a memory (through the write gate: threats refused, secrets redacted)."""
    from engram.protocol.scopes import scope_tag

    stag = scope_tag(scope)
    r = agent_memory(key_file, server, log_key).write(
        category=category,
        content=content,
        tags=[*(tag or []), *([stag] if stag else [])],
        confidence=confidence,
        session=session,
        tier=tier,
        evidence=evidence,
        provenance=[{"source_type": "log", "source_ref": str(i)} for i in source_log or []],
    )
    if not r.duplicate:
        text = f"written as ref {r.ref} at index {r.index}"
    else:
        text = f"written at index {r.index}: a duplicate, it confirmed ref {r.ref}"
    emit(as_json, r.to_json(), text + _redacted(r.redacted))


@memory_app.command("supersede")
def memory_supersede(
    key_file: KeyFile,
    ref: Annotated[str, typer.Option(help="The item to correct, <index>.<n>.")],
    content: Annotated[str, typer.Option(help="The corrected text.")],
    reason: Annotated[str, typer.Option(help="Why.")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Correct a memory or record (append-only; the way COLD changes)."""
    r = agent_memory(key_file, server, log_key).supersede(ref, content=content, reason=reason)
    emit(as_json, {**r.to_json(), "superseded": ref}, f"{ref} superseded by {r.index}.0")


@memory_app.command("exempt")
def memory_exempt(
    key_file: KeyFile,
    ref: Annotated[str, typer.Option(help="The item, <index>.<n>.")],
    reason: Annotated[str, typer.Option(help="Why it must not decay.")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Exempt a memory from decay."""
    r = agent_memory(key_file, server, log_key).exempt(ref, reason=reason)
    emit(
        as_json,
        {"index": r.index, "ref": ref, "redacted": r.redacted},
        f"{ref} exempt from decay (index {r.index}){_redacted(r.redacted)}",
    )


@memory_app.command("erase")
def memory_erase(
    key_file: KeyFile,
    index: Annotated[int, typer.Option(help="The log index whose body to erase.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the log).")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Erase a body and its salt (right to be forgotten); the leaf and all proofs stay valid.
    When an erased memory was the current value of a fact that changed, it says which value
    is current now (an earlier one, or none)."""
    am = agent_memory(key_file, server, log_key)
    plan = am.erasure_plan(index)
    rec = am.erase(index, reason=reason)
    also = f" and of entries {', '.join(map(str, plan.also))}" if plan.also else ""
    what = (
        f"{len(plan.refs)} items"
        if plan.session is None
        else f"the title or summary of session {plan.session}"
    )
    lines = [
        f"body of entry {index}{also} erased ({what}); the erasure is entry {rec.index}{_redacted(rec.redacted)}"
    ]
    for c in rec.current:
        if c.current is None:
            lines.append(f"{c.erased} was the current value of a fact that changed; no earlier value is left")
        else:
            lines.append(
                f"{c.erased} was the current value of a fact that changed; {c.current} is current again"
            )
    emit(
        as_json,
        {
            "erased": index,
            "also": list(plan.also),
            "items": len(plan.refs),
            "session": plan.session,
            "index": rec.index,
            "current": [c.to_json() for c in rec.current],
            "redacted": rec.redacted,
        },
        "\n".join(lines),
    )


@memory_app.command("recall")
def memory_recall(
    agent: Annotated[
        str | None, typer.Option(help="Agent id (embedded log; with --server the key file's agent).")
    ] = None,
    query: Annotated[str, typer.Argument(help="What to recall.")] = "",
    include_cold: Annotated[bool, typer.Option("--include-cold", help="Search COLD too.")] = False,
    include_archived: Annotated[
        bool,
        typer.Option(
            "--include-archived", help="Rank archived (decayed) memories at full weight, not below live ones."
        ),
    ] = False,
    limit: Annotated[int, typer.Option(help="Most results after HOT (1-100).", min=1, max=100)] = 10,
    budget_tokens: Annotated[int | None, typer.Option(help="Token budget for the whole block.")] = None,
    session: Annotated[str | None, typer.Option(help="Use this session's frozen HOT block.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Results as JSON instead of the context block.")
    ] = False,
    no_record: Annotated[bool, typer.Option("--no-record", help="Do not log this recall as access.")] = False,
    key_file: Annotated[
        Path | None,
        typer.Option("--key-file", envvar="ENGRAM_KEY_FILE", help="With --server: the agent's key file."),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(help="Only this scope (repeatable): global, project:<name>, user:<name>; default: all."),
    ] = None,
    mesh: Annotated[
        list[str] | None,
        typer.Option(
            help="Only this Memory Mesh's shared memories (repeatable); default: every mesh joined."
        ),
    ] = None,
    no_mesh: Annotated[bool, typer.Option("--no-mesh", help="No memories shared by other agents.")] = False,
    server: Server = None,
    log_key: LogKey = None,
) -> None:
    """HOT first, then memories and raw session turns (records) ranked by rank fusion of
    facets, full text and embedding similarity, with the memories other agents share through
    a Memory Mesh labelled by author and mesh; prints a <memory-context> block."""
    opts: dict[str, Any] = {
        "include_cold": include_cold,
        "include_archived": include_archived,
        "limit": limit,
        "budget_tokens": budget_tokens,
        "session": session,
        "scopes": scope,
        "meshes": [] if no_mesh else mesh,
    }
    if server:
        if key_file is None:
            raise MalformedError(
                "recall over HTTP is signed by the agent: give --key-file (or ENGRAM_KEY_FILE)"
            )
        mem_r = agent_memory(key_file, server, log_key)
        if agent is not None and agent != mem_r.agent_id:
            raise MalformedError(f"--agent {agent} is not the key file's agent {mem_r.agent_id}")
        got = mem_r.recall(query, **opts)
        if as_json:  # results (one shape with MCP); hot and ranked kept for one release
            out.print_json(json.dumps({**got.to_json(), **got.results_json()}))
        else:
            sys.stdout.write(got.context)
        return
    if agent is None:
        raise MalformedError("give --agent (or --server with --key-file)")
    ledger, mem = memory_from_env()
    require_agent(ledger, agent)
    res = mem.recall(agent, query, record_access=not no_record, **opts)
    if as_json:  # results (one shape with MCP); the old keys (hot, ranked, ...) for one release
        out.print_json(json.dumps({**dataclasses.asdict(res), **res.answer().results_json()}))
    else:
        sys.stdout.write(res.render())


@memory_app.command("show")
def memory_show(
    agent: Annotated[str, typer.Option(help="Agent id.")],
    tier: Annotated[str | None, typer.Option(help="HOT, WARM or COLD.")] = None,
    ref: Annotated[str | None, typer.Option(help="One item, with provenance and tier history.")] = None,
    all_items: Annotated[
        bool, typer.Option("--all", help="Include superseded, archived and erased items.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Show an agent's memory by tier, or one item in full."""
    from rich.table import Table

    ledger, mem = memory_from_env()
    require_agent(ledger, agent)
    mem.sync()
    if ref is not None:
        it = mem.projection.item(agent, ref)
        if it is None:
            raise MalformedError(f"{agent} has no item {ref}", check="memory.ref")
        import dataclasses

        out.print_json(
            json.dumps({**dataclasses.asdict(it), "verify": f"engram log prove --index {it.index}"})
        )
        return
    items = mem.projection.items(
        agent, tiers=[tier] if tier else None, status=None if all_items else "active"
    )
    if as_json:
        out.print_json(json.dumps([dataclasses.asdict(i) for i in items]))
        return
    table = Table(title=f"memory of {agent} (log size {mem.projection.applied_size()})")
    for col in ("ref", "tier", "status", "category", "conf", "confirm", "used", "content"):
        table.add_column(col)
    for it in items:
        table.add_row(
            it.ref,
            it.tier,
            it.status,
            it.category,
            str(it.confidence),
            str(it.confirmations),
            str(it.access_count),
            escape(it.content[:90]),
        )
    out.print(table)


@memory_app.command("compact")
def memory_compact(
    agent: Annotated[str, typer.Option(help="Agent id.")],
    plan_days: Annotated[
        int | None,
        typer.Option(help="Only show what the rules would decide this many days from now (appends nothing)."),
    ] = None,
) -> None:
    """Apply the time-based rules now: inactive preferences, WARM->COLD promotion, decay."""
    ledger, mem = memory_from_env()
    require_agent(ledger, agent)
    if plan_days is not None:
        for d in mem.plan(agent, ledger.clock() + plan_days * 86_400_000_000):
            out.print(f"would append {d.kind}: {json.dumps(d.body, sort_keys=True)}")
        return
    receipts = mem.compact(agent)
    out.print(f"{len(receipts)} policy decisions appended")


@memory_app.command("rebuild")
def memory_rebuild() -> None:
    """Drop the memory projections and replay the whole log (re-embedding every item, with a
    progress bar); prints the projection digest."""
    _, mem = memory_from_env()
    before = mem.digest()
    with progress_bar("rebuilding (log entries read and replayed, then embedded)") as tick:
        size, digest = mem.rebuild(progress=tick)
    out.print(f"replayed {size} entries; projection digest {digest}")
    out.print(
        "matches the incremental projection" if before == (size, digest) else f"incremental was {before[1]}"
    )


@memory_app.command("import")
def memory_import(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="claude-code, codex, hermes or mem0.")],
    source: Annotated[
        Path, typer.Argument(help="The harness's memory directory (mem0: the JSON of get_all).")
    ],
    key_file: KeyFile,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check and report; sign nothing.")] = False,
    scope: Annotated[
        str | None,
        typer.Option(
            help="Scope every entry: global, project:<name> or user:<name> (default: a Claude Code project "
            "directory is its project, anything else global)."
        ),
    ] = None,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Import a harness's memories as signed memories of the agent, each with its source (file
    and line or id, and the file's SHA-256). Idempotent: a second run writes only what is new;
    entries the write gate refuses are reported with the reason and not written."""
    from engram.harness.transfer import import_source

    mem = agent_memory(key_file, server, log_key)
    with progress_bar(f"importing {fmt} memories") as tick:  # issue 26: one line at the end was all
        report = import_source(mem, fmt, source, dry_run=dry_run, scope=scope, progress=tick)
    data = report.to_json()
    if as_json:
        out.print_json(json.dumps(data, sort_keys=True))
        return
    verb = "would write" if dry_run else "wrote"
    out.print(
        f"{fmt} {escape(str(source))}: {data['entries']} entries; {verb} {data['written']}, "
        f"{data['already_imported']} already imported, {len(data['refused'])} refused; "
        f"{data['redacted']} secret{'' if data['redacted'] == 1 else 's'} redacted"
    )
    for r in report.refused:
        out.print(f"  refused {escape(r['source'])}: {escape(r['reason'])}")


@memory_app.command("export")
def memory_export(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="claude-code, codex, hermes or mem0.")],
    target: Annotated[Path, typer.Argument(help="Directory to write (mem0: a .json file or a directory).")],
    key_file: KeyFile,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Write the agent's active memories in a harness's format, for that harness to read."""
    from engram.harness.transfer import export_memories

    files, n, left_out = export_memories(agent_memory(key_file, server, log_key), fmt, target)
    data = {"format": fmt, "memories": n, "left_out": left_out, "files": [str(f) for f in files]}
    note = f" ({left_out} did not fit the format's size limits)" if left_out else ""
    emit(as_json, data, f"exported {n} memories as {fmt} to {escape(str(target))}{note}")


@memory_app.command("distill-report")
def memory_distill_report(
    agent: Annotated[str | None, typer.Option(help="One agent (default: every agent).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Rows and totals as JSON.")] = False,
) -> None:
    """What the distiller kept and cost, from the figures each memory.distilled entry recorded:
    turns kept and dropped, memories, input and output tokens, latency."""
    from rich.table import Table

    from ledger.memory.report import summarize

    ledger, mem = memory_from_env()
    if agent is not None:
        require_agent(ledger, agent)
    rows = mem.distill_report(agent)
    totals = summarize(rows)
    if as_json:
        out.print_json(
            json.dumps({"sessions": [dataclasses.asdict(r) for r in rows], "totals": totals}, sort_keys=True)
        )
        return
    table = Table(title="distilled sessions")
    for col in (
        "agent",
        "index",
        "session",
        "distiller",
        "turns",
        "kept",
        "dropped",
        "memories",
        "tokens in/out",
        "ms",
    ):
        table.add_column(col)
    for r in rows:
        st = r.stats
        table.add_row(
            escape(r.agent),
            str(r.index),
            escape(r.session or "(erased)"),
            escape(r.distiller or "-"),
            *((str(st["turns"]), str(st["turns_kept"]), str(st["turns_dropped"])) if st else ("-", "-", "-")),
            str(r.entries),
            f"{st['input_tokens']}/{st['output_tokens']}{'' if st['tokens'] == 'reported' else ' (est.)'}"
            if st
            else "-",
            f"{st['latency_us'] / 1000:.1f}" if st else "-",
        )
    out.print(table)
    out.print(
        f"{totals['sessions']} sessions ({totals['without_stats']} without figures, {totals['empty_sessions']} "
        f"yielded nothing): kept {totals['turns_kept']} of {totals['turns']} turns ({100 * totals['kept_share']:.1f}%), "
        f"{totals['entries']} memories ({totals['entries_per_turn']:.2f} per turn), tokens in "
        f"{totals['input_tokens']} / out {totals['output_tokens']}, latency p50 {totals['latency_ms_p50']} ms, "
        f"p95 {totals['latency_ms_p95']} ms"
    )


@memory_app.command("digest")
def memory_digest() -> None:
    """Print the projection digest at the current log size (compare two replays)."""
    _, mem = memory_from_env()
    size, digest = mem.digest()
    out.print(f"size {size} digest {digest}")
