"""The target-selection options, shared by `fleet check` and `inventory list|export`.

A command declares them with these annotated types and hands the values to
`gather_targets`, so every command that picks targets takes the same flags:

    def check(inventory: InventoryOpt = None, ssh_host: SshHostOpt = None,
              ssh_config: SshConfigOpt = None, ansible_inventory: AnsibleInventoryOpt = None,
              provider: ProviderOpt = None, api_url: ApiUrlOpt = None,
              limit: LimitOpt = None, tag: TagOpt = None, ...):
        targets, sources = gather_targets(inventory=inventory, ssh_host=ssh_host, ...)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from computefence.models import SourceStatus, Target
from computefence.sources import TargetSelection, collect_targets

_PANEL = "Targets"

InventoryOpt = Annotated[
    Optional[list[str]],
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
    Optional[list[str]],
    typer.Option(
        "--ssh-host",
        "-H",
        metavar="[USER@]ALIAS",
        help="Host alias from your ssh config, or a pattern ('gpu-*') over its Host entries (repeatable).",
        rich_help_panel=_PANEL,
    ),
]
SshConfigOpt = Annotated[
    Optional[str],
    typer.Option(
        "--ssh-config",
        metavar="FILE",
        help="ssh config to read instead of ~/.ssh/config; alone, every Host entry in it is a target.",
        rich_help_panel=_PANEL,
    ),
]
AnsibleInventoryOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--ansible-inventory",
        metavar="FILE|DIR",
        help="Ansible inventory, INI or YAML (repeatable); its groups become tags.",
        rich_help_panel=_PANEL,
    ),
]
VaultPasswordFileOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--vault-password-file",
        metavar="FILE",
        help="Passed to ansible-inventory for --ansible-inventory (repeatable).",
        rich_help_panel=_PANEL,
    ),
]
VaultIdOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--vault-id",
        metavar="ID@SOURCE",
        help="Passed to ansible-inventory for --ansible-inventory (repeatable).",
        rich_help_panel=_PANEL,
    ),
]
ProviderOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--provider",
        metavar="NAME[,NAME]",
        help="Discover running pods through a provider API: runpod, vast, lambda (repeatable or comma-separated).",
        rich_help_panel=_PANEL,
    ),
]
ApiUrlOpt = Annotated[
    Optional[str],
    typer.Option("--api-url", metavar="URL", help="Override the provider API's base URL.", rich_help_panel=_PANEL),
]
LimitOpt = Annotated[
    Optional[str],
    typer.Option(
        "--limit",
        "-l",
        metavar="PATTERN",
        help="Only targets whose name matches: comma-separated shell patterns, '!pattern' excludes.",
        rich_help_panel=_PANEL,
    ),
]
TagOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--tag",
        metavar="TAG",
        help="Only targets with this tag or Ansible group (repeatable: any of them).",
        rich_help_panel=_PANEL,
    ),
]


def gather_targets(
    *,
    inventory: list[str] | None = None,
    ssh_host: list[str] | None = None,
    ssh_config: str | None = None,
    ansible_inventory: list[str] | None = None,
    vault_password_file: list[str] | None = None,
    vault_id: list[str] | None = None,
    provider: list[str] | None = None,
    api_url: str | None = None,
    limit: str | None = None,
    tag: list[str] | None = None,
    default_inventory_dir: Path = Path("inventory"),
) -> tuple[list[Target], list[SourceStatus]]:
    """The selected targets and one status per source, from the option values as typer passes them.

    Each source's warnings (a skipped line, an option that cannot be honoured) go to stderr,
    one line each, besides being kept in its status for --format json.
    """
    targets, statuses = collect_targets(TargetSelection(
        inventories=inventory or (),
        ssh_hosts=ssh_host or (),
        ssh_config=ssh_config,
        ansible_inventories=ansible_inventory or (),
        ansible_vault_password_files=vault_password_file or (),
        ansible_vault_ids=vault_id or (),
        providers=provider or (),
        api_url=api_url,
        limit=limit,
        tags=tag or (),
        default_inventory_dir=default_inventory_dir,
    ))
    for status in statuses:
        for warning in status.warnings:
            print(f"computefence: warning: {warning}", file=sys.stderr)
    return targets, statuses
