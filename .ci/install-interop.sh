#!/usr/bin/env bash
# Install the Go toolchain and the golang.org/x/mod sources (Debian packages)
# used by tests/interop to cross-check Engram's tlog-tiles export against the
# Go reference implementation (golang.org/x/mod/sumdb/tlog and sumdb/note), and
# Debian's chromium for the browser tests.
#
# Idempotent: does nothing when both are already present.
set -euo pipefail

XMOD_DIR=/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog

# Hermes Agent from the registry, pinned, in an environment of its own (its dependencies are
# pinned too), with Engram's client beside it: tests/interop/test_hermes_real.py drives it.
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
HERMES_VERSION=0.19.0
if ! "$ROOT/.venv-hermes/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('hermes-agent') != '$HERMES_VERSION')" 2>/dev/null; then
    echo "install-interop: installing hermes-agent==$HERMES_VERSION into .venv-hermes"
    python3 -m venv "$ROOT/.venv-hermes"
    "$ROOT/.venv-hermes/bin/pip" install -q "hermes-agent==$HERMES_VERSION" 2>&1 | grep -v '^WARNING: Location' || true
    "$ROOT/.venv-hermes/bin/python" -c "import agent.memory_manager, plugins.memory" || {
        echo "install-interop: ERROR: hermes-agent did not install" >&2
        exit 1
    }
fi
"$ROOT/.venv-hermes/bin/pip" install -q -e "$ROOT[client]" 2>&1 | grep -v '^WARNING: Location' || true
"$ROOT/.venv-hermes/bin/python" -c "import engram.harness.hermes" || {
    echo "install-interop: ERROR: engram[client] did not install into .venv-hermes" >&2
    exit 1
}

# The real Claude Code and Codex CLIs from the npm registry, pinned by package-lock.json
# (tests/interop/test_harnesses_real.py runs them against a fake model endpoint on loopback).
HARNESSES="$ROOT/tests/interop/harnesses"
if ! [ -x "$HARNESSES/node_modules/.bin/claude" ] || ! [ -x "$HARNESSES/node_modules/.bin/codex" ] \
        || ! cmp -s "$HARNESSES/package-lock.json" "$HARNESSES/node_modules/.package-lock.json.installed"; then
    echo "install-interop: npm ci of the Claude Code and Codex CLIs (tests/interop/harnesses)"
    (cd "$HARNESSES" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    cp "$HARNESSES/package-lock.json" "$HARNESSES/node_modules/.package-lock.json.installed"
fi
"$HARNESSES/node_modules/.bin/claude" --version >/dev/null && "$HARNESSES/node_modules/.bin/codex" --version >/dev/null || {
    echo "install-interop: ERROR: the Claude Code or Codex CLI does not run" >&2
    exit 1
}

# Debian's chromium, for the UI tests (Playwright drives it; nothing downloads a browser).
if command -v go >/dev/null 2>&1 && [ -d "$XMOD_DIR" ] && command -v chromium >/dev/null 2>&1; then
    echo "install-interop: go, golang.org/x/mod and chromium already installed; nothing to do"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-interop: ERROR: not root and sudo is unavailable;" \
             "install golang-go and golang-golang-x-mod-dev manually" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# Another process may hold the package manager's locks: wait for them, bounded (.ci/apt-wait.sh).
source "$ROOT/.ci/apt-wait.sh"
echo "install-interop: installing golang-go, golang-golang-x-mod-dev and chromium via apt-get"
if ! apt_with_wait update -qq; then
    echo "install-interop: ERROR: apt-get update failed" >&2
    exit 1
fi
if ! apt_with_wait install -y -qq --no-install-recommends \
        golang-go golang-golang-x-mod-dev chromium >/dev/null; then
    echo "install-interop: ERROR: apt-get install golang-go golang-golang-x-mod-dev chromium failed" >&2
    exit 1
fi
if ! command -v chromium >/dev/null 2>&1; then
    echo "install-interop: ERROR: 'chromium' is not on PATH after installation" >&2
    exit 1
fi

if ! command -v go >/dev/null 2>&1; then
    echo "install-interop: ERROR: 'go' is still not on PATH after installation" >&2
    exit 1
fi
if [ ! -d "$XMOD_DIR" ]; then
    echo "install-interop: ERROR: $XMOD_DIR is missing after installation" >&2
    exit 1
fi
echo "install-interop: OK ($(go version))"
