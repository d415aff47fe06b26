"""The top floor: the ``engram`` command and what only it may see.

The only code that sees both towers, the service (``ledger``, ``api``) and the client side
(``engram.client``, ``engram.harness``): the entry point (:mod:`engram.cli.entry`), the
typer app split by sub-app (:mod:`engram.cli.app` and its siblings), the demo
(:mod:`engram.cli.demo`) and the embedded opener (:mod:`engram.cli.local`), which is handed
to the MCP server, the hooks and the Hermes provider. Nothing below imports it
(tests/unit/test_house_imports.py). Importing this package loads nothing else, so the
entry point's fast paths stay fast.
"""
