"""Every documented setting is read, in one place, and takes effect: docs/configuration.md's
table, the settings fields and the environment variables the code reads are pinned to each
other (a documented knob nobody reads, or a variable nobody documents, fails here)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from api.settings import ApiSettings
from engram.protocol.errors import ConfigError
from ledger.compose import distiller, policy_config
from ledger.config import Settings
from ledger.memory.distill import ChatCompletionsDistiller, RuleBasedDistiller

ROOT = Path(__file__).resolve().parents[2]

#: Settings field -> the variable that sets it, and a value different from the default.
LEDGER_FIELDS: dict[str, tuple[str, str]] = {
    "home": ("ENGRAM_HOME", "/tmp/engram-settings-home"),
    "database_url": ("ENGRAM_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/x"),
    "log_key_file": ("ENGRAM_LOG_KEY_FILE", "/tmp/other-log.key"),
    "policy_key_file": ("ENGRAM_POLICY_KEY_FILE", "/tmp/other-policy.key"),
    "max_leaf_bytes": ("ENGRAM_MAX_LEAF_BYTES", "4096"),
    "max_body_bytes": ("ENGRAM_MAX_BODY_BYTES", "1000"),
    "hot_max_tokens": ("ENGRAM_HOT_MAX_TOKENS", "300"),
    "hot_max_items": ("ENGRAM_HOT_MAX_ITEMS", "3"),
    "inactive_preference_days": ("ENGRAM_INACTIVE_PREFERENCE_DAYS", "2"),
    "compact_on_session_end": ("ENGRAM_COMPACT_ON_SESSION_END", "0"),
    "distiller_url": ("ENGRAM_DISTILLER_URL", "http://127.0.0.1:9/v1"),
    "distiller_model": ("ENGRAM_DISTILLER_MODEL", "m"),
    "distiller_api_key": ("ENGRAM_DISTILLER_API_KEY", "k"),
    "embedder": ("ENGRAM_EMBEDDER", "off"),
    "embedder_url": ("ENGRAM_EMBEDDER_URL", "http://127.0.0.1:9/v1"),
    "embedder_model": ("ENGRAM_EMBEDDER_MODEL", "e5"),
    "embedder_api_key": ("ENGRAM_EMBEDDER_API_KEY", "k"),
    "embedder_dim": ("ENGRAM_EMBEDDER_DIM", "384"),
    "witness_policy": ("ENGRAM_WITNESS_POLICY", "/tmp/policy.txt"),
    "witness_timeout_s": ("ENGRAM_WITNESS_TIMEOUT_S", "9"),
    "signer_record": ("ENGRAM_SIGNER_RECORD", "/tmp/shared/log.signed-head"),
    "signer_record_before_commit": ("ENGRAM_SIGNER_RECORD_WRITE", "before-commit"),
    "sequencer": ("ENGRAM_SEQUENCER", "host"),
}
#: Read outside Settings/ApiSettings, by the component named.
OTHER = {"ENGRAM_VERIFIER_STATE": "verifier/state.py (SDK, buyer, engram-verify)"}


def _readme_variables() -> set[str]:
    readme = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows, "the configuration table has no rows"
    return {v for row in rows for v in re.findall(r"`(ENGRAM_[A-Z0-9_]+)`", row.split("|")[1])}


def _variables_in_code() -> set[str]:
    found: set[str] = set()
    for pkg in ("verifier", "engram", "ledger", "api"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and re.fullmatch(r"ENGRAM_[A-Z0-9_]+", node.value)
                ):
                    found.add(node.value)
    return found


def test_readme_table_and_code_name_the_same_variables() -> None:
    documented, read = _readme_variables(), _variables_in_code()
    assert documented == read, {
        "documented, never read": documented - read,
        "read, undocumented": read - documented,
    }


#: ApiSettings field -> the variable that sets it, and a value different from the default.
API_FIELDS: dict[str, tuple[str, str]] = {
    "operator_token": ("ENGRAM_OPERATOR_TOKEN", "Zq3xV8mTn2LpR6wYb1KdHs9FcJ4uAe7G"),
    "dev_mode": ("ENGRAM_DEV_MODE", "1"),
    "max_request_bytes": ("ENGRAM_MAX_REQUEST_BYTES", "2048"),
    "max_header_bytes": ("ENGRAM_MAX_HEADER_BYTES", "8192"),
    "max_headers": ("ENGRAM_MAX_HEADERS", "40"),
    "http_parser": ("ENGRAM_HTTP_PARSER", "h11"),
    "access_log": ("ENGRAM_ACCESS_LOG", "0"),
    "request_timeout_s": ("ENGRAM_REQUEST_TIMEOUT_S", "3"),
    "signature_window_s": ("ENGRAM_SIGNATURE_WINDOW_S", "60"),
    "rate_limit_per_minute": ("ENGRAM_RATE_LIMIT_PER_MINUTE", "7"),
    "rate_limit_burst": ("ENGRAM_RATE_LIMIT_BURST", "8"),
    "rate_limit_per_client_per_minute": ("ENGRAM_RATE_LIMIT_PER_CLIENT_PER_MINUTE", "9"),
    "rate_limit_per_client_burst": ("ENGRAM_RATE_LIMIT_PER_CLIENT_BURST", "10"),
    "rate_limit_scope": ("ENGRAM_RATE_LIMIT_SCOPE", "process"),
    "max_active_requests": ("ENGRAM_MAX_ACTIVE_REQUESTS", "5"),
    "max_active_per_identity": ("ENGRAM_MAX_ACTIVE_PER_IDENTITY", "4"),
    "witness_interval_s": ("ENGRAM_WITNESS_INTERVAL_S", "0"),
    "service": ("ENGRAM_HOT_MAX_ITEMS", "3"),
}


def test_one_parse_sets_every_api_field_and_the_service_settings() -> None:
    """One settings system: ApiSettings.from_env reads every HTTP variable with the
    service's parsers and carries the service's settings from the same environment (they
    were round-tripped through an env dict in the app's lifespan; issue 27, finding 5)."""
    import dataclasses

    assert {f.name for f in dataclasses.fields(ApiSettings)} == set(API_FIELDS)
    base = {"ENGRAM_DEV_MODE": "1", "ENGRAM_HOME": "/tmp/engram-api-settings"}
    default = ApiSettings.from_env(base)
    assert default.service == Settings.from_env(base) and default.home == Path("/tmp/engram-api-settings")
    for name, (var, value) in API_FIELDS.items():
        env = {**base, var: value}
        if var == "ENGRAM_DEV_MODE":
            env = {
                "ENGRAM_HOME": base["ENGRAM_HOME"],
                "ENGRAM_OPERATOR_TOKEN": API_FIELDS["operator_token"][1],
            }
            assert ApiSettings.from_env(env).dev_mode is False
            env[var] = value
            assert ApiSettings.from_env(env).dev_mode is True
            continue
        assert getattr(ApiSettings.from_env(env), name) != getattr(default, name), var
    assert {v for v, _ in API_FIELDS.values()} <= _readme_variables()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"ENGRAM_RATE_LIMIT_BURST": "0"}, "ENGRAM_RATE_LIMIT_BURST"),
        ({"ENGRAM_MAX_REQUEST_BYTES": "lots"}, "ENGRAM_MAX_REQUEST_BYTES"),
        ({"ENGRAM_RATE_LIMIT_SCOPE": "cluster"}, "ENGRAM_RATE_LIMIT_SCOPE"),
        ({"ENGRAM_HTTP_PARSER": "llhttp"}, "ENGRAM_HTTP_PARSER"),
        ({"ENGRAM_SEQUENCER": "cluster"}, "ENGRAM_SEQUENCER"),
        ({"ENGRAM_MAX_HEADERS": "5"}, "ENGRAM_MAX_HEADERS"),
        ({"ENGRAM_DEV_MODE": "maybe"}, "ENGRAM_DEV_MODE"),
        ({"ENGRAM_DEV_MODE": "0", "ENGRAM_OPERATOR_TOKEN": "changeme"}, "ENGRAM_OPERATOR_TOKEN"),
        ({"ENGRAM_HOT_MAX_TOKENS": "-1"}, "ENGRAM_HOT_MAX_TOKENS"),
    ],
)
def test_a_bad_api_setting_is_a_config_error_naming_it(env: dict[str, str], named: str) -> None:
    """Issue 27, finding 5."""
    with pytest.raises(ConfigError, match=named):
        ApiSettings.from_env({"ENGRAM_DEV_MODE": "1", **env})
    with pytest.raises(ConfigError):  # built by keyword, the same checks hold
        ApiSettings(dev_mode=True, rate_limit_burst=0)


