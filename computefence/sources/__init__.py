"""Where targets come from: inventory files, ssh_config, Ansible inventories, provider APIs.

`collect_targets` reads every source asked for and returns the selected targets with one
SourceStatus per source. Files are the user's to fix: their problems raise ConfigError
(exit 2) before anything connects. A provider API that fails (SourceError) is recorded
in its SourceStatus and the other sources are still used.

Target names must be unique across sources: the same name from two places is an error
naming both, since checking one machine twice or guessing which entry wins would both
mislead (`inventory export` output combined with the provider it came from is the
usual cause).
"""

from __future__ import annotations

import gc
import os
import shlex
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from computefence.errors import ConfigError, SourceError
from computefence.models import Fix, SourceStatus, Target
from computefence.sources import registry
from computefence.sources.interface import TargetSource
from computefence.sources.selection import select_targets

__all__ = [
    "TargetSelection",
    "TargetSource",
    "build_sources",
    "check_before_connecting",
    "collect_targets",
    "select_targets",
]


def _provider_names(providers: Sequence[str]) -> list[str]:
    names = [part.strip().lower() for value in providers for part in value.split(",") if part.strip()]
    return list(dict.fromkeys(names))


class TargetSelection(BaseModel):
    """Which targets a command asks for: the sources to read, then how to narrow them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inventories: tuple[str, ...] = ()
    ssh_hosts: tuple[str, ...] = ()
    ssh_config: str | None = None
    ansible_inventories: tuple[str, ...] = ()
    ansible_vault_password_files: tuple[str, ...] = ()
    ansible_vault_ids: tuple[str, ...] = ()
    # Names, each possibly comma-separated ("runpod,vast").
    providers: tuple[str, ...] = ()
    api_url: str | None = None
    limit: str | None = None
    tags: tuple[str, ...] = ()
    # The nodes of the Slurm cluster the environment names, narrowed by partition and hostlist.
    slurm: bool = False
    slurm_partitions: tuple[str, ...] = ()
    slurm_nodelist: str | None = None
    default_inventory_dir: Path = Path("inventory")


def build_sources(selection: TargetSelection) -> list[TargetSource]:
    """The sources the selection names; with none, the inventory files in its default directory."""
    # Imported here, each only when the selection names it: a run that reads no files (doctor,
    # a library caller's targets) or only an inventory does not pay for the other parsers (the
    # Ansible one with ssh_config's is ~15-50 ms).
    from computefence.sources.inventory import INVENTORY_SUFFIXES, InventorySource, inventory_files

    sources: list[TargetSource] = []
    for inventory in selection.inventories:
        sources.extend(InventorySource(path) for path in inventory_files(inventory))
    if selection.ssh_hosts or selection.ssh_config:
        from computefence.sources.ssh_config import SshConfigSource

        sources.append(SshConfigSource(list(selection.ssh_hosts), selection.ssh_config))
    if (selection.ansible_vault_password_files or selection.ansible_vault_ids) and not selection.ansible_inventories:
        raise ConfigError("--vault-password-file and --vault-id need --ansible-inventory")
    if selection.ansible_inventories:
        from computefence.sources.ansible import AnsibleSource

        sources.extend(
            AnsibleSource(
                path, vault_password_files=selection.ansible_vault_password_files, vault_ids=selection.ansible_vault_ids
            )
            for path in selection.ansible_inventories
        )
    if (selection.slurm_partitions or selection.slurm_nodelist is not None) and not selection.slurm:
        raise ConfigError("--partition and --nodelist need --slurm")
    if selection.slurm:
        if sources or selection.providers:
            raise ConfigError("--slurm reaches nodes through srun; check other targets in a run of their own")
        from computefence.sources.slurm import SlurmSource

        sources.append(SlurmSource(partitions=selection.slurm_partitions, nodelist=selection.slurm_nodelist))
    names = _provider_names(selection.providers)
    if selection.api_url and not names:
        raise ConfigError("--api-url needs --provider")
    if names:
        sources.extend(registry.provider_source(name, api_url=selection.api_url) for name in names)
    if not sources:
        directory = selection.default_inventory_dir
        found = sorted(p for p in directory.glob("*") if p.suffix in INVENTORY_SUFFIXES and p.is_file())
        if not found:
            raise ConfigError(
                f"no targets: no inventory files ({directory}/*.yaml) here; pass -i FILE, -H SSH_ALIAS, "
                f"--ansible-inventory FILE or --provider {'|'.join(registry.PROVIDERS)} "
                "(or try simulated pods: fleet check, fleet fix or fleet watch with --demo)"
            )
        sources.extend(InventorySource(path) for path in found)
    return sources


def _check_unique(targets: list[Target]) -> None:
    seen: dict[str, Target] = {}
    for target in targets:
        first = seen.setdefault(target.name, target)
        if first is not target:
            raise ConfigError(
                f"target {target.name!r} comes from both {first.source or 'an earlier source'} and "
                f"{target.source or 'a later source'}; names must be unique, rename one or drop one source"
            )


def option_like_value(target: Target) -> str | None:
    """The first name, host, user or jump host of `target` that starts with `-`, described.

    ssh reads such a value as an option however it is quoted (`-oProxyCommand=...` runs a
    command on the machine that runs ssh), so no source may hand one on."""
    values = [("host", target.host), ("user", target.user or ""), ("name", target.name)]
    if target.proxy_jump:  # most targets have none: no hop lists to build
        hops = [hop.rpartition("@") for hop in target.proxy_jump.split(",")]
        values += [("proxy_jump host", host) for _, _, host in hops]
        values += [("proxy_jump user", user) for user, at, _ in hops if at]
    for what, value in values:
        if value.startswith("-"):
            shown = value if len(value) <= 60 else value[:57] + "..."
            return f"{what} {shown!r} starts with '-', which ssh would read as an option"
    return None


def _refuse_option_like(found: list[Target], source: str) -> list[Target]:
    """An inventory, ssh_config or Ansible value is the user's own file: an error naming its line.
    A provider's answer is one pod: that pod cannot be checked, the others still are."""
    for target in found:
        problem = option_like_value(target)
        if problem is None:
            continue
        if target.provider is None:
            raise ConfigError(f"{target.source or source}: {problem}")
        target.unreachable_reason = f"the provider API gave {problem}"
        target.unreachable_fix = Fix(
            advice="check the pod in the provider's console; ComputeFence will not pass this value to ssh"
        )
    return found


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Reading a source allocates a few containers per host and no cycles worth collecting;
    the cyclic collector would walk the growing heap over and over (at 100,000 hosts, two
    thirds of the time). Memory is bounded by the sources' own caps."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def collect_targets(selection: TargetSelection) -> tuple[list[Target], list[SourceStatus]]:
    """All targets the selection names, narrowed by its limit and tags, and how each source fared."""
    sources = build_sources(selection)
    targets: list[Target] = []
    statuses: list[SourceStatus] = []
    for source in sources:
        try:
            with _collector_paused():
                found = source.targets()
        except SourceError as exc:
            statuses.append(SourceStatus(name=source.name, ok=False, error=str(exc)))
            continue
        statuses.append(
            SourceStatus(
                name=source.name,
                targets=len(found),
                resolver=getattr(source, "resolver", None),
                warnings=getattr(source, "warnings", []),
            )
        )
        targets.extend(_refuse_option_like(found, source.name))
    _check_unique(targets)
    failed = [status for status in statuses if not status.ok]
    if statuses and len(failed) == len(statuses):
        # Nothing to check at all is no fleet verdict: it is the configuration to fix.
        raise ConfigError(
            "every target source failed, nothing to check: "
            + "; ".join(status.error or status.name for status in failed)
        )
    return select_targets(targets, limit=selection.limit, tags=selection.tags), statuses


