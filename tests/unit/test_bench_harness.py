"""The benchmark harness's report logic (bench/report.py, bench/plan.py), without measuring.

A target is a ratio of figures of one run against a bound; the smoke run fails exactly when
a planned figure is missing or not finite, or a section failed. These are the harness's own
rules: if they break, ``python -m bench --smoke`` would pass on a run that lost a figure, or
docs/performance.md would call a missed target met.
"""

from __future__ import annotations

import json
import math

import pytest

from bench.plan import (
    SECTIONS,
    Config,
    expected_keys,
    planned_targets,
    select_sections,
    size_tag,
    sizes_for,
    targets,
)
from bench.report import Figure, Report, SectionRun, Target, evaluate, fmt_value, smoke_problems


def fig(key: str, value: float | None, unit: str = "events/s", reason: str = "") -> Figure:
    return Figure(key=key, label=key, value=value, unit=unit, reason=reason)


def figures(**values: float | None) -> dict[str, Figure]:
    return {k.replace("__", "."): fig(k.replace("__", "."), v) for k, v in values.items()}


RATIO = Target(key="t", label="ingest", figure="ingest", reference="verify", bound=0.5, text=">= 0.5x")


# -- targets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ingest", "verify", "ratio", "met"),
    [
        (9_000.0, 16_000.0, 0.5625, True),
        (8_000.0, 16_000.0, 0.5, True),  # the bound itself is met
        (7_999.0, 16_000.0, 7_999 / 16_000, False),
        (500.0, 16_000.0, 500 / 16_000, False),
    ],
)
def test_a_ratio_target_is_met_or_missed_from_the_two_figures(
    ingest: float, verify: float, ratio: float, met: bool
) -> None:
    o = evaluate(RATIO, figures(ingest=ingest, verify=verify))
    assert o.ratio == pytest.approx(ratio)
    assert o.met is met
    assert o.verdict == ("met" if met else "MISSED")


def test_only_the_ratio_decides_not_the_machine_speed() -> None:
    """Twice as fast a machine (both figures doubled) gives the same verdict."""
    slow = evaluate(RATIO, figures(ingest=6_000.0, verify=16_000.0))
    fast = evaluate(RATIO, figures(ingest=12_000.0, verify=32_000.0))
    assert slow.ratio == pytest.approx(fast.ratio)
    assert slow.met is fast.met is False


@pytest.mark.parametrize(("p50", "met"), [(4.9, True), (5.0, True), (5.1, False), (50.0, False)])
def test_an_upper_bound_stated_as_a_constant(p50: float, met: bool) -> None:
    t = Target(key="p50", label="p50", figure="p50", reference=None, scale=5.0, op="<=", bound=1.0)
    o = evaluate(t, {"p50": fig("p50", p50, "ms")})
    assert o.ratio == pytest.approx(p50 / 5.0)
    assert o.met is met
    assert t.absolute


def test_scale_multiplies_the_reference_per_core_used() -> None:
    t = Target(key="r", label="replay", figure="replay", reference="verify", scale=2.0, bound=0.8)
    o = evaluate(t, figures(replay=24_000.0, verify=16_000.0))  # 2 cores: 24k / 32k
    assert o.ratio == pytest.approx(0.75)
    assert o.met is False


@pytest.mark.parametrize(
    "present",
    [
        {},  # neither figure measured
        {"ingest": 9_000.0},  # the reference missing
        {"verify": 16_000.0},  # the figure missing
        {"ingest": math.nan, "verify": 16_000.0},
        {"ingest": 9_000.0, "verify": math.inf},
        {"ingest": None, "verify": 16_000.0},
        {"ingest": 9_000.0, "verify": 0.0},
    ],
)
def test_a_target_without_both_finite_figures_is_never_met(present: dict[str, float | None]) -> None:
    o = evaluate(RATIO, figures(**present))
    assert o.met is None
    assert o.ratio is None
    assert o.reason
    assert o.verdict == "not evaluated"


def test_a_comparison_has_a_ratio_but_no_verdict() -> None:
    t = Target(key="c", label="vs peer", figure="ingest", reference="verify", bound=None)
    o = evaluate(t, figures(ingest=1.0, verify=4.0))
    assert o.ratio == pytest.approx(0.25)
    assert o.met is None


def test_a_target_rejects_an_unknown_comparison() -> None:
    with pytest.raises(ValueError, match="op"):
        Target(key="x", label="x", figure="a", reference="b", bound=1.0, op=">")


# -- the smoke check -------------------------------------------------------------------------


def report(*figs: Figure, expected: list[str], error: str = "") -> Report:
    r = Report(meta={"mode": "smoke"}, expected=expected, targets=[RATIO])
    r.figures = list(figs)
    r.sections = [SectionRun(name="s", seconds=1.0, peak_rss_mib=50.0, error=error)]
    return r


def test_smoke_passes_when_every_planned_figure_is_finite() -> None:
    r = report(fig("ingest", 1.0), fig("verify", 2.0), expected=["ingest", "verify"])
    assert smoke_problems(r) == []


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -math.inf])
def test_smoke_fails_on_a_figure_without_a_finite_value(bad: float | None) -> None:
    r = report(
        fig("ingest", bad, reason="peer not installed"), fig("verify", 2.0), expected=["ingest", "verify"]
    )
    assert smoke_problems(r) == ["figure ingest missing: peer not installed"]


def test_smoke_fails_on_a_planned_figure_never_produced() -> None:
    r = report(fig("verify", 2.0), expected=["ingest", "verify"])
    assert smoke_problems(r) == ["figure ingest missing"]
    assert r.missing() == ["ingest"]


