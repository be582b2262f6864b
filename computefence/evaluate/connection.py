"""The fix for a pod that could not be checked: the command to try next, with the target's
own user, port, key, ssh_config and hop (-J or -o ProxyCommand=...), and what to know about it."""

from __future__ import annotations

import ipaddress

from computefence.connectors.interface import HANDSHAKE, REVOKED_DETAIL
from computefence.evaluate.context import q
from computefence.evaluate.profiles import Profile, get_profile
from computefence.models import Fix, FixStep, HostStatus, StepKind, Target

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
DEFAULT_CONNECT_TIMEOUT = 10.0
# Addresses only a local network reaches (RFC 1918, carrier-grade NAT, IPv6 unique local).
_PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)


def _path(path: str) -> str:
    """A file path for the shell, leaving a leading ~/ to expand."""
    return "~/" + q(path[2:]) if path.startswith("~/") else q(path)


def _user(target: Target, profile: Profile) -> str | None:
    return target.user or profile.ssh.user


def ssh_command(target: Target, profile: Profile, *options: str) -> str:
    """The ssh invocation that reaches `target` the way ComputeFence does."""
    parts = ["ssh", *options]
    if target.ssh_config:
        parts += ["-F", _path(target.ssh_config)]
    if target.port != 22:
        parts += ["-p", str(target.port)]
    if target.identity_files:
        parts += ["-i", _path(target.identity_files[0])]
    elif not target.default_identities:
        parts += ["-o", "IdentityFile=none"]
    if target.proxy_jump:
        parts += ["-J", q(target.proxy_jump)]
    if target.proxy_command:
        parts += ["-o", q(f"ProxyCommand={target.proxy_command}")]
    user = _user(target, profile)
    # After `--`, a host or user from an inventory or a provider can never be read as an option.
    parts += ["--", q(f"{user}@{target.host}" if user else target.host)]
    return " ".join(parts)


def _hop(target: Target) -> str | None:
    """The hop ssh goes through, in words: `jump@bastion` or `ProxyCommand nc %h %p`."""
    if target.proxy_jump:
        return target.proxy_jump
    return f"ProxyCommand {target.proxy_command}" if target.proxy_command else None


def _needs_a_hop(target: Target, detail: str | None) -> bool:
    """A direct connection to a name that does not resolve here, or to a private address:
    the usual sign of a pod that only a bastion can reach."""
    if detail is not None and "cannot resolve" in detail:
        return True
    try:
        address = ipaddress.ip_address(target.host)
    except ValueError:
        return False
    return any(address in network for network in _PRIVATE_NETWORKS)


def _known_hosts_name(target: Target) -> str:
    return target.host if target.port == 22 else f"[{target.host}]:{target.port}"


def _known_hosts_files(target: Target) -> list[str]:
    return target.known_hosts or [DEFAULT_KNOWN_HOSTS]