def check_before_connecting(targets: list[Target]) -> None:
    """Configuration mistakes that would otherwise show as every pod failing: ConfigError."""
    check_identity_files(targets)
    check_ssh_aliases(targets)


def check_ssh_aliases(targets: list[Target]) -> None:
    """An ssh_config alias (-H) that no Host entry gives a HostName and that does not resolve
    is a typo, not an unreachable pod."""
    for target in targets:
        if not target.ssh_config or target.host != target.name or target.proxy_jump or target.proxy_command:
            continue
        try:
            socket.getaddrinfo(target.host, None)
        except (OSError, UnicodeError):
            raise ConfigError(
                f"-H {target.name}: no Host entry in {target.ssh_config} gives it a HostName, and it "
                f"is not a host name that resolves; check the alias (grep -i '^Host' "
                f"{shlex.quote(target.ssh_config)} lists them)"
            ) from None


def check_identity_files(targets: list[Target]) -> None:
    """An identity file a target names that is missing or unreadable is a ConfigError naming
    it and where it came from, before any connection (else every pod fails to log in)."""
    for target in targets:
        for identity in target.identity_files:
            path = Path(identity).expanduser()
            if path.is_file() and os.access(path, os.R_OK):
                continue
            why = (
                "does not exist"
                if not path.exists()
                else "is not a file"
                if not path.is_file()
                else "cannot be read by this user"
            )
            where = f" (target {target.name}, from {target.source})" if target.source else f" (target {target.name})"
            raise ConfigError(
                f"identity file {identity} {why}{where}: fix the path, or create the key with "
                f"ssh-keygen -t ed25519 -f {shlex.quote(identity)}"
            )
