"""CI stops when any of its steps fails, the README's test line included.

A failing command inside an ``&&`` list does not stop a ``set -e`` script (only the list's
last command does): when ``install-interop.sh`` failed on a busy package manager, CI skipped
pytest, ran lint and the benchmarks, and exited 0 (issue 40, finding 12). These tests run the
real ``.ci/run`` and ``.ci/apt-wait.sh`` against stub commands.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _fake_checkout(tmp_path: Path, interop_exit: int, failing: str = "") -> tuple[Path, Path, dict[str, str]]:
    """A checkout holding the real .ci/run, a stub install-interop.sh exiting with
    ``interop_exit``, and a ``python3`` whose ``-m venv`` makes a .venv of stubs that record
    what ran in ``ran/`` (the tool named ``failing`` exits 7 after recording)."""
    repo, bin_dir, ran = tmp_path / "repo", tmp_path / "bin", tmp_path / "ran"
    (repo / ".ci").mkdir(parents=True)
    bin_dir.mkdir()
    ran.mkdir()
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    _stub(repo / ".ci" / "install-interop.sh", f"touch {ran}/install-interop; exit {interop_exit}")
    venv_tools = " ".join(["pip", "pytest", "ruff", "mypy", "python"])
    _stub(
        bin_dir / "python3",
        f"""if [ "$1 $2" = "-m compileall" ]; then touch {ran}/compileall; exit 0; fi
[ "$1 $2" = "-m venv" ] || exit 90
mkdir -p "$3/bin"
for t in {venv_tools}; do
  printf '#!/usr/bin/env bash\\necho "$t $*" >> {ran}/venv-tools\\ntouch {ran}/%s\\n' "$t" > "$3/bin/$t"
  [ "$t" != "{failing}" ] || echo 'exit 7' >> "$3/bin/$t"
  chmod +x "$3/bin/$t"
done""",
    )
    _stub(bin_dir / "pg_isready", "exit 0")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "CI": "true"}
    return repo, ran, env


def test_ci_stops_when_the_install_step_of_the_readme_line_fails(tmp_path: Path) -> None:
    repo, ran, env = _fake_checkout(tmp_path, interop_exit=3)
    out = subprocess.run(
        ["bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60
    )
    assert (ran / "install-interop").exists(), out.stderr
    assert out.returncode != 0, "CI went on after the interop install failed"
    # Nothing after the failed step ran: not pytest, not lint, not the benchmarks.
    assert not (ran / "pytest").exists()
    assert not (ran / "ruff").exists()
    assert not (ran / "python").exists()


def test_ci_runs_every_step_when_they_pass(tmp_path: Path) -> None:
    """The stubs are faithful: with every step passing, the same script reaches pytest, lint
    and the benchmark smoke runs (so the test above fails for the right reason)."""
    repo, ran, env = _fake_checkout(tmp_path, interop_exit=0)
    out = subprocess.run(
        ["bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert {p.name for p in ran.iterdir()} >= {
        "compileall",
        "install-interop",
        "pytest",
        "ruff",
        "mypy",
        "python",
    }


def test_ci_stops_at_a_failing_timed_step_and_says_which_steps_finished(tmp_path: Path) -> None:
    """The steps after the README line run through .ci/run's timing wrapper: a failing one
    still ends the run with its status (nothing after it runs), it is not reported as done,
    and the summary names the time of each step that finished."""
    repo, ran, env = _fake_checkout(tmp_path, interop_exit=0, failing="mypy")
    out = subprocess.run(
        ["bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 7, out.stdout + out.stderr
    assert (ran / "mypy").exists() and (ran / "ruff").exists()
    assert not (ran / "python").exists(), "a benchmark ran after mypy failed"
    assert "[ci] ruff check: " in out.stderr and "[ci] ruff format --check: " in out.stderr
    assert "[ci] mypy: " not in out.stderr, out.stderr
    assert "[ci] step times (wall):" in out.stderr and "exit status 7" in out.stderr, out.stderr


def test_ci_times_every_step_when_they_pass(tmp_path: Path) -> None:
    repo, _, env = _fake_checkout(tmp_path, interop_exit=0)
    out = subprocess.run(
        ["bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    timed = [ln for ln in out.stderr.splitlines() if ln.startswith("[ci] ") and " s  " in ln]
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert len(timed) == run.count("\nstep ") + run.count("\ndone_step "), out.stderr
    assert "exit status 0" in out.stderr


def _apt_wait(tmp_path: Path, failures: int, wait_s: int) -> subprocess.CompletedProcess[str]:
    bin_dir, count = tmp_path / "bin", tmp_path / "attempts"
    bin_dir.mkdir()
    count.write_text("0")
    _stub(
        bin_dir / "apt-get",
        f"""n=$(( $(cat {count}) + 1 )); echo $n > {count}
