"""A pod only a bastion can reach, checked through ProxyJump and through
`ProxyCommand ssh -W %h:%p bastion`, and without the hop.

The pod's name resolves only in the bastion's /etc/hosts (a `.invalid` name resolves nowhere
else), so a direct connection cannot reach it, as with a pod on a private network.
"""

from __future__ import annotations

import json

import pytest
from fleet_helpers import HEALTHY
from sshfleet import PodSpec, closed_port

pytestmark = pytest.mark.sshd

BEHIND = "gpu-behind.computefence-test.invalid"


@pytest.fixture(scope="module")
def bastion_setup(ssh_fleet, tmp_path_factory):
    pod, bastion = ssh_fleet.start(
        [
            PodSpec("behind", **HEALTHY),
            PodSpec("bastion", files={"/etc/hosts": f"127.0.0.1 localhost\n127.0.0.1 {BEHIND}\n"}),
        ]
    )
    base = tmp_path_factory.mktemp("bastion")
    known = base / "known_hosts"

    def key(p) -> str:
        return " ".join(p.host_key.export_public_key("openssh").decode().split()[:2])

    known.write_text(f"[{BEHIND}]:{pod.port} {key(pod)}\n[{bastion.host}]:{bastion.port} {key(bastion)}\n")
    config = base / "ssh_config"
    common = (
        f"  Port {pod.port}\n  User root\n  IdentityFile {ssh_fleet.identity_file}\n"
        f"  UserKnownHostsFile {known}\n  BatchMode yes\n"
    )
    config.write_text(
        f"Host bastion\n  HostName {bastion.host}\n  Port {bastion.port}\n  User root\n"
        f"  IdentityFile {ssh_fleet.identity_file}\n  UserKnownHostsFile {known}\n  BatchMode yes\n"
        f"Host gpu-jump\n  HostName {BEHIND}\n{common}  ProxyJump bastion\n"
        f"Host gpu-command\n  HostName {BEHIND}\n{common}  ProxyCommand ssh -F {config} -W %h:%p bastion\n"
        f"Host gpu-direct\n  HostName {BEHIND}\n{common}"
        f"Host gpu-dead-hop\n  HostName {BEHIND}\n{common}  ProxyJump root@127.0.0.1:{closed_port()}\n"
    )
    return config


def test_through_proxyjump_and_proxycommand_ok_and_without_the_hop_unreachable(run_cli, bastion_setup):
    config = bastion_setup
    listed = run_cli("inventory", "list", "--ssh-config", str(config), "-H", "gpu-*", "--format", "json")
    via = {t["name"]: (t["proxy_jump"], t["proxy_command"]) for t in json.loads(listed.stdout)["targets"]}
    assert via["gpu-jump"] == ("bastion", None) and via["gpu-direct"] == (None, None)
    assert via["gpu-command"] == (None, f"ssh -F {config} -W %h:%p bastion")

    ready = config.parent / "ready.ssh"
    result = run_cli(
        "fleet",
        "check",
        "--ssh-config",
        str(config),
        "-H",
        "gpu-*",
        "--format",
        "json",
        "--connect-timeout",
        "10",
        "--healthy-out",
        str(ready),
        "--healthy-format",
        "ssh",
    )
    hosts = {h.name: h for h in result.report.hosts}
    assert hosts["gpu-jump"].status.value == "ok", hosts["gpu-jump"].reason
    assert hosts["gpu-command"].status.value == "ok", hosts["gpu-command"].reason
    direct = hosts["gpu-direct"]
    assert direct.status.value == "unreachable" and f"cannot resolve {BEHIND}" in direct.reason
    # The fix reaches it the same way and says which hop is missing
    (command,) = direct.fix.commands
    assert command.startswith(f"ssh -o ConnectTimeout=10 -F {config} -p {direct.port} ")
    assert "no jump host is configured for it" in direct.fix.advice and "-J BASTION" in direct.fix.advice
    # A hop that is down is named in the reason, and the fix goes through it
    dead = hosts["gpu-dead-hop"]
    assert dead.status.value == "unreachable" and "(connecting through root@[127.0.0.1]:" in dead.reason
    assert "-J 'root@[127.0.0.1]:" in dead.fix.commands[0] and "reached through root@[127.0.0.1]:" in dead.fix.advice
    # The launch gate's ssh lines go through the same hops
    port = hosts["gpu-jump"].port
    assert sorted(ready.read_text().splitlines()) == sorted(
        [
            f"root@{BEHIND} -p {port} -F {config} -J bastion",
            f"root@{BEHIND} -p {port} -F {config} -o 'ProxyCommand=ssh -F {config} -W %h:%p bastion'",
        ]
    )
