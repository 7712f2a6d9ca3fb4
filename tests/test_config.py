"""Every environment variable in one place: defaults, deprecated names, the `config` command."""

from __future__ import annotations

import json
import warnings

import pytest
from click.testing import CliRunner

from rubric_core import config
from rubric_core.cli import cli
from rubric_core.errors import InputError
from rubric_core.store.paths import default_db_target
from rubric_core.tools import _sandbox_bwrap, sandbox

_OURS = [s for s in config.SETTINGS if s.group != "keys"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """An environment where no declared variable (nor an old name) is set."""
    for item in config.SETTINGS:
        for name in (item.name, *item.deprecated):
            monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_our_variables_share_one_prefix():
    assert all(
        s.name.startswith(config.PREFIX) for s in _OURS if s.name != "OPENAI_COMPATIBLE_API_KEY"
    )
    assert len({s.name for s in config.SETTINGS}) == len(config.SETTINGS)
    assert all(s.meaning for s in config.SETTINGS)


def test_unset_variables_read_as_their_defaults(clean_env, tmp_path):
    clean_env.chdir(tmp_path)
    assert config.text("RUBRIC_STUDIO_RAY_ADDRESS") == ""
    assert config.flag("RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK") is False
    assert config.integer("RUBRIC_STUDIO_SANDBOX_UID") is None
    assert default_db_target() == tmp_path / "rubric_studio.db"


def test_values_are_read_at_call_time(clean_env):
    clean_env.setenv("RUBRIC_STUDIO_DB", "  /data/x.db ")
    assert config.text("RUBRIC_STUDIO_DB") == "/data/x.db"
    clean_env.setenv("RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK", "Yes")
    assert config.flag("RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK") is True
    clean_env.setenv("RUBRIC_STUDIO_SANDBOX_UID", "65534")
    assert config.integer("RUBRIC_STUDIO_SANDBOX_UID") == 65534


def test_a_bad_integer_and_an_unknown_name_are_named(clean_env):
    clean_env.setenv("RUBRIC_STUDIO_SANDBOX_UID", "nobody")
    with pytest.raises(InputError, match="RUBRIC_STUDIO_SANDBOX_UID must be an integer"):
        config.integer("RUBRIC_STUDIO_SANDBOX_UID")
    with pytest.raises(InputError, match="no setting named 'RUBRIC_STUDIO_NOPE'"):
        config.text("RUBRIC_STUDIO_NOPE")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("RUBRIC_SANDBOX_ALLOW_WEAK", "RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK"),
        ("RUBRIC_SANDBOX_UID", "RUBRIC_STUDIO_SANDBOX_UID"),
        ("RUBRIC_SANDBOX_BWRAP", "RUBRIC_STUDIO_SANDBOX_BWRAP"),
        ("RUBRIC_SANDBOX_NO_NAMESPACES", "RUBRIC_STUDIO_SANDBOX_NO_NAMESPACES"),
    ],
)
def test_an_old_sandbox_name_still_works_and_warns_naming_the_new_one(clean_env, old, new):
    clean_env.setenv(old, "1")
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated; set {new} instead"):
        assert config.text(new) == "1"
    clean_env.setenv(new, "2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert config.text(new) == "2", "the new name wins, without a warning"


def test_the_sandbox_reads_its_settings_through_config(clean_env, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    clean_env.setenv("RUBRIC_SANDBOX_BWRAP", str(fake))
    with pytest.warns(DeprecationWarning, match="RUBRIC_STUDIO_SANDBOX_BWRAP"):
        assert _sandbox_bwrap.find_bwrap() == str(fake)
    clean_env.setenv("RUBRIC_STUDIO_SANDBOX_UID", "65534")
    assert sandbox._pick_uid() == (65534, False)


def test_secrets_are_masked(clean_env):
    clean_env.setenv("OPENAI_API_KEY", "sk-very-secret")
    rows = {row["name"]: row for row in config.describe()}
    assert rows["OPENAI_API_KEY"]["value"] == "*** (set)"
    assert "sk-very-secret" not in repr(config.describe())


def test_the_config_command_lists_every_variable(clean_env):
    clean_env.setenv("RUBRIC_STUDIO_RAY_ADDRESS", "10.0.0.5:6379")
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    result = CliRunner().invoke(cli, ["config"])
    assert result.exit_code == 0, result.output
    for item in config.SETTINGS:
        assert item.name in result.output
    assert "10.0.0.5:6379" in result.output
    assert "sk-ant-secret" not in result.output
    assert "formerly RUBRIC_SANDBOX_UID" in result.output
    rows = [
        json.loads(line)
        for line in CliRunner().invoke(cli, ["config", "--json"]).output.splitlines()
    ]
    assert [row["name"] for row in rows] == [item.name for item in config.SETTINGS]
    assert {row["name"]: row["default"] for row in rows}["RUBRIC_STUDIO_DB"] == "./rubric_studio.db"


def test_every_api_key_a_provider_reads_is_declared():
    from rubric_core.providers.langchain import PROVIDER_KEYS

    declared = {s.name for s in config.SETTINGS if s.group == "keys"}
    assert {var for variables in PROVIDER_KEYS.values() for var in variables} <= declared
