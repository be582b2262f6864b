"""Storage checks: where checkpoints and the HF cache land, whether anything outlives the
pod, and how much room is left.

"Ephemeral" means lost on the next stop or restart (a RunPod container disk, tmpfs, /tmp,
a generic container's overlay layer). Storage that survives a stop but not the pod's end
(a RunPod volume disk, a Vast container disk, a Lambda root disk) passes, with its fate in
the message; storage.no-volume warns when nothing outlives the pod at all.
"""

from __future__ import annotations

import posixpath

from computefence.evaluate.context import (
    Context,
    block,
    collector_error,
    env_by_source,
    first_path,
    gb,
    passed,
    q,
    skipped,
    sudo,
    warn,
)
from computefence.evaluate.mounts import Level, Storage
from computefence.evaluate.persist import persist_env
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import CheckOptions, Facts, Finding, Fix, FixStep, PathFacts
from computefence.policy import Thresholds
from computefence.probe.storage import normalize
from computefence.text import one_line

CHECKS: dict[str, CheckSpec] = {
    "storage.hf-cache": CheckSpec(
        "the HF cache is on storage that survives a restart, set where SSH sessions see it", Remedy.FIX
    ),
    "storage.output-dir": CheckSpec("the output dir exists, is writable and survives a restart", Remedy.CONFIG),
    "storage.no-volume": CheckSpec("some storage outlives the pod", Remedy.CONFIG),
    "storage.disk-headroom": CheckSpec("enough free space on the filesystems the job writes to", Remedy.FIX),
}

# The defaults; a policy's `thresholds` change them per host (ctx.thresholds).
WARN_FREE_BYTES = int(Thresholds().disk_warn_gb * 10**9)
BLOCK_FREE_BYTES = int(Thresholds().disk_block_gb * 10**9)

NOT_ML = "no GPU and no torch on this machine"

# Where a variable can be set without an SSH session seeing it.
HIDDEN_SOURCES = {
    "container": "container environment (/proc/1/environ)",
    "rp_environment": "/etc/rp_environment, which only interactive shells read",
}
HF_VARIABLES = ("HF_HUB_CACHE", "HF_HOME")
ORIGIN_TEXT = {
    "HF_HUB_CACHE": "set by HF_HUB_CACHE",
    "HF_HOME": "from HF_HOME",
    "XDG_CACHE_HOME": "from XDG_CACHE_HOME",
    "default": "the default, HF_HOME is not set",
}


# ---------------------------------------------------------------- shared helpers


def _persistent_base(facts: Facts, ctx: Context) -> str | None:
    """The folder to suggest for data that must survive: the provider's volume or the
    longest-lived data mount, else a home that survives a stop."""
    volumes = ctx.storage.volumes(Level.INSTANCE)
    if volumes:
        base: str = normalize(volumes[0].mount.mount_point)
        return base
    home = first_path(facts, "home")
    if home is not None:
        storage = ctx.storage.classify_path(home)
        if storage is not None and storage.level >= Level.INSTANCE:
            return home.resolved or home.path
    return None


def _export_fix(var: str, value: str, facts: Facts, ctx: Context) -> Fix:
    """Create the folder and set the variable where the next SSH session of this user reads it."""
    advice = "then log in again (the running shell keeps its old value)"
    if not ctx.profile.container_env_visible_over_ssh and ctx.profile.advice.env_persist:
        advice += "; " + ctx.profile.advice.env_persist.format(var=var)
    return Fix(steps=[FixStep.safe(f"mkdir -p {q(value)}"), persist_env(var, value, facts)], advice=advice)


def _no_place_fix(ctx: Context) -> Fix:
    return Fix(advice=f"nothing here outlives a restart: {ctx.profile.advice.no_volume} (see storage.no-volume)")


def _shown(path_facts: PathFacts) -> str:
    path = path_facts.resolved or path_facts.path
    return path if normalize(path_facts.path) == normalize(path) else f"{path_facts.path} (resolves to {path})"


# ---------------------------------------------------------------- storage.hf-cache


