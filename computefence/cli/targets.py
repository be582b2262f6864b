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
from typing import Annotated, Any

import typer

from computefence.cli.option_groups import option_group
from computefence.errors import ConfigError
from computefence.models import SourceStatus, Target
from computefence.sources import TargetSelection, collect_targets
from computefence.sources.registry import PROVIDERS

_PANEL = "Targets"
_SLURM = "Slurm"

InventoryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--inventory",
        "-i",
        metavar="FILE|DIR",
        envvar="COMPUTEFENCE_INVENTORY",
        help="ComputeFence inventory YAML (repeatable). Without any target option: inventory/*.yaml here.",
        rich_help_panel=_PANEL,
    ),
]
SshHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ssh-host",
        "-H",
        metavar="[USER@]ALIAS",
        help="Host alias from your ssh config, or a pattern ('gpu-*') over its Host entries (repeatable).",
        rich_help_panel=_PANEL,
    ),
]
SshConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--ssh-config",
        metavar="FILE",
        help="ssh config to read instead of ~/.ssh/config; alone, every Host entry in it is a target.",
        rich_help_panel=_PANEL,
    ),
]
AnsibleInventoryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ansible-inventory",
        metavar="FILE|DIR",
        help="Ansible inventory, INI or YAML (repeatable); its groups become tags.",
        rich_help_panel=_PANEL,
    ),
]
VaultPasswordFileOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--vault-password-file",
        metavar="FILE",
        help="Passed to ansible-inventory for --ansible-inventory (repeatable).",
        rich_help_panel=_PANEL,
    ),
]
VaultIdOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--vault-id",
        metavar="ID@SOURCE",
        help="Passed to ansible-inventory for --ansible-inventory (repeatable).",
        rich_help_panel=_PANEL,
    ),
]
ProviderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--provider",
        metavar="NAME[,NAME]",
        help=f"Discover running pods through a provider API: {', '.join(PROVIDERS)} (repeatable or comma-separated).",
        rich_help_panel=_PANEL,
    ),
]
ApiUrlOpt = Annotated[
    str | None,
    typer.Option("--api-url", metavar="URL", help="Override the provider API's base URL.", rich_help_panel=_PANEL),
]
LimitOpt = Annotated[
    str | None,
    typer.Option(
        "--limit",
        "-l",
        metavar="PATTERN",
        help="Only targets whose name matches: comma-separated shell patterns, '!pattern' excludes.",
        rich_help_panel=_PANEL,
    ),
]
TagOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        metavar="TAG",
        help="Only targets with this tag or Ansible group (repeatable: any of them).",
        rich_help_panel=_PANEL,
    ),
]
SlurmOpt = Annotated[
    bool,
    typer.Option(
        "--slurm",
        help="Check the nodes of the Slurm cluster the environment names, each in a job step (srun).",
        rich_help_panel=_SLURM,
    ),
]
PartitionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--partition",
        "-p",
        metavar="NAME",
        help="With --slurm: only nodes of this partition, and the steps run there (repeatable).",
        rich_help_panel=_SLURM,
    ),
]
NodelistOpt = Annotated[
    str | None,
    typer.Option(
        "--nodelist",
        "-w",
        metavar="HOSTLIST",
        help="With --slurm: only these nodes, a Slurm hostlist such as gpu[01-08,12].",
        rich_help_panel=_SLURM,
    ),
]


# Each option's name, type and the TargetSelection field it fills, in the order --help lists them.
_OPTIONS = (
    ("inventory", InventoryOpt, "inventories"),
    ("ssh_host", SshHostOpt, "ssh_hosts"),
    ("ssh_config", SshConfigOpt, "ssh_config"),
    ("ansible_inventory", AnsibleInventoryOpt, "ansible_inventories"),
    ("vault_password_file", VaultPasswordFileOpt, "ansible_vault_password_files"),
    ("vault_id", VaultIdOpt, "ansible_vault_ids"),
    ("provider", ProviderOpt, "providers"),
    ("api_url", ApiUrlOpt, "api_url"),
    ("limit", LimitOpt, "limit"),
    ("tag", TagOpt, "tags"),
    ("slurm", SlurmOpt, "slurm"),
    ("partition", PartitionOpt, "slurm_partitions"),
    ("nodelist", NodelistOpt, "slurm_nodelist"),
)
_NARROWING = ("limit", "tags")


def _selection(values: dict[str, Any]) -> TargetSelection:
    return TargetSelection(**{field: values[name] for name, _, field in _OPTIONS if values[name] is not None})


# Declare the target-selection options where a command has its `selection` parameter, and
# call it with the TargetSelection their values make.
target_options = option_group("selection", [(name, kind, None) for name, kind, _ in _OPTIONS], _selection)


def source_options(selection: TargetSelection) -> list[str]:
    """The source options the selection was given (--limit and --tag aside), as flags."""
    return [
        f"--{name.replace('_', '-')}"
        for name, _, field in _OPTIONS
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
