"""Run inside Hermes Agent's own environment (.venv-hermes): Hermes' discovery loads the
provider from $HERMES_HOME/plugins/engram, and Hermes' MemoryManager drives it through two
chats, as ``hermes chat`` would around its model calls. Prints one JSON object."""

from __future__ import annotations

import json
import sys

from agent.memory_manager import MemoryManager
from plugins.memory import discover_memory_providers, load_memory_provider


def chat(session_id: str, turns: list[tuple[str, str]], query: str) -> dict[str, str]:
    provider = load_memory_provider("engram")
    if provider is None:
        raise SystemExit("Hermes did not load the engram memory provider")
    manager = MemoryManager()
    manager.add_provider(provider)
    manager.initialize_all(session_id=session_id)
    system = manager.build_system_prompt()
    recalled = manager.prefetch_all(query, session_id=session_id)
    messages = []
    for user, reply in turns:
        manager.sync_all(user, reply, session_id=session_id)
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    manager.flush_pending(timeout=60)
    manager.on_session_end(messages)
    manager.shutdown_all()
    return {"system": system, "prefetch": recalled, "tools": ",".join(sorted(manager.get_all_tool_names()))}


def main() -> None:
    found = {name: available for name, _, available in discover_memory_providers()}
    first = chat(
        "chat-1",
        [
            (
                "For this repo I always want tabs, never spaces, in Python files.",
                "Understood: tabs in Python files.",
            )
        ],
        "hello",
    )
    second = chat("chat-2", [], "Should I indent this Python file with tabs or spaces?")
    # issue 30: what another agent shares through a Memory Mesh comes back in the prefetch
    third = chat("chat-3", [], "What do Zorblax deploys need first?")
    # issue 40, finding 7: a 5,000-character query (a pasted traceback) is recalled for, not
    # refused, and a 40,000-character turn is logged
    frames = "".join(f'  File "/srv/zorblax/step_{i}.py", line {i}, in step_{i}\n' for i in range(200))
    long_query = ("What do Zorblax deploys need first? It fails like this:\n" + frames)[:5000]
    long_turn = ("Here is the whole deploy log:\n" + frames * 20)[:40_000]
    fourth = chat("chat-4", [(long_turn, "Noted.")], long_query)
    json.dump(
        {"discovered": found, "first": first, "second": second, "third": third, "fourth": fourth},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