[ "$n" -gt {failures} ] || {{ echo "E: Could not get lock /var/lib/apt/lists/lock" >&2; exit 100; }}
echo "apt-get $*" """,
    )
    script = f"source {ROOT / '.ci' / 'apt-wait.sh'}; apt_with_wait update -qq"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "ENGRAM_APT_WAIT_S": str(wait_s),
        "ENGRAM_APT_RETRY_S": "0",
        "SUDO": "",
    }
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)


def test_the_interop_install_waits_for_a_busy_package_manager(tmp_path: Path) -> None:
    out = _apt_wait(tmp_path, failures=3, wait_s=30)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "attempts").read_text().strip() == "4"
    assert "-o DPkg::Lock::Timeout=30 update -qq" in out.stdout


def test_the_wait_for_the_package_manager_is_bounded(tmp_path: Path) -> None:
    out = _apt_wait(tmp_path, failures=10**6, wait_s=0)
    assert out.returncode == 1
    assert "still failing after 0s" in out.stderr


def _collect(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [ln for ln in out.stdout.splitlines() if "::" in ln]


def test_heavy_modules_start_first() -> None:
    """tests/conftest.py hands out the modules that build a shared fixture (test_demo_commands'
    one `engram demo` run) before the others, whatever order they were named in."""
    unit, demo = "tests/unit/test_jcs.py", "tests/e2e/test_demo_commands.py"
    ids = _collect(unit, demo)
    first_unit = next(i for i, n in enumerate(ids) if n.startswith(unit))
    assert ids[:first_unit] and all(n.startswith(demo) for n in ids[:first_unit]), ids[:5]
    assert not any(n.startswith(demo) for n in ids[first_unit:])


def test_a_module_fixture_is_built_once_by_the_parallel_run(tmp_path: Path) -> None:
    """CI's `pytest -n auto` runs with pyproject's options (--dist loadfile): the tests of a
    module run on one worker, so a module-scoped fixture (a client venv, a demo run) is built
    once. Under xdist's default (--dist load) a module's tests were spread over the workers,
    and each built its own. (xdist_group marks would not do: with pytest 9.2 and xdist 3.8,
    --dist loadgroup ignores them.)"""
    built = tmp_path / "built"
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import os, time\nimport pytest\n\n"
        "@pytest.fixture(scope='module')\ndef shared():\n"
        f"    with open({str(built)!r}, 'a') as f:\n        f.write(str(os.getpid()) + '\\n')\n\n"
        "@pytest.mark.parametrize('i', range(8))\ndef test_uses_it(shared, i):\n    time.sleep(0.05)\n",
        encoding="utf-8",
    )
    argv = [
        "-c",
        str(ROOT / "pyproject.toml"),
        "--rootdir",
        str(tmp_path),
        "-n",
        "2",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", *argv, str(probe)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "8 passed" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    assert len(built.read_text(encoding="utf-8").split()) == 1, built.read_text(encoding="utf-8")