def test_every_settings_field_is_set_by_its_variable() -> None:
    assert set(Settings.__dataclass_fields__) == set(LEDGER_FIELDS)
    default = Settings.from_env({})
    for name, (var, value) in LEDGER_FIELDS.items():
        env = {var: value}
        if var.startswith("ENGRAM_DISTILLER_"):  # the distiller needs its URL and model together
            env = {"ENGRAM_DISTILLER_URL": "http://127.0.0.1:9/v1", "ENGRAM_DISTILLER_MODEL": "m", var: value}
        if var.startswith("ENGRAM_EMBEDDER_"):  # the endpoint needs its URL, model and dimension together
            env = {
                "ENGRAM_EMBEDDER_URL": "http://127.0.0.1:8/v1",
                "ENGRAM_EMBEDDER_MODEL": "m",
                "ENGRAM_EMBEDDER_DIM": "8",
                var: value,
            }
        assert getattr(Settings.from_env(env), name) != getattr(default, name), var
    assert {v for v, _ in LEDGER_FIELDS.values()} | set(OTHER) <= _readme_variables()


@pytest.mark.parametrize(
    ("env", "check"),
    [
        ({"ENGRAM_HOT_MAX_TOKENS": "many"}, "ENGRAM_HOT_MAX_TOKENS"),
        ({"ENGRAM_HOT_MAX_ITEMS": "0"}, "ENGRAM_HOT_MAX_ITEMS"),
        ({"ENGRAM_INACTIVE_PREFERENCE_DAYS": "-1"}, "ENGRAM_INACTIVE_PREFERENCE_DAYS"),
        ({"ENGRAM_COMPACT_ON_SESSION_END": "maybe"}, "ENGRAM_COMPACT_ON_SESSION_END"),
        ({"ENGRAM_DISTILLER_URL": "ftp://x", "ENGRAM_DISTILLER_MODEL": "m"}, "ENGRAM_DISTILLER_URL"),
        ({"ENGRAM_DISTILLER_URL": "http://127.0.0.1:9"}, "ENGRAM_DISTILLER_MODEL"),
        ({"ENGRAM_DISTILLER_API_KEY": "k"}, "ENGRAM_DISTILLER_URL"),
        ({"ENGRAM_EMBEDDER": "bert"}, "ENGRAM_EMBEDDER"),
        (
            {"ENGRAM_EMBEDDER_URL": "ftp://x", "ENGRAM_EMBEDDER_MODEL": "m", "ENGRAM_EMBEDDER_DIM": "8"},
            "ENGRAM_EMBEDDER_URL",
        ),
        ({"ENGRAM_EMBEDDER_URL": "http://127.0.0.1:9", "ENGRAM_EMBEDDER_MODEL": "m"}, "ENGRAM_EMBEDDER_DIM"),
        (
            {
                "ENGRAM_EMBEDDER_URL": "http://127.0.0.1:9",
                "ENGRAM_EMBEDDER_MODEL": "m",
                "ENGRAM_EMBEDDER_DIM": "0",
            },
            "ENGRAM_EMBEDDER_DIM",
        ),
        ({"ENGRAM_EMBEDDER_DIM": "8"}, "ENGRAM_EMBEDDER_URL"),
    ],
)
def test_bad_values_are_refused_naming_the_variable(env: dict[str, str], check: str) -> None:
    with pytest.raises(ConfigError, match=check):
        Settings.from_env(env)


