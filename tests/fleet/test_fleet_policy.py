"""computefence.yaml, the baseline lock and env.outlier end to end against real sshd pods."""

from __future__ import annotations

import json
import time

import pytest
from fleet_helpers import HEALTHY, host_entry, write_inventory
from sshfleet import PodSpec

from computefence.models import BaselineLock, Severity

pytestmark = pytest.mark.sshd

SITE = "/usr/lib/python3/dist-packages"


def installed(**versions: str) -> dict[str, str]:
    """dist-info folders as pip leaves them: what importlib.metadata reads in the pod's python."""
    return {
        f"{SITE}/{name.replace('-', '_')}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        for name, version in versions.items()
    }


def pod(name: str, **versions: str) -> PodSpec:
    return PodSpec(name, **{**HEALTHY, "files": installed(**versions)})


def findings(host, check: str):
    return [f for f in host.findings if f.check == check]


def test_requirements_and_hardware_block_with_fixes_for_the_pods_own_interpreter(
    ssh_fleet, start_pods, run_cli, tmp_path
):
    (old,) = start_pods(pod("old-transformers", transformers="4.41.2"))
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(old, tags=["train-8x"])], trusted=[old])
    policy = tmp_path / "computefence.yaml"
    policy.write_text(
        'requirements: {transformers: ">=4.48", Flash_Attn: "*", python: ">=3.8"}\n'
        'hardware: {gpu_model: "*H100*", gpu_count: 1}\n'
        "overrides:\n  - match: {tag: train-8x}\n    hardware: {gpu_count: 8}\n"
    )

    result = run_cli("fleet", "check", "-i", str(inventory), "--policy", str(policy), "--format", "json")

    assert result.code == 1, result.stderr
    host = result.host(old.name)
    python = host.facts.torch.python_executable
    assert python and python.startswith("/")
    requirement = {f.subject: f for f in findings(host, "policy.requirement")}
    assert requirement["transformers"].severity is Severity.BLOCK
    assert requirement["transformers"].message == "transformers 4.41.2 does not satisfy >=4.48"
    assert requirement["transformers"].fix.commands == [f"{python} -m pip install 'transformers>=4.48'"]
    assert requirement["flash-attn"].severity is Severity.BLOCK
    assert "flash-attn is not installed" in requirement["flash-attn"].message
    assert requirement["python"].severity is Severity.PASS
    hardware = {f.subject: f for f in findings(host, "policy.hardware")}
    assert hardware["gpu_model"].severity is Severity.PASS
    assert hardware["gpu_count"].message == "1 GPU here, the policy expects gpu_count 8"
    report = result.report
    assert report.policy.path == str(policy) and len(report.policy.sha256) == 64


def test_custom_checks_pass_fail_time_out_flood_and_die_by_signal_in_one_session(
    ssh_fleet, start_pods, run_cli, tmp_path
):
    (target,) = start_pods(pod("custom"))
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(target)], trusted=[target])
    policy = tmp_path / "computefence.yaml"
    policy.write_text("""\
custom:
  - {id: passes, run: "echo Logged in as $(id -un)", expect: {stdout_matches: "Logged in as root"}}
  - {id: fails, run: "echo wandb: not logged in >&2; exit 3", fix: wandb login}
  - {id: hangs, run: "sleep 300", timeout: 1}
  - {id: floods, run: "head -c 10000000 /dev/zero | tr '\\\\0' x"}
  - {id: crashes, run: "kill -SEGV $$"}
  - {id: quoted, run: "printf '%s|' \\"a b\\" 'c;d'", expect: {stdout_matches: "^a b\\\\|c;d\\\\|$"}}
""")
    started = time.monotonic()

    result = run_cli("fleet", "check", "-i", str(inventory), "--policy", str(policy), "--format", "json")

    assert time.monotonic() - started < 30
    host = result.host(target.name)
    custom = {f.check: f for f in host.findings if f.check.startswith("custom.")}
    assert custom["custom.passes"].severity is Severity.PASS
    assert custom["custom.quoted"].severity is Severity.PASS
    assert custom["custom.fails"].severity is Severity.BLOCK and custom["custom.fails"].fix.commands == ["wandb login"]
    assert custom["custom.fails"].message.endswith("exited 3 (expected 0): wandb: not logged in")
    assert "did not finish within its 1 s timeout" in custom["custom.hangs"].message
    assert "killed by signal 11" in custom["custom.crashes"].message
    assert custom["custom.floods"].severity is Severity.PASS
    flood = next(r for r in host.facts.custom if r.id == "floods")
    assert flood.output_truncated and flood.stdout == "x" * 512
    # Killed past its timeout with its process group: nothing of it is left on the pod.
    assert not [cmd for _, cmd in target.pid_namespace_processes() if "sleep 300" in cmd]
    # One SSH session did it all: the probe's.
    assert "Accepted publickey" in target.log.read_text()
    assert target.log.read_text().count("Accepted publickey") == 1


def test_snapshot_from_one_pod_then_a_drifted_pod_names_exactly_the_moved_fields(
    ssh_fleet, start_pods, run_cli, tmp_path
):
    good, drifted = start_pods(
        pod("good", transformers="4.48.0", **{"flash-attn": "2.6.3"}), pod("drifted", transformers="4.41.2")
    )
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(good), host_entry(drifted)], trusted=[good, drifted]
    )
    lock_path = tmp_path / "computefence.lock.json"

    snap = run_cli("fleet", "snapshot", "-i", str(inventory), "--from", good.name, "-o", str(lock_path), "--no-policy")

    assert snap.code == 0, snap.stderr
    assert "transformers: recorded 4.48.0; differs on drifted 4.41.2" in snap.stderr
    lock = BaselineLock.model_validate_json(lock_path.read_text())
    assert lock.reference == f"pod {good.name}" and lock.pods == sorted([good.name, drifted.name])
    assert lock.fingerprint["transformers"] == "4.48.0" and lock.fingerprint["torch-cuda"] == "12.4"
    assert list(json.loads(lock_path.read_text())) == [
        "schema_version",
        "tool_version",
        "generated_at",
        "reference",
        "pods",
        "fingerprint",
        "differing",
    ]

    result = run_cli(
        "fleet", "check", "-i", str(inventory), "--baseline", str(lock_path), "--no-policy", "--format", "json"
    )

    moved = findings(result.host(drifted.name), "env.drift")
    assert [f.message for f in moved] == [
        "differs from the baseline: flash-attn 2.6.3 → (not installed); transformers 4.48.0 → 4.41.2"
    ]
    assert moved[0].severity is Severity.WARN
    assert findings(result.host(good.name), "env.drift")[0].severity is Severity.PASS
    assert result.report.baseline.path == str(lock_path)


def test_the_odd_pod_out_among_five(ssh_fleet, start_pods, run_cli, tmp_path):
    pods = start_pods(*(pod(f"same-{i}", transformers="4.48.0") for i in range(4)), pod("odd", transformers="4.41.2"))
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(p) for p in pods], trusted=pods)

    result = run_cli("fleet", "check", "-i", str(inventory), "--no-policy", "--format", "json")

    outliers = {h.name: [f.message for f in findings(h, "env.outlier")] for h in result.report.hosts}
    assert outliers == {
        **{f"same-{i}": [] for i in range(4)},
        "odd": ["transformers 4.41.2 here; 4 of 5 pods have 4.48.0"],
    }
    rich = run_cli("fleet", "check", "-i", str(inventory), "--no-policy")
    drift = rich.stdout[rich.stdout.index("Version drift") :]
    assert "4.48.0" in drift and "4 pods" in drift and "odd" in drift and "same-0" not in drift
