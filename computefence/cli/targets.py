"""The target-selection options, shared by `fleet check` and `inventory list|export`.

A command that picks targets takes one `selection: TargetSelection` parameter and is
decorated with `target_options`, which declares the options in its place and builds the
selection from their values; `gather_targets` then reads it:

    @fleet_app.command("check")
    @target_options
    def check(selection: TargetSelection, ...):
        targets, sources = gather_targets(selection)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from computefence.cli.option_groups import OptionSpec, option, option_group
from computefence.errors import ConfigError
from computefence.models import SourceStatus, Target
from computefence.sources import TargetSelection, collect_targets
from computefence.sources.registry import PROVIDERS

_PANEL = "Targets"
_SLURM = "Slurm"


def _target(
    field: str, flags: str, kind: Any, help: str, *, panel: str = _PANEL, **settings: Any
) -> tuple[str, OptionSpec]:
    """An option and the TargetSelection field it fills."""
    return field, option(flags, kind, help=help, rich_help_panel=panel, **settings)


# The options in the order --help lists them.
_OPTIONS = (
    _target(
        "inventories",
        "--inventory -i",
        list[str] | None,
        "ComputeFence inventory YAML (repeatable). Without any target option: inventory/*.yaml here.",
        metavar="FILE|DIR",
        envvar="COMPUTEFENCE_INVENTORY",
    ),
    _target(
        "ssh_hosts",
        "--ssh-host -H",
        list[str] | None,
        "Host alias from your ssh config, or a pattern ('gpu-*') over its Host entries (repeatable).",
        metavar="[USER@]ALIAS",
    ),
    _target(
        "ssh_config",
        "--ssh-config",
        str | None,
        "ssh config to read instead of ~/.ssh/config; alone, every Host entry in it is a target.",
        metavar="FILE",
    ),
    _target(
        "ansible_inventories",
        "--ansible-inventory",
        list[str] | None,
        "Ansible inventory, INI or YAML (repeatable); its groups become tags.",
        metavar="FILE|DIR",
    ),
    _target(
        "ansible_vault_password_files",
        "--vault-password-file",
        list[str] | None,
        "Passed to ansible-inventory for --ansible-inventory (repeatable).",
        metavar="FILE",
    ),
    _target(
        "ansible_vault_ids",
        "--vault-id",
        list[str] | None,
        "Passed to ansible-inventory for --ansible-inventory (repeatable).",
        metavar="ID@SOURCE",
    ),
    _target(
        "providers",
        "--provider",
        list[str] | None,
        f"Discover running pods through a provider API: {', '.join(PROVIDERS)} (repeatable or comma-separated).",
        metavar="NAME[,NAME]",
    ),
    _target("api_url", "--api-url", str | None, "Override the provider API's base URL.", metavar="URL"),
    _target(
        "limit",
        "--limit -l",
        str | None,
        "Only targets whose name matches: comma-separated shell patterns, '!pattern' excludes.",
        metavar="PATTERN",
    ),
    _target(
        "tags",
        "--tag",
        list[str] | None,
        "Only targets with this tag or Ansible group (repeatable: any of them).",
        metavar="TAG",
    ),
    _target(
        "slurm",
        "--slurm",
        bool,
        "Check the nodes of the Slurm cluster the environment names, each in a job step (srun).",
        panel=_SLURM,
    ),
    _target(
        "slurm_partitions",
        "--partition -p",
        list[str] | None,
        "With --slurm: only nodes of this partition, and the steps run there (repeatable).",
        metavar="NAME",
        panel=_SLURM,
    ),
    _target(
        "slurm_nodelist",
        "--nodelist -w",
        str | None,
        "With --slurm: only these nodes, a Slurm hostlist such as gpu[01-08,12].",
        metavar="HOSTLIST",
        panel=_SLURM,
    ),
)
_NARROWING = ("limit", "tags")


def _selection(values: dict[str, Any]) -> TargetSelection:
    return TargetSelection(**{field: values[spec[0]] for field, spec in _OPTIONS if values[spec[0]] is not None})


# Declare the target-selection options where a command has its `selection` parameter, and
# call it with the TargetSelection their values make.
target_options = option_group("selection", [spec for _, spec in _OPTIONS], _selection)


def source_options(selection: TargetSelection) -> list[str]:
    """The source options the selection was given (--limit and --tag aside), as flags."""
    return [
        f"--{spec[0].replace('_', '-')}"
        for field, spec in _OPTIONS
        if field not in _NARROWING and getattr(selection, field)
    ]


def gather_targets(selection: TargetSelection) -> tuple[list[Target], list[SourceStatus]]:
    """The selected targets and one status per source.

    Each source's warnings (a skipped line, an option that cannot be honoured) go to stderr,
    one line each, besides being kept in its status for --format json.
    """
    targets, statuses = collect_targets(selection)
    for status in statuses:
        for warning in status.warnings:
            print(f"computefence: warning: {warning}", file=sys.stderr)
    return targets, statuses


def own_pods_connector(name: str, flag: str, selection: TargetSelection, conflicting: Sequence[str] = ()) -> str:
    """`name` for a connector that brings its own pods (--demo, --replay), checked before it
    starts: no source option may be given besides it (--limit and --tag narrow its pods)."""
    picked = source_options(selection) + list(conflicting)
    if picked:
        what = "simulated" if name == "demo" else "recorded"
        raise ConfigError(f"{flag} checks its own {what} pods; drop {', '.join(picked)}")
    return name
