"""``engram mesh``: Memory Meshes (issue 30, ledger.mesh). Each command signs one event in
the agent's own streams, on the embedded log or (``--server``) on an Engram service; the
log enforces who may do what and refuses the rest with the rule's check name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from engram.cli.common import AsJson, KeyFile, LogKey, Server, agent_memory, emit, out
from engram.protocol.errors import MalformedError
from engram.protocol.files import write_file
from engram.protocol.schemas import CATEGORIES

mesh_app = typer.Typer(
    rich_markup_mode=None,
    help="Memory Mesh: share chosen WARM categories with other agents, provably.",
    no_args_is_help=True,
)

MeshId = Annotated[str, typer.Option("--mesh", help="The mesh id, <creator>/<name>.")]
Categories = Annotated[
    str, typer.Option(help=f"Comma-separated WARM categories ({', '.join(CATEGORIES)}); empty for none.")
]


def _categories(value: str) -> list[str]:
    cats = [c.strip().upper() for c in value.split(",") if c.strip()]
    unknown = [c for c in cats if c not in CATEGORIES]
    if unknown:
        raise MalformedError(f"unknown categories {', '.join(unknown)} (known: {', '.join(CATEGORIES)})")
    return cats


@mesh_app.command("create")
def mesh_create(
    key_file: KeyFile,
    name: Annotated[str, typer.Option(help="The mesh's name; its id is <this agent>/<name>.")],
    title: Annotated[str | None, typer.Option(help="A title.")] = None,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Create a mesh; this agent is its first member and administers it."""
    mesh = agent_memory(key_file, server, log_key).mesh_create(name, title=title)
    emit(as_json, {"mesh": mesh}, mesh)


@mesh_app.command("invite")
def mesh_invite(
    key_file: KeyFile,
    mesh: MeshId,
    agent: Annotated[str, typer.Option(help="The agent to invite.")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Invite an agent (the creator only)."""
    r = agent_memory(key_file, server, log_key).mesh_invite(mesh, agent)
    emit(as_json, {**r.to_json(), "mesh": mesh, "agent": agent}, f"invited {agent} at index {r.index}")


@mesh_app.command("join")
def mesh_join(
    key_file: KeyFile, mesh: MeshId, server: Server = None, log_key: LogKey = None, as_json: AsJson = False
) -> None:
    """Join a mesh this agent was invited to (it shares nothing until it grants)."""
    r = agent_memory(key_file, server, log_key).mesh_join(mesh)
    emit(as_json, {**r.to_json(), "mesh": mesh}, f"joined {mesh} at index {r.index}")


@mesh_app.command("grant")
def mesh_grant(
    key_file: KeyFile,
    mesh: MeshId,
    share: Categories,
    read: Categories,
    backfill: Annotated[
        bool, typer.Option(help="Also share this agent's memories older than the grant.")
    ] = False,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Set this agent's grant: the WARM categories it shares and reads (replaces the last;
    a category left out stops flowing from the next recall)."""
    r = agent_memory(key_file, server, log_key).mesh_grant(
        mesh, share=_categories(share), read=_categories(read), backfill=backfill
    )
    emit(as_json, {**r.to_json(), "mesh": mesh}, f"granted at index {r.index}")


@mesh_app.command("leave")
def mesh_leave(
    key_file: KeyFile, mesh: MeshId, server: Server = None, log_key: LogKey = None, as_json: AsJson = False
) -> None:
    """Leave a mesh: nothing flows either way from the next recall."""
    r = agent_memory(key_file, server, log_key).mesh_leave(mesh)
    emit(as_json, {**r.to_json(), "mesh": mesh}, f"left {mesh} at index {r.index}")


@mesh_app.command("remove")
def mesh_remove(
    key_file: KeyFile,
    mesh: MeshId,
    agent: Annotated[str, typer.Option(help="The member to remove (never the creator).")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Remove a member (the creator only): nothing flows to or from it from the next recall;
    it may join again only if invited again."""
    r = agent_memory(key_file, server, log_key).mesh_remove(mesh, agent)
    emit(
        as_json,
        {**r.to_json(), "mesh": mesh, "agent": agent},
        f"removed {agent} from {mesh} at index {r.index}",
    )


@mesh_app.command("dissolve")
def mesh_dissolve(
    key_file: KeyFile, mesh: MeshId, server: Server = None, log_key: LogKey = None, as_json: AsJson = False
) -> None:
    """Dissolve a mesh (the creator only): nothing flows in it from the next recall, and
    nothing can happen in it afterwards (the log keeps its history)."""
    r = agent_memory(key_file, server, log_key).mesh_dissolve(mesh)
    emit(as_json, {**r.to_json(), "mesh": mesh}, f"dissolved {mesh} at index {r.index}")


@mesh_app.command("show")
def mesh_show(
    key_file: KeyFile, server: Server = None, log_key: LogKey = None, as_json: AsJson = False
) -> None:
    """The meshes this agent is a member of: creator, members, each member's grant."""
    meshes = agent_memory(key_file, server, log_key).meshes()
    if as_json:
        out.print_json(json.dumps({"meshes": [m.to_json() for m in meshes]}))
        return
    if not meshes:
        out.print("not a member of any mesh")
    for m in meshes:
        out.print(f"{m.mesh}  created by {m.creator} at index {m.created_index}")
        for member in m.members:
            grant = member.grant
            what = "no grant" if grant is None else f"shares {grant.share or '-'}, reads {grant.read or '-'}"
            left = "" if member.left_index is None else f" (left at {member.left_index})"
            out.print(f"  {member.agent}: {what}{left}", markup=False)


@mesh_app.command("prove")
def mesh_prove(
    key_file: KeyFile,
    mesh: MeshId,
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the bundle (JSON).")],
    ref: Annotated[
        str | None, typer.Option(help="The shared memory, <index>.<n>, as recall showed it.")
    ] = None,
    query: Annotated[
        str | None, typer.Option(help="Or: prove the first memory of MESH that recall finds for this query.")
    ] = None,
    server: Server = None,
    log_key: LogKey = None,
) -> None:
    """Write a bundle proving, offline, that a memory was written by its author and shared
    with this agent through MESH under grants valid at the checkpoint. Check it with
    ``engram-verify bundle FILE --log-key KEY``."""
    if (ref is None) == (query is None):
        raise MalformedError("give --ref or --query (one of them)", check="cli.args")
    am = agent_memory(key_file, server, log_key)
    if query is not None:
        found = [r for r in am.recall(query, meshes=[mesh]).ranked if r.author is not None and r.ref]
        if not found:
            raise MalformedError(
                f"recall finds no memory of mesh {mesh} for {query!r}", check="mesh.not_shared"
            )
        ref = found[0].ref
    assert ref is not None
    data = am.mesh_proof(mesh, ref)
    write_file(output, data)  # never through a symlink planted at the path (as bundle create)
    out.print(f"wrote {output}: memory {ref} shared through {mesh} ({len(data)} bytes)")