def test_memory_settings_reach_the_policy_and_the_distiller() -> None:
    s = Settings.from_env(
        {
            "ENGRAM_HOT_MAX_TOKENS": "300",
            "ENGRAM_HOT_MAX_ITEMS": "3",
            "ENGRAM_INACTIVE_PREFERENCE_DAYS": "2",
            "ENGRAM_COMPACT_ON_SESSION_END": "false",
            "ENGRAM_DISTILLER_URL": "https://llm.example/v1",
            "ENGRAM_DISTILLER_MODEL": "small-model",
            "ENGRAM_DISTILLER_API_KEY": "sk-test",
        }
    )
    cfg = policy_config(s)
    assert (cfg.hot_max_tokens, cfg.hot_max_items, cfg.inactive_preference_days) == (300, 3, 2)
    assert cfg.compact_on_session_end is False
    d = distiller(s)
    assert isinstance(d, ChatCompletionsDistiller)
    assert (d.url, d.model, d.api_key) == ("https://llm.example/v1", "small-model", "sk-test")
    assert isinstance(distiller(Settings.from_env({})), RuleBasedDistiller)


@pytest.mark.parametrize(
    "name",
    [
        "ENGRAM_HOME",
        "ENGRAM_LOG_KEY_FILE",
        "ENGRAM_POLICY_KEY_FILE",
        "ENGRAM_WITNESS_POLICY",
        "ENGRAM_SIGNER_RECORD",
    ],
)
def test_regression_a_tilde_user_that_does_not_exist_is_a_config_error(name: str) -> None:
    """Regression (found by the settings fuzz target): ENGRAM_HOME='~nosuchuser...' made
    Path.expanduser raise RuntimeError out of Settings.from_env; a path variable naming no
    user is now a ConfigError that names the variable, from both parsers."""
    env = {name: "~no-such-user-engram/x", "ENGRAM_DEV_MODE": "1"}
    for parse in (Settings.from_env, ApiSettings.from_env):
        with pytest.raises(ConfigError, match=name):
            parse(env)
    assert Settings.from_env({"ENGRAM_HOME": "~/e"}).home == Path.home() / "e"
