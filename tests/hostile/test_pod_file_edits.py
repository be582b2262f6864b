"""A fix step edits one file on the pod, and only that one: a ~/.bashrc or accelerate config
that is a symbolic link (to a shared dotfiles checkout, or planted) is refused with the reason,
never written through; a link planted at a guessable temporary name is never followed; the
file keeps its mode. On real sshd pods, with `fleet fix --apply`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluate"))
from evaluate_builders import laptop
from fleet_helpers import host_entry, write_inventory
from sshfleet import PodSpec

from computefence.evaluate.persist import persist_env

pytestmark = pytest.mark.sshd

CKPT = {"output_dir": "/workspace/checkpoints"}
# HF_HOME unset: storage.hf-cache's fix adds `export HF_HOME=...` at the top of ~/.bashrc.
HF_POD = dict(nvidia_smi="h100x1", torch="cu124", workspace_size="20G", env={"RUNPOD_POD_ID": "x1"}, shm_size="16g")
# CUDA_VISIBLE_DEVICES hides a GPU: gpu.count-mismatch's fix deletes the line from ~/.bashrc.
HIDDEN_GPU_POD = dict(HF_POD, nvidia_smi="a100x2", torch="cu121-h100", env={"HF_HOME": "/workspace/hf"})
ACCELERATE = "/root/accelerate.yaml"
FOUR_PROCESSES = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 4\n"

# check -> (the pod, the file its fix edits, what that file holds, the inventory's checks).
CASES = {
    "storage.hf-cache": (HF_POD, "/root/.bashrc", "alias ll='ls -l'\n", CKPT),
    "gpu.count-mismatch": (HIDDEN_GPU_POD, "/root/.bashrc", "export CUDA_VISIBLE_DEVICES=0\n", CKPT),
    "accelerate.num-processes": (
        dict(HF_POD, env={"HF_HOME": "/workspace/hf"}),
        ACCELERATE,
        FOUR_PROCESSES,
        dict(CKPT, accelerate_config=ACCELERATE),
    ),
}


def _sh(pod, script: str) -> str:
    return pod.in_namespace(["sh", "-c", script, "sh", str(pod.merged)])


def _fix(cli, ssh_fleet, tmp_path, pod, check: str, checks: dict = CKPT) -> tuple[int, dict]:
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks=checks)
    code, out, _ = cli(
        "fleet", "fix", "-i", str(inventory), "--no-policy", "--only", check, "--apply", "--yes", "--format", "json"
    )
    return code, json.loads(out)["hosts"][0]


@pytest.mark.parametrize("check", sorted(CASES))
def test_a_file_that_is_a_symlink_is_refused_and_the_file_it_points_to_is_untouched(
    check, ssh_fleet, start_pods, cli, tmp_path
):
    spec, path, content, checks = CASES[check]
    (pod,) = start_pods(PodSpec(f"link-{check.split('.')[1]}", **spec))
    real = f"/root/dotfiles/{path.rsplit('/', 1)[1].lstrip('.')}"
    _sh(
        pod,
        f'mkdir -p "$1/root/dotfiles" && printf %s "{content}" > "$1{real}" && rm -f "$1{path}" && ln -s {real} "$1{path}"',
    )

    code, host = _fix(cli, ssh_fleet, tmp_path, pod, check, checks)

    [edit] = [s for s in host["steps"] if path.rsplit("/", 1)[1] in s["run"]]
    assert edit["status"] == "failed", json.dumps(host, indent=1)
    assert "refused" in edit["reason"] and f"{path} is a symbolic link" in edit["reason"]
    assert host["results"][0]["outcome"] == "failed" and code == 1
    assert _sh(pod, f'cat "$1{real}"') == content
    assert _sh(pod, f'readlink "$1{path}"') == real + "\n"


def test_a_link_planted_at_a_temporary_name_is_never_followed_and_the_mode_is_kept(
    ssh_fleet, start_pods, cli, tmp_path
):
    (pod,) = start_pods(PodSpec("planted-temp", **HF_POD))
    _sh(
        pod,
        'printf "keep me\\n" > "$1/root/victim" && printf "alias ll=ls\\n" > "$1/root/.bashrc" && '
        'chmod 640 "$1/root/.bashrc" && ln -s /root/victim "$1/root/.bashrc.computefence"',
    )

    code, host = _fix(cli, ssh_fleet, tmp_path, pod, "storage.hf-cache")

    assert code == 0 and host["results"][0]["outcome"] == "fixed", json.dumps(host, indent=1)
    assert _sh(pod, 'cat "$1/root/victim"') == "keep me\n"
    assert _sh(pod, 'cat "$1/root/.bashrc"') == "export HF_HOME=/workspace/.cache/huggingface\nalias ll=ls\n"
    assert _sh(pod, 'stat -c %a "$1/root/.bashrc"') == "640\n"
    # Nothing left behind but the planted link itself.
    assert _sh(pod, 'cd "$1/root" && ls -A | grep bashrc') == ".bashrc\n.bashrc.computefence\n"


def test_the_accelerate_key_is_written_through_a_fresh_file_on_its_own_line(ssh_fleet, start_pods, cli, tmp_path):
    # No num_processes (accelerate's default: 1) on two GPUs, and no newline at the end.
    spec = dict(HF_POD, nvidia_smi="a100x2", torch="cu121-h100", env={"HF_HOME": "/workspace/hf"})
    (pod,) = start_pods(PodSpec("accelerate-append", **spec))
    _sh(pod, f'printf "compute_environment: LOCAL_MACHINE\\ndistributed_type: MULTI_GPU" > "$1{ACCELERATE}"')
    before = _sh(pod, f'stat -c %i "$1{ACCELERATE}"')

    code, host = _fix(
        cli, ssh_fleet, tmp_path, pod, "accelerate.num-processes", dict(CKPT, accelerate_config=ACCELERATE)
    )

    assert code == 0 and host["results"][0]["outcome"] == "fixed", json.dumps(host, indent=1)
    expected = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 2\n"
    assert _sh(pod, f'cat "$1{ACCELERATE}"') == expected
    assert _sh(pod, f'stat -c %i "$1{ACCELERATE}"') != before  # replaced by a rename, never appended to
    assert _sh(pod, 'ls -A "$1/root" | grep accelerate') == "accelerate.yaml\n"


def test_the_etc_environment_line_is_written_through_a_fresh_file_and_twice_is_the_same(ssh_fleet, start_pods):
    (pod,) = start_pods(PodSpec("etc-environment", **HF_POD))
    _sh(pod, 'printf "PATH=/usr/bin\\nHF_HOME=/old" > "$1/etc/environment" && chmod 640 "$1/etc/environment"')
    facts = laptop()
    facts = facts.model_copy(
        update={
            "environment": facts.environment.model_copy(update={"ssh_pam_env": True}),
            "identity": facts.identity.model_copy(update={"uid": 0, "user": "root"}),  # the pod's login
        }
    )
    step = persist_env("HF_HOME", "/workspace/hf", facts)
    assert ">>" not in step.run and "tee -a" not in step.run and "exit" not in step.run

    for _ in range(2):  # in the pod's own root, as its sshd would run it
        pod.in_namespace(["chroot", str(pod.merged), "sh", "-c", step.run])
        assert _sh(pod, 'cat "$1/etc/environment"') == "PATH=/usr/bin\nHF_HOME=/workspace/hf\n"
    assert _sh(pod, 'stat -c %a "$1/etc/environment"') == "640\n"
    left = [name for name in _sh(pod, 'ls -A "$1/etc"').split() if re.fullmatch(r"environment\.\w{6}", name)]
    assert left == []  # no temporary file left behind