def status_fix(
    target: Target, status: HostStatus, detail: str | None = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
) -> Fix | None:
    """What to run (and know) for a pod that ended in `status`; None for ok. The ssh command
    to retry waits as long as the run did (--connect-timeout)."""
    if target.provider is not None and target.provider.provider == "slurm":
        from computefence.evaluate.checks.scheduler import slurm_status_fix

        return slurm_status_fix(target, status, detail)
    profile = get_profile(target.provider.provider if target.provider is not None else None)
    ssh = ssh_command(target, profile)
    title = profile.title
    user = _user(target, profile)
    if status is HostStatus.OK:
        return None
    if status is HostStatus.UNREACHABLE:
        refused = detail is not None and "refused" in detail.lower()
        hop = _hop(target)
        note = (
            f"nothing listens on port {target.port}: sshd is not running or the port is wrong"
            if refused
            else f"no answer from {target.host}:{target.port}: check the machine is running and the address is right"
        )
        if hop:
            note += f" (reached through {hop}: that hop must be up and able to reach it)"
        elif _needs_a_hop(target, detail):
            note += (
                "; no jump host is configured for it: if only a bastion reaches it, add ProxyJump "
                "(`-J BASTION`, `proxy_jump:` in the inventory) or a ProxyCommand"
            )
        if profile.advice.rediscover:
            note += f"; {profile.advice.rediscover}"
        wait = f"ConnectTimeout={max(1, round(connect_timeout))}"
        return Fix(steps=[FixStep.local(f"{ssh_command(target, profile, '-o', wait)} true")], advice=note)
    if status is HostStatus.TIMEOUT:
        return Fix(
            steps=[FixStep.local(f"computefence probe --print | {ssh} python3 -")],
            advice="shows where it stalls; if ssh itself hangs, the machine or its network is overloaded",
        )
    if status is HostStatus.AUTH_FAILED:
        note = (
            f"shows which keys are offered; add your public key to ~/.ssh/authorized_keys of {user or 'the login user'}"
        )
        if profile.advice.auth:
            note += f", or {profile.advice.auth}"
        if target.user is None and profile.ssh.user:
            note += f" (the login user on {title} is {profile.ssh.user})"
        return Fix(steps=[FixStep.local(f"{ssh_command(target, profile, '-v')} true")], advice=note)
    if status is HostStatus.HOST_KEY_UNKNOWN:
        if _hop(target):
            # ssh-keyscan cannot go through a hop; ssh itself shows the key and asks.
            return Fix(
                steps=[FixStep.local(f"{ssh_command(target, profile, '-o', 'StrictHostKeyChecking=ask')} true")],
                advice="ssh shows the fingerprint and asks before recording it: compare it with the "
                "provider's console first, or rerun with --accept-new",
            )
        port = f"-p {target.port} " if target.port != 22 else ""
        scan = f"ssh-keyscan {port}-- {q(target.host)}"
        # Shown, not recorded: a key is trusted only once a person has compared it.
        return Fix(
            steps=[FixStep.local(f"{scan} | ssh-keygen -l -f -", StepKind.INSPECT)],
            advice="compare these fingerprints with the provider's console; if they match, record them with "
            f"`{scan} >> {_path(_known_hosts_files(target)[0])}`, or rerun with --accept-new",
        )
    if status is HostStatus.HOST_KEY_MISMATCH and detail == REVOKED_DETAIL:
        # Removing the entry (ssh-keygen -R) would undo the revocation; --accept-new never applies.
        return Fix(
            advice="someone revoked this key on purpose: do not connect to this pod; ask who revoked it, "
            "and remove the @revoked line only if the revocation itself was a mistake"
        )
    if status is HostStatus.HOST_KEY_MISMATCH:
        # The runner passes the known_hosts file that holds the old key as `detail`.
        name = q(_known_hosts_name(target))
        files = [detail] if detail else _known_hosts_files(target)
        return Fix(
            steps=[FixStep.local(f"ssh-keygen -f {_path(f)} -R {name}", StepKind.DESTRUCTIVE) for f in files],
            advice="only if the pod was recreated (rented pods recycle IPs); otherwise the connection may be "
            "intercepted",
        )
    if status is HostStatus.CONNECTION_LOST and detail == HANDSHAKE:
        return Fix(
            steps=[FixStep.local(f"{ssh_command(target, profile, '-v')} true")],
            advice="the pod closed the connection before the login, twice: its sshd refuses new connections "
            "(MaxStartups) or a firewall cuts them; retry with a lower --concurrency",
        )
    if status is HostStatus.CONNECTION_LOST:
        return Fix(
            steps=[FixStep.local(f"{ssh} {q('uptime; dmesg | tail -n 20')}")],
            advice="the connection dropped mid-probe: the machine restarted, ran out of memory or lost its network",
        )
    if status is HostStatus.NO_PYTHON:
        root = "" if user == "root" else "sudo "
        install = q(f"{root}apt-get update && {root}apt-get install -y python3")
        note = "the probe needs python3 (or python) on the login shell's PATH"
        return Fix(steps=[FixStep.local(f"{ssh} {install}", StepKind.SAFE)], advice=note)
    if status is HostStatus.PROBE_FAILED:
        return Fix(
            steps=[FixStep.local(f"computefence probe --print | {ssh} python3 -")], advice="shows the probe's own error"
        )
    if status is HostStatus.NOT_CHECKABLE:
        return target.unreachable_fix or Fix(
            advice=profile.advice.not_checkable or "make the machine reachable over SSH"
        )
    if status is HostStatus.VANISHED:
        provider = target.provider.provider if target.provider is not None else profile.name
        return Fix(
            steps=[FixStep.local(f"computefence inventory list --provider {q(provider)}")],
            advice=f"the pod is gone from {title}; check what is running now",
        )
    return Fix(advice="rerun the check; it was cancelled before this pod finished")
