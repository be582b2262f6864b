"""Shell completion and COMPUTEFENCE_* environment variables, as a user's shell uses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from computefence.cli import main
from computefence.demo import DEMO_RECORDING

ENV_VARS = (
    "COMPUTEFENCE_FORMAT",
    "COMPUTEFENCE_CONCURRENCY",
    "COMPUTEFENCE_TIMEOUT",
    "COMPUTEFENCE_FAIL_ON",
    "COMPUTEFENCE_INVENTORY",
    "COMPUTEFENCE_KNOWN_HOSTS",
    "COMPUTEFENCE_POLICY",
)


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "computefence", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def test_bash_completion_completes_subcommands_and_options():
    done = _cli(
        env={"_COMPUTEFENCE_COMPLETE": "complete_bash", "COMP_WORDS": "computefence fleet ch", "COMP_CWORD": "2"}
    )
    assert done.stdout.split() == ["check"]
    options = _cli(
        env={
            "_COMPUTEFENCE_COMPLETE": "complete_bash",
            "COMP_WORDS": "computefence fleet check --group",
            "COMP_CWORD": "3",
        }
    )
    assert "--group-by" in options.stdout.split()
    # Typer takes the shell's name only with detection off; else it asks the process tree,
    # which has no shell when the suite does not run under one.
    shown = _cli("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert "complete -o default -F" in shown.stdout


def test_help_names_every_environment_variable():
    text = _cli("fleet", "check", "--help").stdout
    assert [name for name in ENV_VARS if name not in text] == []


def test_environment_variables_stand_in_for_flags(capsys, monkeypatch):
    monkeypatch.setenv("COMPUTEFENCE_FORMAT", "json")
    monkeypatch.setenv("COMPUTEFENCE_FAIL_ON", "warn")
    code = main(["fleet", "check", "--replay", str(DEMO_RECORDING)])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["fail_on"] == "warn"
    # A flag on the command line still wins.
    assert main(["fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "markdown"]) == 1
    assert capsys.readouterr().out.startswith("## ")


@pytest.mark.parametrize("value", ["yaml", "0"])
def test_a_bad_environment_value_is_a_usage_error_naming_the_variable(capsys, monkeypatch, value):
    name = "COMPUTEFENCE_FORMAT" if value == "yaml" else "COMPUTEFENCE_CONCURRENCY"
    monkeypatch.setenv(name, value)
    assert main(["fleet", "check", "--replay", str(DEMO_RECORDING)]) == 2
    assert name in capsys.readouterr().err


def _command_paths(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, sub in getattr(group, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            paths += _command_paths(sub, (*prefix, name))
    return paths


def test_every_help_page_shows_its_option_names_whole_at_80_columns(capsys, monkeypatch):
    import typer.main

    from computefence.cli.app import app

    monkeypatch.setenv("COLUMNS", "80")
    cut = {}
    for path in _command_paths(typer.main.get_command(app)):
        main([*path, "--help"])
        text = capsys.readouterr().out
        assert "Usage: computefence" in text
        cut[" ".join(path)] = [line for line in text.splitlines() if "…" in line]
    assert len(cut) > 20
    assert {name: lines for name, lines in cut.items() if lines} == {}
