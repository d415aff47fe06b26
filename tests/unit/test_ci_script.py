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