def check_hf_cache(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "storage.hf-cache"
    if not ctx.ml_host:
        return [skipped(cid, f"{NOT_ML}: the HF cache location does not matter here")]
    cache = first_path(facts, "hf_cache")
    if cache is None:
        return []
    path = cache.resolved or cache.path
    storage = ctx.storage.classify_path(cache)
    hidden = _hidden_hf_variable(facts)
    if hidden is not None:
        var, value, source = hidden
        target = value if _survives_stop(value, ctx) else _cache_dir(var, facts, ctx)
        lands = f" on the {storage.where}, {storage.fate}" if storage is not None else ""
        message = (
            f"{var}={value} is set only in the {HIDDEN_SOURCES[source]}, which SSH sessions do not see: "
            f"jobs started over SSH cache models in {path}{lands}"
        )
        fix = _export_fix(var, target, facts, ctx) if target else _no_place_fix(ctx)
        return [warn(cid, message, fix, subject=path)]
    if storage is None:
        return [skipped(cid, f"HF cache {path}: could not tell which filesystem holds it", subject=path)]
    origin = ORIGIN_TEXT.get(cache.origin or "", cache.origin or "")
    origin = f" ({origin})" if origin else ""
    if storage.level == Level.EPHEMERAL:
        var = "HF_HUB_CACHE" if cache.origin == "HF_HUB_CACHE" else "HF_HOME"
        target = _cache_dir(var, facts, ctx)
        message = (
            f"HF cache {path}{origin} is on the {storage.where}, {storage.fate}: "
            "every model is downloaded again after that"
        )
        return [
            warn(cid, message, _export_fix(var, target, facts, ctx) if target else _no_place_fix(ctx), subject=path)
        ]
    return [passed(cid, f"HF cache {path} is on the {storage.where}, {storage.fate}", subject=path)]


def _hidden_hf_variable(facts: Facts) -> tuple[str, str, str] | None:
    """(variable, value, source) of an HF cache variable set only where SSH sessions miss it."""
    for var in HF_VARIABLES:
        sources = env_by_source(facts, var)
        if "process" in sources:
            continue
        for source in HIDDEN_SOURCES:
            value = sources.get(source)
            if value:
                return var, value, source
    return None


def _survives_stop(path: str, ctx: Context) -> bool:
    mount = ctx.storage.mount_of(path)
    return mount is not None and ctx.storage.classify(mount).level >= Level.INSTANCE


def _cache_dir(var: str, facts: Facts, ctx: Context) -> str | None:
    base = _persistent_base(facts, ctx)
    if base is None:
        return None
    cache = posixpath.join(base, ".cache", "huggingface")
    return posixpath.join(cache, "hub") if var == "HF_HUB_CACHE" else cache


# ---------------------------------------------------------------- storage.output-dir


def check_output_dir(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "storage.output-dir"
    if not checks.output_dir:
        return []
    out = first_path(facts, "output_dir")
    if out is None:
        reason = collector_error(facts, "storage") or "the probe reported nothing for it"
        return [
            warn(
                cid,
                f"output dir {checks.output_dir} was not checked: {one_line(reason, 160)}",
                f"ls -ld {q(checks.output_dir)} && df -h {q(checks.output_dir)}",
                subject=checks.output_dir,
            )
        ]
    path = normalize(out.resolved or out.path)
    shown = _shown(out)
    storage = ctx.storage.classify_path(out)
    if storage is not None and storage.level == Level.EPHEMERAL:
        base = _persistent_base(facts, ctx)
        if base is None:
            fix = _no_place_fix(ctx)
        else:
            target = posixpath.join(base, _volume_name(path, facts.identity.home))
            fix = Fix(steps=[FixStep.safe(f"mkdir -p {q(target)}")])
            if out.exists:
                fix.advice = f"and point the job's output dir (and --output-dir) at {target}"
            else:
                # Nothing there yet: a link puts the job's path itself on the volume.
                link = f"mkdir -p {q(posixpath.dirname(path))} && {{ [ -L {q(path)} ] || ln -s -- {q(target)} {q(path)}; }}"
                fix.steps.append(FixStep.safe(link))
                fix.advice = f"{path} then leads to {target}; or point the job's output dir (and --output-dir) there"
        return [
            block(
                cid,
                f"output dir {shown} is on the {storage.where}, {storage.fate}: checkpoints written there are lost",
                fix,
                subject=path,
            )
        ]
    if out.error and not out.exists and not out.existing_ancestor:
        return [
            block(
                cid,
                f"output dir {shown} could not be checked: {one_line(out.error, 160)}",
                f"ls -ld {q(path)}",
                subject=path,
            )
        ]
    if not out.exists and not out.parent_exists:
        parent = posixpath.dirname(path)
        return [
            block(
                cid,
                f"output dir {shown} is missing, and so is its parent {parent}",
                Fix(steps=[FixStep.safe(f"mkdir -p {q(path)}")]),
                subject=path,
            )
        ]
    if not out.writable:
        return [
            block(
                cid,
                f"output dir {shown} is not writable{_read_only(storage)}",
                _writable_fix(out, facts, storage),
                subject=path,
            )
        ]
    where = f"is on the {storage.where}, {storage.fate}" if storage is not None else "is writable"
    return [passed(cid, f"output dir {shown} {where}", subject=path)]


def _volume_name(path: str, home: str | None) -> str:
    """The output dir's own folder on the volume, named from its path below the home folder
    (`~/ws/a/checkpoints` -> `ws-a-checkpoints`): two output dirs never share one folder, where
    one job's checkpoint rotation would delete the other's."""
    home = normalize(home).rstrip("/") if home else None
    if home and (path + "/").startswith(home + "/"):
        path = path[len(home) :]
    name = "-".join(part for part in path.split("/") if part not in ("", ".", ".."))
    return name if name not in ("", "root", "home", "tmp") else "outputs"


def _read_only(storage: Storage | None) -> str:
    return " (its filesystem is mounted read-only)" if storage is not None and "ro" in storage.mount.options else ""


def _writable_fix(out: PathFacts, facts: Facts, storage: Storage | None) -> Fix:
    path = normalize(out.resolved or out.path)
    if storage is not None and "ro" in storage.mount.options:
        return Fix(
            advice=f"choose an output dir on a writable filesystem (the mount at {storage.mount.mount_point} "
            "is read-only)"
        )
    owner = q(facts.identity.user) if facts.identity.user else "$(id -un)"
    root = sudo(facts)
    if out.exists:
        return Fix(steps=[FixStep.safe(f"{root}chown -R -- {owner} {q(path)}")])
    # Never a recursive chown of an ancestor (it may be / or someone else's data): create the folder, own it.
    return Fix(steps=[FixStep.safe(f"{root}mkdir -p {q(path)} && {root}chown -- {owner} {q(path)}")])


# ---------------------------------------------------------------- storage.no-volume


def check_no_volume(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "storage.no-volume"
    if not ctx.ml_host:
        return [skipped(cid, f"{NOT_ML}: pod storage not checked")]
    mounts = facts.storage.mounts
    if not mounts:
        return []
    title = ctx.profile.title
    root_mount = ctx.storage.mount_of("/")
    root = ctx.storage.classify(root_mount) if root_mount is not None else None
    findings = _declared_but_missing(ctx, root)
    if findings:
        return findings
    volumes = ctx.storage.volumes(Level.INSTANCE)
    if volumes:
        best = volumes[0]
        more = f" (and {len(volumes) - 1} more)" if len(volumes) > 1 else ""
        return [
            passed(
                cid, f"{best.mount.mount_point} is a {best.where}, {best.fate}{more}", subject=best.mount.mount_point
            )
        ]
    if root is not None and root.level == Level.PERSISTENT:
        return [passed(cid, f"the root filesystem is a {root.where}, {root.fate}")]
    lost = f"everything is on the {root.where}, {root.fate}" if root is not None else "nothing outlives the pod"
    if ctx.storage.provider_says_no_volume():
        workspace = first_path(facts, "workspace")
        plain = f"; {workspace.path} is a plain folder" if workspace is not None and workspace.exists else ""
        message = f"no volume: {title} reports none for this pod (volume size 0){plain}, {lost}"
    else:
        message = f"no persistent volume mounted: {lost}"
    return [
        warn(
            cid,
            message,
            Fix(advice=ctx.profile.advice.no_volume or "mount persistent storage and keep checkpoints on it"),
        )
    ]


def _declared_but_missing(ctx: Context, root: Storage | None) -> list[Finding]:
    """Storage the provider's API promises that the mount table does not show."""
    cid = "storage.no-volume"
    provider = ctx.provider
    if provider is None:
        return []
    title = ctx.profile.title
    on_root = f": data written there goes to the {root.where}, {root.fate}" if root is not None else ""
    declared = []
    if provider.volume_mount_path and not ctx.storage.provider_says_no_volume():
        size = f"a {provider.volume_gb:g} GB volume" if provider.volume_gb else "a volume"
        declared.append((provider.volume_mount_path, size))
    declared += [(path, "a persistent filesystem") for path in provider.persistent_paths]
    findings = []
    for path, what in declared:
        if ctx.storage.dedicated_mount(path) is None:
            findings.append(
                warn(
                    cid,
                    f"{title} reports {what} at {path}, but nothing is mounted there{on_root}",
                    Fix(
                        commands=[f"findmnt {q(path)}"],
                        advice=f"restart the pod so {title} mounts it, or check the volume in the provider's console",
                    ),
                    subject=path,
                )
            )
    return findings


# ---------------------------------------------------------------- storage.disk-headroom

ROLE_NAMES = {
    "hf_cache": "HF cache",
    "output_dir": "output dir",
    "workspace": "workspace",
    "volume": "volume",
    "extra": "extra path",
    "home": "home",
    "root": "system files",
}
# Roles whose filesystem takes the job's data; others only need to stay out of trouble.
DATA_ROLES = {"hf_cache", "output_dir", "workspace", "volume", "extra"}
# What a machine that is no GPU or torch host is still checked for: what the user named.
REQUESTED_ROLES = {"output_dir", "extra"}


def check_disk_headroom(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "storage.disk-headroom"
    failure = collector_error(facts, "storage")
    if failure is not None:
        return [
            warn(
                cid,
                f"filesystem facts were not collected: {one_line(failure, 160)}",
                Fix(
                    commands=["timeout 10 df -h"], advice="a network mount that does not answer hangs every disk query"
                ),
            )
        ]
    roles = set(ROLE_NAMES) if ctx.ml_host else REQUESTED_ROLES
    groups: dict[str, tuple[PathFacts, list[str]]] = {}
    for item in facts.storage.paths:
        if item.role not in roles or item.free_bytes is None:
            continue
        mount = ctx.storage.mount_for_path(item)
        key = normalize(mount.mount_point) if mount is not None else normalize(item.mount_point or item.path)
        names = groups.setdefault(key, (item, []))[1]
        if item.role not in names:
            names.append(item.role)
    if not groups:
        return [] if ctx.ml_host else [skipped(cid, f"{NOT_ML}: free space of pod storage not checked")]
    return [_headroom(point, item, names, facts, ctx) for point, (item, names) in groups.items()]


def _headroom(point: str, item: PathFacts, roles: list[str], facts: Facts, ctx: Context) -> Finding:
    cid = "storage.disk-headroom"
    mount = ctx.storage.mount_for_path(item)
    fs_type = mount.fs_type if mount is not None else (item.fs_type or "?")
    source = mount.source if mount is not None else item.mount_source
    device = f" on {source}" if source and source.startswith("/dev/") else ""
    holds = ", ".join(ROLE_NAMES[r] for r in roles)
    free, total = item.free_bytes or 0, item.total_bytes
    of_total = f" of {gb(total)}" if total else ""
    where = f"{point} ({fs_type}{device}: {holds})"
    holds_data = any(r in DATA_ROLES for r in roles)
    block_gb, warn_gb = ctx.thresholds.disk_block_gb, ctx.thresholds.disk_warn_gb
    if free < block_gb * 1e9:
        severity = block
    elif free < warn_gb * 1e9 and holds_data:
        severity = warn
    else:
        return passed(cid, f"{where}: {gb(free)} free{of_total}", subject=point)
    notes = ["delete what is not needed"]
    if "hf_cache" in roles:
        notes.append("`huggingface-cli delete-cache` removes cached models")
    if ctx.profile.advice.grow_volume:
        notes.append(ctx.profile.advice.grow_volume)
    fix = Fix(commands=[f"du -xh -d 2 {q(point)} 2>/dev/null | sort -h | tail -n 15"], advice="; ".join(notes))
    limit = f"{block_gb if severity is block else warn_gb:g} GB"
    return severity(cid, f"{where}: only {gb(free)} free{of_total} (under {limit})", fix, subject=point)


RULES = [check_hf_cache, check_output_dir, check_no_volume, check_disk_headroom]
