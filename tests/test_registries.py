"""One table per plug-in kind (providers, connectors, output formats, evaluate areas): the
CLI's choices and the check registry are what the tables hold, nothing listed twice."""

from __future__ import annotations

import re

import click
import pytest
import typer

from computefence import check, evaluate
from computefence.cli import app, main
from computefence.connectors.registry import (
    CONNECTORS,
    ConnectSettings,
    ReplaySettings,
    SshSettings,
    connector_for,
    open_connector,
)
from computefence.demo import DEMO_RECORDING
from computefence.errors import ConfigError
from computefence.evaluate.checks.areas import area_title
from computefence.evaluate.spec import CheckSpec
from computefence.models import Finding, Severity, Target
from computefence.render import CHANGES_FORMATS, FORMATS, render
from computefence.render.interface import Renderer
from computefence.render.views import by_area
from computefence.sources import TargetSelection, build_sources
from computefence.sources.registry import PROVIDERS, provider_source

ROOT_COMMAND = typer.main.get_command(app)


def _option(path: list[str], name: str) -> click.Parameter:
    command = ROOT_COMMAND
    for part in path:
        command = command.commands[part]  # type: ignore[attr-defined]
    [param] = [p for p in command.params if name in getattr(p, "opts", [])]
    return param


def _offered_formats(capsys, *argv: str) -> list[str]:
    # What the CLI itself says its choices are, when given one it does not know.
    capsys.readouterr()
    assert main([*argv, "--format", "nope"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    return re.findall(r"'(\w+)'", err.split("is not one of", 1)[1])


@pytest.mark.parametrize(
    "argv", [["doctor"], ["fleet", "check"], ["report", "show", "r.json"], ["report", "merge", "r.json"]]
)
def test_every_command_offers_exactly_the_registered_formats(capsys, argv):
    assert _offered_formats(capsys, *argv) == list(FORMATS)


def test_report_diff_offers_the_formats_that_show_changes(capsys):
    assert _offered_formats(capsys, "report", "diff", "a.json", "b.json") == list(CHANGES_FORMATS)
    assert CHANGES_FORMATS and set(CHANGES_FORMATS) < set(FORMATS)


def test_every_format_is_a_renderer_taking_the_same_options():
    sample_report = check(connector="replay", settings=ConnectSettings(own=(ReplaySettings(DEMO_RECORDING),)))
    for name, made in FORMATS.items():
        assert issubclass(made, Renderer), name
        text = made(color=False, width=80, group_by="pod", quiet=True).render(sample_report)
        assert text == render(sample_report, name, width=80, group_by="pod", quiet=True) and text.strip()


def test_the_provider_option_names_the_registered_providers():
    help_text = _option(["fleet", "check"], "--provider").help
    assert all(name in help_text for name in PROVIDERS)
    with pytest.raises(ConfigError, match=f"choose from {', '.join(PROVIDERS)}"):
        provider_source("aws")
    with pytest.raises(ConfigError, match="|".join(PROVIDERS)):
        build_sources(TargetSelection(default_inventory_dir="/nonexistent"))


def test_every_provider_row_makes_a_target_source_of_that_name():
    for name in PROVIDERS:
        source = provider_source(name, api_url="http://127.0.0.1:9")
        assert name in source.name.lower() and callable(source.targets)


def test_every_connector_row_opens_a_session(tmp_path):
    assert set(CONNECTORS) >= {"ssh", "demo", "replay", "local"}
    with open_connector("local") as session:
        assert session.targets is None and not session.live
    with open_connector("ssh") as session:
        assert session.targets is None and session.live
    with pytest.raises(ConfigError, match="unknown connector 'telnet'; choose one of: ssh"):
        open_connector("telnet")


def test_the_targets_choose_their_connector_and_each_row_declares_its_own_settings():
    pod = Target(name="gpu-1", host="10.0.0.5")
    assert connector_for([pod]) == "ssh"
    # demo, replay and local bring their own pods or this machine: only a name opens them.
    assert [name for name, kind in CONNECTORS.items() if kind.reaches(pod)] == ["ssh"]
    settings = ConnectSettings(own=(ReplaySettings(DEMO_RECORDING), SshSettings(accept_new=True)))
    assert settings.of(ReplaySettings).recording == DEMO_RECORDING and settings.of(SshSettings).accept_new
    assert settings.with_own(SshSettings()).of(SshSettings).accept_new is False
    assert settings.with_own(SshSettings()).of(ReplaySettings).recording == DEMO_RECORDING
    assert all(isinstance(kind.settings, type) for kind in CONNECTORS.values())


def test_the_check_registry_is_the_areas_checks_and_rules_in_table_order():
    areas = [area.module for area in evaluate.AREAS.values()]
    assert {c: s for area in areas for c, s in area.CHECKS.items()} == evaluate.CHECKS
    assert [rule for area in areas for rule in area.RULES] == evaluate.RULES
    assert sum(len(area.CHECKS) for area in areas) == len(evaluate.CHECKS), "a check id is in two areas"
    assert all(isinstance(spec, CheckSpec) for spec in evaluate.CHECKS.values())
    for area in areas:
        assert {rule.__module__ for rule in area.RULES} <= {area.__name__}
        assert area.__name__.startswith("computefence.evaluate.checks.")


def test_a_report_heads_each_area_with_the_title_its_row_gives_in_table_order():
    # The renderers read titles and order from the one table; an area it lacks keeps its id.
    findings = [
        Finding(check=check, severity=Severity.PASS, message="m")
        for check in ("run.stalled", "custom.wandb", "dataset.columns", "gpu.ecc", "zeta.new", "storage.budget")
        + ("env.drift", "probe.timeout")
    ]
    assert [(area, area_title(area)) for area, _ in by_area(findings)] == [
        ("storage", "Storage"),
        ("gpu", "GPU"),
        ("probe", "Probe"),
        ("dataset", "Dataset"),
        ("custom", "Custom checks"),
        ("env", "Environment"),
        ("run", "Run"),
        ("zeta", "Zeta"),
    ]
