"""status_fix: the next command for a pod that could not be checked."""

from __future__ import annotations

from computefence.evaluate import status_fix
from computefence.evaluate.connection import HANDSHAKE
from computefence.models import Fix, HostStatus, ProviderInfo, StepKind, Target

POD = Target(name="pod-a", host="203.0.113.10", port=22022, user="root", identity_files=["~/.ssh/id_ed25519"])
LAMBDA = Target(name="gpu-1", host="198.51.100.7", provider=ProviderInfo(provider="lambda", pod_id="i-1"))


def test_ok_has_no_fix():
    assert status_fix(POD, HostStatus.OK) is None


def test_unreachable_gives_the_exact_ssh_command():
    fix = status_fix(POD, HostStatus.UNREACHABLE, "Connection refused")
    assert fix.commands == ["ssh -o ConnectTimeout=10 -p 22022 -i ~/.ssh/id_ed25519 -- root@203.0.113.10 true"]
    assert "nothing listens on port 22022" in fix.advice


def test_unreachable_runpod_pod_mentions_that_its_address_changes():
    pod = POD.model_copy(update={"provider": ProviderInfo(provider="runpod", pod_id="abc")})
    assert "new IP and port when they restart" in status_fix(pod, HostStatus.UNREACHABLE).advice


def test_host_key_mismatch_removes_the_bracketed_host_port_entry():
    fix = status_fix(POD, HostStatus.HOST_KEY_MISMATCH)
    assert fix.commands == ["ssh-keygen -f ~/.ssh/known_hosts -R '[203.0.113.10]:22022'"]
    assert "recreated" in fix.advice
    inventory_known = POD.model_copy(update={"known_hosts": ["/etc/cf/known_hosts", "~/.ssh/known_hosts"], "port": 22})
    fix = status_fix(inventory_known, HostStatus.HOST_KEY_MISMATCH)
    assert fix.commands == [
        "ssh-keygen -f /etc/cf/known_hosts -R 203.0.113.10",
        "ssh-keygen -f ~/.ssh/known_hosts -R 203.0.113.10",
    ]


def test_an_unknown_host_key_is_shown_to_compare_and_recorded_only_after():
    fix = status_fix(POD, HostStatus.HOST_KEY_UNKNOWN)
    # The one step shows the fingerprints; recording them is advice, for after the comparison.
    assert fix.commands == ["ssh-keyscan -p 22022 -- 203.0.113.10 | ssh-keygen -l -f -"]
    assert [step.kind for step in fix.steps] == [StepKind.INSPECT]
    assert "if they match, record them with `ssh-keyscan -p 22022 -- 203.0.113.10 >> ~/.ssh/known_hosts`" in fix.advice
    assert "--accept-new" in fix.advice


def test_auth_failure_uses_the_profile_user_when_none_is_configured():
    fix = status_fix(LAMBDA, HostStatus.AUTH_FAILED)
    assert fix.commands == ["ssh -v -- ubuntu@198.51.100.7 true"]
    assert "the login user on Lambda is ubuntu" in fix.advice and "SSH Keys in the Lambda console" in fix.advice


def test_no_python_installs_python3_with_sudo_for_a_non_root_user():
    assert status_fix(LAMBDA, HostStatus.NO_PYTHON).commands == [
        "ssh -- ubuntu@198.51.100.7 'sudo apt-get update && sudo apt-get install -y python3'"
    ]
    assert status_fix(POD, HostStatus.NO_PYTHON).commands == [
        "ssh -p 22022 -i ~/.ssh/id_ed25519 -- root@203.0.113.10 'apt-get update && apt-get install -y python3'"
    ]


def test_probe_failures_and_timeouts_run_the_probe_by_hand_under_python3():
    # The probe runs under the pod's python3 whatever the training interpreter is.
    pod = POD.model_copy(update={"python": "/opt/conda/bin/python", "proxy_jump": "bastion"})
    for status in (HostStatus.PROBE_FAILED, HostStatus.TIMEOUT):
        assert status_fix(pod, status).commands == [
            "computefence probe --print | ssh -p 22022 -i ~/.ssh/id_ed25519 -J bastion -- root@203.0.113.10 python3 -"
        ]


def test_host_key_mismatch_removes_the_key_from_the_file_that_holds_it():
    fix = status_fix(POD, HostStatus.HOST_KEY_MISMATCH, "/home/me/.config/computefence/known_hosts")
    assert fix.commands == ["ssh-keygen -f /home/me/.config/computefence/known_hosts -R '[203.0.113.10]:22022'"]


