"""What a command imports before it does anything: only its own modules (#35)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from computefence.cli.app import COMMAND_MODULES, SUBCOMMAND_MODULES
from computefence.demo import DEMO_RECORDING


def _imported_by(*argv: str, env: dict[str, str] | None = None) -> set[str]:
    script = (
        "import json, sys\n"
        "from computefence.cli import main\n"
        f"main({list(argv)!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_version_imports_no_command_and_not_the_evaluator():
    imported = _imported_by("--version")
    assert "computefence.cli.doctor" not in imported and "computefence.cli.fleet" not in imported
    assert "computefence.evaluate.judge" not in imported and "computefence.models" not in imported


def test_doctor_help_imports_doctor_alone_no_ssh_and_no_judging():
    imported = _imported_by("doctor", "--help")
    assert "computefence.cli.doctor" in imported
    assert not {
        m for m in imported if m.startswith(("asyncssh", "computefence.cli.fleet", "computefence.evaluate.judge"))
    }


def test_doctor_loads_no_target_source_parser_and_no_fleet_step_before_its_probe():
    # doctor --help imports what a doctor run imports before its probe starts.
    imported = _imported_by("doctor", "--help")
    assert not {
        m
        for m in imported
        if m.startswith(("computefence.sources.ansible", "computefence.sources.inventory", "computefence.evaluate"))
        and m != "computefence.evaluate"
    }


@pytest.mark.parametrize("command", ["fleet", "report"])
def test_a_group_loads_every_module_that_registers_a_subcommand(command, capsys):
    from computefence.cli import main

    main([command, "--help"])
    shown = capsys.readouterr().out
    modules = [*COMMAND_MODULES[command], *SUBCOMMAND_MODULES.get(command, {}).values()]
    assert all(f"computefence.cli.{module}" in sys.modules for module in modules)
    if command == "fleet":
        for sub in ("check", "fix", "release", "snapshot", "watch"):
            assert f"│ {sub} " in shown


def test_every_module_that_registers_a_command_is_in_the_table():
    # A module left out of COMMAND_MODULES would register nothing: its commands would vanish.
    registering = {
        path.stem
        for path in (Path(__file__).resolve().parents[2] / "computefence/cli").glob("*.py")
        if re.search(r"^@\w*app\.command|^app\.add_typer\(", path.read_text(), re.M)
    }
    listed = {module for modules in COMMAND_MODULES.values() for module in modules}
    listed |= {module for modules in SUBCOMMAND_MODULES.values() for module in modules.values()}
    assert registering and registering <= listed


def test_fleet_check_loads_none_of_the_other_fleet_subcommands():
    imported = _imported_by("fleet", "check", "--help")
    assert "computefence.cli.fleet" in imported
    siblings = {f"computefence.cli.{module}" for module in SUBCOMMAND_MODULES["fleet"].values()}
    assert not siblings & imported


@pytest.mark.parametrize(("sub", "module"), sorted(SUBCOMMAND_MODULES["fleet"].items()))
def test_each_other_fleet_subcommand_loads_its_own_module(sub, module):
    imported = _imported_by("fleet", sub, "--help")
    assert f"computefence.cli.{module}" in imported


def _replayed_into(report: Path) -> list[str]:
    """`fleet check` of the demo's recorded pods, its JSON report written to `report`."""
    return ["fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "json", "-o", str(report)]


def _environ_without(name: str) -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != name}


def test_a_fleet_check_into_a_file_from_a_pipe_imports_neither_rich_nor_multiprocessing(tmp_path):
    # Nothing is drawn (no terminal) and one process probes: neither is needed (#35).
    imported = _imported_by(*_replayed_into(tmp_path / "report.json"), "--workers", "1")
    assert "computefence.run" in imported
    assert not {m for m in imported if m.split(".")[0] in ("rich", "multiprocessing")}


def test_doctor_as_json_into_a_pipe_imports_no_rich():
    # Its spinner is for a terminal alone: rich would cost ~25 ms before the probe starts.
    # (With COLUMNS set, rich works out the report's width, after the probe.)
    env = _environ_without("COLUMNS")
    imported = _imported_by("doctor", "--format", "json", "--python", "/nonexistent/python3", env=env)
    assert "computefence.cli.doctor" in imported
    assert not {m for m in imported if m.split(".")[0] == "rich"}


def test_the_cli_loads_no_pydantic_plugin(tmp_path):
    # A plugin would see every pod's facts as they are validated, secrets included.
    marker = tmp_path / "plugin-loaded"
    (tmp_path / "spy_plugin.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "class Plugin:\n    def new_schema_validator(self, *args, **kwargs):\n        return None, None, None\n"
        "plugin = Plugin()\n"
    )
    dist = tmp_path / "spy_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: spy-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nspy = spy_plugin:plugin\n")
    env = _environ_without("PYDANTIC_DISABLE_PLUGINS")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *filter(None, [env.get("PYTHONPATH")])])
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "computefence", *_replayed_into(report)], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 1 and report.exists(), done.stderr
    assert not marker.exists()
    # The same environment does load it into a plain pydantic model: the spy is a real plugin.
    script = "import pydantic; pydantic.create_model('M', x=(int, 0))"
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    assert marker.exists()