def test_smoke_fails_on_a_failed_section_and_a_duplicate_key() -> None:
    r = report(fig("verify", 2.0), fig("verify", 3.0), expected=["verify"], error="RuntimeError: boom")
    problems = smoke_problems(r)
    assert "section s failed: RuntimeError: boom" in problems
    assert "figure verify reported twice" in problems


def test_an_unplanned_extra_figure_is_not_a_problem() -> None:
    r = report(fig("ingest", 1.0), fig("extra", 2.0), expected=["ingest"])
    assert smoke_problems(r) == []


def test_the_json_report_carries_ratios_verdicts_and_no_nan() -> None:
    r = report(fig("ingest", 9_000.0), fig("verify", math.nan), expected=["ingest", "verify"])
    doc = json.loads(json.dumps(r.to_json(), allow_nan=False))  # NaN would not serialise
    (t,) = doc["targets"]
    assert t["verdict"] == "not evaluated"
    assert t["ratio"] is None
    assert doc["missing"] == ["verify"]
    assert [f["value"] for f in doc["figures"]] == [9_000.0, None]
    ok = report(fig("ingest", 9_000.0), fig("verify", 16_000.0), expected=["ingest", "verify"]).to_json()
    assert ok["targets"][0]["met"] is True
    assert ok["summary"]["targets_met"] == 1


def test_tables_show_the_verdict_and_markdown_escapes_pipes() -> None:
    r = report(fig("ingest", 7_000.0), fig("verify", 16_000.0), expected=["ingest", "verify"])
    assert "MISSED" in r.table()
    r.figures.append(Figure(key="p", label="a | b", value=1.0, unit="ms"))
    md = r.markdown()
    assert "a \\| b" in md
    assert "| ingest | >= 0.5x |" in md


@pytest.mark.parametrize(
    ("value", "text"),
    [(16_949.3, "16,949"), (100.0, "100"), (4.123, "4.12"), (0.04361, "0.0436"), (None, "-")],
)
def test_fmt_value(value: float | None, text: str) -> None:
    assert fmt_value(value) == text


# -- the plan --------------------------------------------------------------------------------


def config(mode: str, pg: bool = True) -> Config:
    return Config(mode=mode, sizes=sizes_for(mode), pg_url="postgresql://x/y" if pg else None, workdir="/tmp")


@pytest.mark.parametrize(
    ("n", "tag"), [(10_000, "1e4"), (10**7, "1e7"), (2_000, "2000"), (300, "300"), (1, "1")]
)
def test_size_tag(n: int, tag: str) -> None:
    assert size_tag(n) == tag


@pytest.mark.parametrize("mode", ["smoke", "default", "long"])
def test_every_target_names_figures_the_full_plan_measures(mode: str) -> None:
    """A target whose figure no section produces could never be evaluated."""
    cfg = config(mode)
    keys = expected_keys(cfg, select_sections(None, pg=True))
    assert len(keys) == len(set(keys)), "a figure key is planned twice"
    planned, skipped = planned_targets(targets(cfg), keys)
    assert skipped == []
    assert {t.key for t in planned} >= {
        "ingest.inproc.sqlite.c64",
        "ingest.http.postgresql.c64",
        "proofs.vs_pymerkle",
        "replay.verify",
        "rebuild.inprocess",
    }


def test_smoke_plans_the_same_figures_as_the_default_run_at_other_sizes() -> None:
    """Same code paths: every default figure has a smoke twin (sizes differ in the key only)."""

    def shape(k: str) -> str:
        return ".".join("N" if p.isdigit() or p.startswith("1e") else p for p in k.split("."))

    smoke = {shape(k) for k in expected_keys(config("smoke"), select_sections(None, pg=True))}
    full = {shape(k) for k in expected_keys(config("default"), select_sections(None, pg=True))}
    assert smoke == full


def test_without_postgresql_its_sections_and_targets_drop_out() -> None:
    cfg = config("default", pg=False)
    sections = select_sections(None, pg=False)
    assert all(not s.needs_pg for s in sections)
    keys = expected_keys(cfg, sections)
    assert not [k for k in keys if "postgresql" in k]
    planned, skipped = planned_targets(targets(cfg), keys)
    assert "ingest.inproc.postgresql.c64" in {t.key for t in skipped}
    assert all("postgresql" not in t.figure for t in planned)


def test_only_selects_groups_and_always_keeps_limits() -> None:
    names = [s.name for s in select_sections(["proofs"], pg=True)]
    assert names == ["limits", "proofs-sqlite", "proofs-postgresql"]
    with pytest.raises(ValueError, match="unknown"):
        select_sections(["proof"], pg=True)


def test_long_mode_goes_to_ten_million_on_postgresql_only() -> None:
    assert max(sizes_for("long").pg_proof_sizes) == 10**7
    assert max(sizes_for("long").proof_sizes) < 10**7
    assert max(sizes_for("default").pg_proof_sizes) < 10**7
    assert sizes_for("default", proof_sizes=(100, 1000)).proof_sizes == (100, 1000)
    with pytest.raises(ValueError, match="mode"):
        sizes_for("huge")


def test_every_section_function_exists() -> None:
    """Each section names a module function (imported only by name, in a child process)."""
    import importlib.util

    for s in SECTIONS:
        module, _, func = s.func.partition(":")
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        with open(spec.origin, encoding="utf-8") as f:
            assert f"def {func}(cfg: Config, out: list[Figure]" in f.read(), s.func