def test_connection_lost_looks_at_the_pods_kernel_log():
    assert status_fix(POD, HostStatus.CONNECTION_LOST).commands == [
        "ssh -p 22022 -i ~/.ssh/id_ed25519 -- root@203.0.113.10 'uptime; dmesg | tail -n 20'"
    ]


def test_not_checkable_runpod_pod_says_to_expose_tcp_22():
    pod = Target(name="p", host="", provider=ProviderInfo(provider="runpod", pod_id="abc"))
    fix = status_fix(pod, HostStatus.NOT_CHECKABLE)
    assert fix.commands == [] and "expose TCP port 22" in fix.advice
    given = pod.model_copy(update={"unreachable_fix": Fix(commands=["runpodctl start pod abc"])})
    assert status_fix(given, HostStatus.NOT_CHECKABLE) == Fix(commands=["runpodctl start pod abc"])


def test_vanished_and_cancelled():
    pod = POD.model_copy(update={"provider": ProviderInfo(provider="vast", pod_id="1")})
    assert status_fix(pod, HostStatus.VANISHED).commands == ["computefence inventory list --provider vast"]
    cancelled = status_fix(POD, HostStatus.CANCELLED)
    assert cancelled.commands == [] and "rerun" in cancelled.advice


def test_every_non_ok_status_has_a_fix():
    for status in HostStatus:
        if status is not HostStatus.OK:
            assert status_fix(POD, status), status


BEHIND = POD.model_copy(
    update={"host": "10.0.0.5", "port": 22, "proxy_command": "ssh -W %h:%p bastion", "ssh_config": "/etc/cf/ssh_config"}
)


def test_every_command_carries_the_proxy_command_and_the_config():
    for status in (
        HostStatus.UNREACHABLE,
        HostStatus.AUTH_FAILED,
        HostStatus.NO_PYTHON,
        HostStatus.PROBE_FAILED,
        HostStatus.HOST_KEY_UNKNOWN,
        HostStatus.CONNECTION_LOST,
    ):
        fix = status_fix(BEHIND, status)
        [command] = fix.commands
        assert "-F /etc/cf/ssh_config" in command and "-o 'ProxyCommand=ssh -W %h:%p bastion'" in command, status


def test_unknown_host_key_behind_a_hop_asks_ssh_instead_of_keyscan():
    fix = status_fix(BEHIND, HostStatus.HOST_KEY_UNKNOWN)
    assert fix.commands == [
        "ssh -o StrictHostKeyChecking=ask -F /etc/cf/ssh_config -i ~/.ssh/id_ed25519 "
        "-o 'ProxyCommand=ssh -W %h:%p bastion' -- root@10.0.0.5 true"
    ]


def test_unreachable_names_the_hop_or_the_missing_one():
    through = status_fix(
        BEHIND.model_copy(update={"proxy_command": None, "proxy_jump": "jump@bastion"}),
        HostStatus.UNREACHABLE,
        "cannot connect to 10.0.0.5: timed out",
    )
    assert "-J jump@bastion" in through.commands[0] and "reached through jump@bastion" in through.advice
    direct = BEHIND.model_copy(update={"proxy_command": None, "host": "gpu-behind"})
    fix = status_fix(direct, HostStatus.UNREACHABLE, "cannot resolve gpu-behind: Name or service not known")
    assert "no jump host is configured for it" in fix.advice and "-J BASTION" in fix.advice
    assert "no jump host" not in status_fix(POD, HostStatus.UNREACHABLE, "cannot connect: timed out").as_text()


def test_the_retry_waits_as_long_as_the_run_did():
    fix = status_fix(POD, HostStatus.UNREACHABLE, "timed out", connect_timeout=6)
    assert fix.commands == ["ssh -o ConnectTimeout=6 -p 22022 -i ~/.ssh/id_ed25519 -- root@203.0.113.10 true"]


def test_connection_lost_in_the_handshake_is_not_called_mid_probe():
    during = status_fix(POD, HostStatus.CONNECTION_LOST, HANDSHAKE)
    assert during.commands == ["ssh -v -p 22022 -i ~/.ssh/id_ed25519 -- root@203.0.113.10 true"]
    assert "before the login" in during.advice and "mid-probe" not in during.advice
    assert (
        "mid-probe" in status_fix(POD, HostStatus.CONNECTION_LOST, "the connection dropped while the probe ran").advice
    )
