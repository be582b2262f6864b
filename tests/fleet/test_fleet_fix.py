"""`computefence fleet fix` end to end against real sshd pods: every safe fix proven (the
finding gone after the re-probe, a second run of its steps changing no byte), a plan that
writes nothing, steps that fail, hang, need --allow-disruptive, get Ctrl-C or lose their
connection, and one pod's trouble never reaching another's result."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import asyncssh
import pytest
from fleet_helpers import CLI, HEALTHY, cli_subprocess_env, host_entry, write_inventory
from sshfleet import Pod, PodSpec

from computefence.demo import fakes

pytestmark = pytest.mark.sshd

RUNPOD = {"RUNPOD_POD_ID": "abc123xyz"}
# A pod with nothing wrong that the checks below look at: HF cache and checkpoints on the volume.
READY = dict(HEALTHY, shm_size="16g")
ACCELERATE_CONFIG = "/root/accelerate.yaml"
# A `mkdir` that never finishes: the pod's own mkdir is shadowed by /usr/local/bin.
HANGING_MKDIR = {"/usr/local/bin/mkdir": "#!/bin/sh\nexec sleep 600\n"}

STDLIB = subprocess.check_output(
    ["/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"], text=True
).strip()


def with_pip_shim(spec: PodSpec, **builds: str) -> PodSpec:
    """The pod's python gets tests/fleet/pip_shim.py as its pip (the stdlib folder comes before the
    real pip on sys.path), with the recorded torch builds it installs by index tag (cu124: "cu124")."""
    files = dict(spec.files)
    files[f"{STDLIB}/pip/__init__.py"] = ""
    files[f"{STDLIB}/pip/__main__.py"] = (Path(__file__).parent / "pip_shim.py").read_text()
    for tag, scenario in builds.items():
        with tempfile.TemporaryDirectory() as tmp:
            fakes.write_fake_torch(Path(tmp), scenario)
            for path in Path(tmp).rglob("*"):
                if path.is_file():
                    files[f"/opt/computefence-fakes/builds/{tag}/{path.relative_to(tmp)}"] = path.read_text()
    spec.files = files
    return spec


REQUIRES_TOKENIZERS = "requirements:\n  tokenizers: '>=0.19'\n"
CKPT = {"output_dir": "/workspace/checkpoints"}

# check id -> (the pod with that fault, the inventory checks it needs, a computefence.yaml or None).
# Every check that can emit a safe pod step must be here (test_fix_step_registry.py keeps it so).
PROOFS: dict[str, tuple[PodSpec, dict, str | None]] = {
    "storage.hf-cache": (
        # HF_HOME unset: the default cache is on the container disk.
        PodSpec("proof-hf", nvidia_smi="h100x1", torch="cu124", workspace_size="20G", env=RUNPOD, shm_size="16g"),
        CKPT,
        None,
    ),
    "storage.output-dir": (
        PodSpec("proof-ckpt", **READY),
        {"output_dir": "/workspace/runs/7/ckpt"},
        None,
    ),
    "accelerate.num-processes": (
        PodSpec(
            "proof-accel",
            **READY,
            files={
                ACCELERATE_CONFIG: "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 4\n"
            },
        ),
        {"output_dir": "/workspace/checkpoints", "accelerate_config": ACCELERATE_CONFIG},
        None,
    ),
    "gpu.count-mismatch": (
        # Above Ubuntu's early return, so every SSH session (and job) gets it.
        PodSpec(
            "proof-visible",
            **dict(READY, nvidia_smi="a100x2", torch="cu121-h100"),
            bashrc="export CUDA_VISIBLE_DEVICES=0\n",
        ),
        CKPT,
        None,
    ),
    "gpu.cuda-unavailable": (
        PodSpec("proof-hidden", **READY, bashrc="export CUDA_VISIBLE_DEVICES=\n"),
        CKPT,
        None,
    ),
    "system.shm": (
        PodSpec("proof-shm", **dict(READY, shm_size="64m")),
        CKPT,
        None,
    ),
    # Package and torch fixes, with the pod's training interpreter.
    "gpu.torch-cpu-build": (
        with_pip_shim(PodSpec("proof-cpu-torch", **dict(READY, torch="cpu")), cu124="cu124"),
        CKPT,
        None,
    ),
    "python.torch-missing": (
        with_pip_shim(PodSpec("proof-no-torch", **{k: v for k, v in READY.items() if k != "torch"}), cu124="cu124"),
        CKPT,
        None,
    ),
    "gpu.driver-too-old": (
        with_pip_shim(PodSpec("proof-old-driver", **dict(READY, nvidia_smi="rtx4090x1-driver535")), cu121="cu121-h100"),
        CKPT,
        None,
    ),
    "gpu.arch-unsupported": (
        with_pip_shim(PodSpec("proof-no-sm90", **dict(READY, torch="cu117-no-sm90")), cu124="cu124", cu118="cu124"),
        CKPT,
        None,
    ),
    "policy.requirement": (with_pip_shim(PodSpec("proof-requirement", **READY)), CKPT, REQUIRES_TOKENIZERS),
}


def _fix(run_cli, inventory, *args: str):
    result = run_cli("fleet", "fix", "-i", str(inventory), "--format", "json", *args)
    return result, json.loads(result.stdout)


_fix_cli = _fix


def _host(document: dict, name: str) -> dict:
    return next(h for h in document["hosts"] if h["name"] == name)


def content(pod: Pod) -> list[str]:
    """Every writable place of the pod by content: file hashes, link targets, modes."""
    roots = [str(pod.upper), str(pod.merged / "tmp"), str(pod.merged / "dev/shm")]
    if pod.spec.workspace_size:
        roots.append(str(pod.merged / "workspace"))
    script = (
        'find "$@" -xdev -type f -exec sha256sum {} + ; find "$@" -xdev ! -type f -printf "%p %y %l %m\\n"; '
        "findmnt -n -o OPTIONS " + str(pod.merged / "dev/shm")
    )
    return sorted(pod.in_namespace(["sh", "-c", script, "sh", *roots]).splitlines())


async def _run_again(ssh_fleet, pod: Pod, commands: list[str]) -> None:
    async with asyncssh.connect(
        pod.host, port=pod.port, username="root", client_keys=[str(ssh_fleet.identity_file)], known_hosts=None
    ) as conn:
        for command in commands:
            done = await conn.run(command)
            assert done.exit_status == 0, (command, done.stderr)


@pytest.mark.parametrize("check", sorted(PROOFS))
def test_safe_fix_is_proven_by_a_re_probe_and_changes_nothing_the_second_time(
    check, ssh_fleet, start_pods, run_cli, tmp_path
):
    spec, checks, policy = PROOFS[check]
    (pod,) = start_pods(spec)
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks=checks)
    if policy is not None:
        (tmp_path / "computefence.yaml").write_text(policy)
        inventory_args = ("--policy", str(tmp_path / "computefence.yaml"))
    else:
        inventory_args = ("--no-policy",)

    def _fix(run_cli, inventory, *args):
        return _fix_cli(run_cli, inventory, *inventory_args, *args)

    plan, planned = _fix(run_cli, inventory, "--only", check)
    assert plan.code == 1 and [r["outcome"] for r in _host(planned, pod.name)["results"]] == ["planned"]

    applied, document = _fix(run_cli, inventory, "--only", check, "--apply", "--yes")
    host = _host(document, pod.name)
    (result,) = host["results"]
    assert result["outcome"] == "fixed" and result["after"] is None, json.dumps(host, indent=1)
    assert applied.code == 0 and document["summary"]["fixed"] == 1
    ran = [s["run"] for s in host["steps"] if s["status"] == "ran"]
    assert ran and all(s["kind"] == "safe" and s["on"] == "pod" for s in host["steps"] if s["status"] == "ran")
    fixed_state = content(pod)

    again, second = _fix(run_cli, inventory, "--only", check, "--apply", "--yes")
    assert again.code == 0 and _host(second, pod.name)["steps"] == []
    # The steps themselves, run a second time, leave every byte as the first run did.
    asyncio.run(_run_again(ssh_fleet, pod, ran))
    assert content(pod) == fixed_state


def test_hf_home_lands_above_the_early_return_of_an_ubuntu_bashrc(ssh_fleet, start_pods, run_cli, tmp_path):
    ubuntu = "# ~/.bashrc\ncase $- in\n    *i*) ;;\n      *) return;;\nesac\nexport HF_HOME=/root/late\n"
    spec = PodSpec("ubuntu-bashrc", nvidia_smi="h100x1", torch="cu124", workspace_size="20G", env=RUNPOD, bashrc=ubuntu)
    (pod,) = start_pods(spec)
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])

    result, document = _fix(run_cli, inventory, "--only", "storage.hf-cache", "--apply", "--yes")

    assert result.code == 0 and _host(document, pod.name)["results"][0]["outcome"] == "fixed", document
    bashrc = pod.in_namespace(["cat", str(pod.merged) + "/root/.bashrc"])
    assert bashrc == "export HF_HOME=/workspace/.cache/huggingface\n" + ubuntu
    assert pod.in_namespace(["test", "-d", str(pod.merged) + "/workspace/.cache/huggingface"]) == ""


def test_a_plan_writes_nothing_on_the_pod(ssh_fleet, start_pods, run_cli, tmp_path):
    pods = start_pods(PROOFS["storage.hf-cache"][0], PROOFS["accelerate.num-processes"][0])
    checks = PROOFS["accelerate.num-processes"][1]
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(p) for p in pods], trusted=pods, checks=checks
    )
    before = {pod.name: pod.filesystem_snapshot() for pod in pods}

    result, document = _fix(run_cli, inventory)

    assert result.code == 1 and document["applied"] is False
    assert all(
        s["status"] in ("planned", "skipped") and s["exit"] is None for h in document["hosts"] for s in h["steps"]
    )
    assert {pod.name: pod.filesystem_snapshot() for pod in pods} == before
    text = run_cli("fleet", "fix", "-i", str(inventory))
    assert "would run, in order:" in text.stdout and "will not run:" in text.stdout
    assert "nothing was changed; --apply runs the steps" in text.stdout
    assert {pod.name: pod.filesystem_snapshot() for pod in pods} == before


def test_apply_without_a_terminal_needs_yes_and_changes_nothing(ssh_fleet, start_pods, run_cli, tmp_path):
    (pod,) = start_pods(PROOFS["storage.hf-cache"][0])
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    before = pod.filesystem_snapshot()

    result = run_cli("fleet", "fix", "-i", str(inventory), "--apply")

    assert result.code == 2 and "needs --yes" in result.stderr
    assert pod.filesystem_snapshot() == before


def test_a_failing_step_stops_its_fix_and_another_pod_is_still_fixed(ssh_fleet, start_pods, run_cli, tmp_path):
    # /workspace/runs is a file: `mkdir -p /workspace/runs/7/ckpt` fails.
    broken, fine = start_pods(PodSpec("ckpt-blocked", **READY), PROOFS["storage.output-dir"][0])
    broken.in_namespace(["sh", "-c", 'echo x > "$1"', "sh", str(broken.merged) + "/workspace/runs"])
    inventory = write_inventory(
        tmp_path / "pods.yaml",
        ssh_fleet,
        [host_entry(broken), host_entry(fine)],
        trusted=[broken, fine],
        checks=PROOFS["storage.output-dir"][1],
    )
    logs = tmp_path / "logs"

    result, document = _fix(run_cli, inventory, "--only", "storage.output-dir", "--apply", "--yes", "--log", str(logs))

    assert result.code == 1
    failed = _host(document, broken.name)
    (step,) = failed["steps"]
    assert step["status"] == "failed" and step["exit"] != 0 and "Not a directory" in step["output_tail"]
    assert failed["results"][0]["outcome"] == "failed" and failed["results"][0]["after"] == "block"
    assert _host(document, fine.name)["results"][0]["outcome"] == "fixed"
    assert document["summary"] == {**document["summary"], "fixed": 1, "failed": 1}
    transcript = (logs / f"{broken.name}.log").read_text()
    assert "$ mkdir -p /workspace/runs/7/ckpt" in transcript and "failed, exit 1" in transcript


def test_a_step_past_step_timeout_is_stopped_on_the_pod(ssh_fleet, start_pods, run_cli, tmp_path):
    (pod,) = start_pods(PodSpec("ckpt-hangs", **dict(READY, files=HANGING_MKDIR)))
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks=PROOFS["storage.output-dir"][1]
    )
    started = time.monotonic()

    result, document = _fix(
        run_cli, inventory, "--only", "storage.output-dir", "--apply", "--yes", "--step-timeout", "2"
    )

    assert result.code == 1 and time.monotonic() - started < 45
    (step,) = _host(document, pod.name)["steps"]
    assert step["status"] == "timeout" and "--step-timeout 2 s" in step["reason"]
    assert _host(document, pod.name)["results"][0]["outcome"] == "failed"
    assert not [cmd for _, cmd in pod.pid_namespace_processes() if "sleep 600" in cmd]


def test_a_pod_whose_gpus_are_in_use_is_refused(ssh_fleet, start_pods, run_cli, tmp_path):
    spec = PodSpec("busy-gpu", nvidia_smi="h100x1-busy", torch="cu124", workspace_size="20G", env=RUNPOD)
    (pod,) = start_pods(spec)
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    before = pod.filesystem_snapshot()

    result, document = _fix(run_cli, inventory, "--only", "storage.hf-cache", "--apply", "--yes")

    host = _host(document, pod.name)
    assert result.code == 1 and "a job may be running" in host["refused"]
    assert host["results"][0]["outcome"] == "skipped" and all(s["status"] == "skipped" for s in host["steps"])
    assert pod.filesystem_snapshot() == before


def test_ctrl_c_during_a_step_terminates_it_and_reports_what_ran(ssh_fleet, start_pods, home, tmp_path):
    (pod,) = start_pods(PodSpec("ckpt-ctrl-c", **dict(READY, files=HANGING_MKDIR)))
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks=PROOFS["storage.output-dir"][1]
    )
    out = tmp_path / "fix.json"
    command = [*CLI, "fleet", "fix", "-i", str(inventory), "--only", "storage.output-dir", "--apply", "--yes"]
    process = subprocess.Popen(
        [*command, "--format", "json", "--output", str(out)],
        env=cli_subprocess_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sleeper = pod.wait_for_process("sleep 600", timeout=60)

    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)

    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "--output" in stderr and not out.exists()
    assert sleeper not in [pid for pid, _ in pod.pid_namespace_processes()]


def test_a_pod_that_drops_the_connection_mid_apply_spoils_no_other(ssh_fleet, start_pods, run_cli, tmp_path):
    dropping, fine = start_pods(
        PodSpec("ckpt-drops", **dict(READY, files=HANGING_MKDIR)), PROOFS["storage.output-dir"][0]
    )
    inventory = write_inventory(
        tmp_path / "pods.yaml",
        ssh_fleet,
        [host_entry(dropping), host_entry(fine)],
        trusted=[dropping, fine],
        checks=PROOFS["storage.output-dir"][1],
    )

    def stop_when_hanging() -> None:
        dropping.wait_for_process("sleep 600", timeout=60)
        dropping.stop()

    import threading

    killer = threading.Thread(target=stop_when_hanging)
    killer.start()
    result, document = _fix(run_cli, inventory, "--only", "storage.output-dir", "--apply", "--yes")
    killer.join()

    dropped = _host(document, dropping.name)
    assert result.code == 1
    assert dropped["steps"][0]["status"] == "failed" and "connection" in dropped["steps"][0]["reason"]
    assert dropped["results"][0]["outcome"] == "failed"
    assert _host(document, fine.name)["results"][0]["outcome"] == "fixed"


def test_a_disruptive_step_is_skipped_without_the_flag_and_run_with_it(ssh_fleet, start_pods, run_cli, tmp_path):
    # Not on a provider: the fix is to start nv-fabricmanager on the machine itself.
    systemctl = {"/usr/local/bin/systemctl": '#!/bin/sh\necho "$@" >> /tmp/systemctl-calls\n'}
    spec = PodSpec(
        "fabric-down",
        **dict(READY, nvidia_smi="h100x8-fabric-manager-stopped", env={"HF_HOME": "/workspace/hf"}, files=systemctl),
    )
    (pod,) = start_pods(spec)
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks=CKPT)
    calls = str(pod.merged) + "/tmp/systemctl-calls"

    held, document = _fix(run_cli, inventory, "--only", "gpu.fabric-manager", "--apply", "--yes")

    restart = next(s for s in _host(document, pod.name)["steps"] if s["kind"] == "disruptive")
    assert restart["status"] == "skipped" and "--allow-disruptive" in restart["reason"]
    assert held.code == 1 and _host(document, pod.name)["results"][0]["outcome"] == "skipped"
    assert pod.in_namespace(["sh", "-c", 'test -e "$1" && echo yes || echo no', "sh", calls]).strip() == "no"

    allowed, document = _fix(
        run_cli, inventory, "--only", "gpu.fabric-manager", "--apply", "--yes", "--allow-disruptive"
    )

    restart = next(s for s in _host(document, pod.name)["steps"] if s["kind"] == "disruptive")
    assert restart["status"] == "ran" and restart["run"] == "systemctl start nvidia-fabricmanager"
    assert pod.in_namespace(["cat", calls]) == "start nvidia-fabricmanager\n"
    # The fake driver still reports the fabric down: the step ran, the finding stays, and says so.
    assert allowed.code == 1 and _host(document, pod.name)["results"][0]["outcome"] == "still_failing"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--yes"], "--yes needs --apply"),
        (["--allow-disruptive"], "--allow-disruptive needs --apply"),
        (["--format", "junit"], "junit"),
        (["--apply", "--yes", "--log", "/proc/version"], "--log /proc/version: not a directory"),
        (["--apply", "--yes", "--log", "no/such/logs"], "--log no/such/logs: directory no/such does not exist"),
        (["-o", "no/such/fix.json"], "--output no/such/fix.json: directory no/such does not exist"),
    ],
)
def test_usage_errors_exit_2_before_any_pod_is_contacted(run_cli, tmp_path, monkeypatch, argv, says):
    inventory = tmp_path / "pods.yaml"
    # An address nothing answers on: a run that got as far as connecting would say so instead.
    inventory.write_text("hosts:\n  - {name: nowhere, host: 192.0.2.1, port: 9}\n")

    monkeypatch.chdir(tmp_path)
    result = run_cli("fleet", "fix", "-i", str(inventory), *argv)

    assert result.code == 2 and says in result.stderr
    assert not (tmp_path / "no").exists()  # no folder made for a run that never started


def test_env_drift_fix_is_proven_against_a_baseline_lock(ssh_fleet, start_pods, run_cli, tmp_path):
    # The pod that worked (torch cu124) makes the lock; the other runs a cu121 build.
    reference, drifted = start_pods(
        PodSpec("drift-reference", **READY),
        with_pip_shim(PodSpec("drift-cu121", **dict(READY, torch="cu121-h100")), cu124="cu124"),
    )
    pods = [reference, drifted]
    both = write_inventory(tmp_path / "both.yaml", ssh_fleet, [host_entry(p) for p in pods], trusted=pods, checks=CKPT)
    lock = tmp_path / "computefence.lock.json"
    made = run_cli("fleet", "snapshot", "-i", str(both), "--from", reference.name, "-o", str(lock))
    assert made.code == 0, made.stderr
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(drifted)], trusted=[drifted], checks=CKPT
    )
    args = ("--no-policy", "--baseline", str(lock), "--only", "env.drift")

    applied, document = _fix(run_cli, inventory, *args, "--apply", "--yes")

    host = _host(document, drifted.name)
    assert applied.code == 0 and [r["outcome"] for r in host["results"]] == ["fixed"], json.dumps(host, indent=1)
    ran = [s["run"] for s in host["steps"] if s["status"] == "ran"]
    assert ran and all("--index-url https://download.pytorch.org/whl/cu124" in r for r in ran)
    fixed_state = content(drifted)
    again, second = _fix(run_cli, inventory, *args, "--apply", "--yes")
    assert again.code == 0 and _host(second, drifted.name)["steps"] == []
    asyncio.run(_run_again(ssh_fleet, drifted, ran))
    assert content(drifted) == fixed_state


# Checks proven by a test of their own above, not through PROOFS.
PROVEN_APART = {"env.drift": test_env_drift_fix_is_proven_against_a_baseline_lock}


def test_env_outlier_fix_is_proven_on_a_fleet_with_a_majority(ssh_fleet, start_pods, run_cli, tmp_path):
    majority = [PodSpec(f"outlier-ok-{i}", **READY) for i in range(2)]
    odd = with_pip_shim(PodSpec("outlier-cu121", **dict(READY, torch="cu121-h100")), cu124="cu124")
    pods = start_pods(*majority, odd)
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(p) for p in pods], trusted=pods, checks=CKPT
    )
    args = ("--no-policy", "--only", "env.outlier")

    applied, document = _fix(run_cli, inventory, *args, "--apply", "--yes")

    host = _host(document, "outlier-cu121")
    assert applied.code == 0 and [r["outcome"] for r in host["results"]] == ["fixed"], json.dumps(host, indent=1)
    assert all(_host(document, p.name)["steps"] == [] for p in pods[:2])
    ran = [s["run"] for s in host["steps"] if s["status"] == "ran"]
    fixed_state = content(pods[2])
    again, second = _fix(run_cli, inventory, *args, "--apply", "--yes")
    assert again.code == 0 and all(h["steps"] == [] for h in second["hosts"])
    asyncio.run(_run_again(ssh_fleet, pods[2], ran))
    assert content(pods[2]) == fixed_state


PROVEN_APART["env.outlier"] = test_env_outlier_fix_is_proven_on_a_fleet_with_a_majority


def test_history_keeps_the_fleet_state_after_the_fixes(ssh_fleet, start_pods, run_cli, tmp_path):
    spec, checks, _ = PROOFS["storage.output-dir"]
    (pod,) = start_pods(spec)
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks=checks)
    history = tmp_path / "history"

    result, _ = _fix(run_cli, inventory, "--only", "storage.output-dir", "--apply", "--yes", "--history", str(history))

    (saved,) = sorted(history.glob("*.json"))
    state = json.loads(saved.read_text())
    (host,) = state["hosts"]
    assert result.code == 0 and state["kind"] == "fleet"
    assert [f["severity"] for f in host["findings"] if f["check"] == "storage.output-dir"] == ["pass"]
