"""The job's size end to end against real sshd pods (issue #23): a real model's config.json
and index in the pod's HF cache, a 200 GB /workspace, and computefence.yaml's `job:`."""

from __future__ import annotations

import pytest
from fleet_helpers import HEALTHY, host_entry, started_pods, write_inventory
from model_cache import FIXTURES, write_cache
from sshfleet import PodSpec

from computefence.models import Severity

pytestmark = pytest.mark.sshd

MODEL = "deepcogito/cogito-v1-preview-qwen-14B"
SIZED = ("storage.budget", "storage.model-download", "gpu.memory-budget")


@pytest.fixture(scope="module")
def pods(ssh_fleet, tmp_path_factory):
    # HF_HOME=/workspace/hf on a 200 GB ext4 volume; the tight pod has 12 GB of it left free.
    sft = (FIXTURES.parent / "training-configs" / "llamafactory-qwen3_full_sft.yaml").read_text()
    specs = [
        PodSpec("sized", **HEALTHY, files={"/root/qwen3_full_sft.yaml": sft}),
        PodSpec("tight-cache", **HEALTHY, workspace_free_bytes=12 * 10**9),
    ]
    hub = tmp_path_factory.mktemp("hf") / "hub"
    write_cache(hub, MODEL, "cogito-v1-preview-qwen-14B")
    with started_pods(ssh_fleet, specs) as started:
        for pod in started.values():
            # /workspace is mounted inside the pod's namespace: copy the cache in there.
            pod.in_namespace(["cp", "-a", str(hub.parent), f"{pod.merged}/workspace/hf"])
        yield started


def _check(run_cli, ssh_fleet, tmp_path, pod, job: str):
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    policy = tmp_path / "computefence.yaml"
    policy.write_text(f"job: {job}\n")
    result = run_cli("fleet", "check", "-i", str(inventory), "--policy", str(policy), "--format", "json")
    host = result.host(pod.name)
    return result, {f.check: f for f in host.findings if f.check in SIZED}, host


def test_a_full_fine_tune_of_a_cached_14b_model_blocks_on_a_200_gb_volume(pods, ssh_fleet, run_cli, tmp_path):
    result, found, host = _check(
        run_cli, ssh_fleet, tmp_path, pods["sized"], f"{{model: {MODEL}, save_total_limit: 3}}"
    )
    assert result.code == 1, result.stderr
    model = host.facts.model
    assert model.found and model.snapshot.startswith(
        "/workspace/hf/hub/models--deepcogito--cogito-v1-preview-qwen-14B/"
    )
    assert model.index.total_size == 29531895808 and model.cache.mount_point == "/workspace"
    budget = found["storage.budget"]
    assert budget.severity is Severity.BLOCK
    assert budget.message.startswith("needs 4 × 177 GB checkpoints + 59.1 GB final model = 768 GB")
    assert budget.message.endswith("free on /workspace (29.5 GB of it for the model download still to come)")
    assert budget.fix.commands == ["df -h /workspace"]
    # The shards are not downloaded yet, and the volume has room for them.
    assert found["storage.model-download"].severity is Severity.PASS
    assert "29.5 GB still to download" in found["storage.model-download"].message


def test_the_same_pod_under_a_lora_policy_passes(pods, ssh_fleet, run_cli, tmp_path):
    _, found, _ = _check(
        run_cli,
        ssh_fleet,
        tmp_path,
        pods["sized"],
        f"{{model: {MODEL}, save_total_limit: 3, method: lora, lora: {{r: 16}}}}",
    )
    assert {check: f.severity for check, f in found.items()} == dict.fromkeys(SIZED, Severity.PASS)
    assert "12.6M adapter params on 14.77B from index total_size" in found["storage.budget"].message


def test_a_model_not_yet_downloaded_with_too_little_cache_space_blocks(pods, ssh_fleet, run_cli, tmp_path):
    result, found, _ = _check(run_cli, ssh_fleet, tmp_path, pods["tight-cache"], f"{{model: {MODEL}, method: qlora}}")
    assert result.code == 1
    download = found["storage.model-download"]
    assert download.severity is Severity.BLOCK
    assert (
        "none of 29.5 GB (its index) downloaded, 29.5 GB still to download; 12.0 GB free on /workspace"
        in download.message
    )
    assert download.message.endswith("free on /workspace")


def test_a_full_8b_fine_tune_on_one_80_gb_gpu_warns_about_memory(pods, ssh_fleet, run_cli, tmp_path):
    _, found, _ = _check(
        run_cli, ssh_fleet, tmp_path, pods["sized"], "{params: 8.03e9, save_total_limit: 1, max_steps: 1000}"
    )
    memory = found["gpu.memory-budget"]
    assert memory.severity is Severity.WARN
    assert memory.message.startswith(
        "model states need 145 GB per GPU (8.03B params × (6 weights + 4 grads + 8 adamw) B)"
    )
    assert "activations, which come on top" in memory.message


def test_a_policy_with_no_model_skips_with_the_reason(pods, ssh_fleet, run_cli, tmp_path):
    _, found, host = _check(run_cli, ssh_fleet, tmp_path, pods["sized"], "{method: full, save_total_limit: 2}")
    assert set(found) == set(SIZED) and all(f.severity is Severity.SKIP for f in found.values())
    assert "no job.model or job.params" in found["storage.budget"].message
    assert host.facts.model is None  # nothing was looked up on the pod


def test_a_llama_factory_config_on_the_pod_sizes_the_run(pods, ssh_fleet, run_cli, tmp_path):
    # Its deepspeed ds_z3_config.json makes the run ZeRO-3: 2 B model + 12 B master and AdamW.
    _, found, host = _check(
        run_cli,
        ssh_fleet,
        tmp_path,
        pods["sized"],
        "{from: /root/qwen3_full_sft.yaml, params: 4.02e9, save_total_limit: 2}",
    )
    assert host.facts.model.from_file.model == "Qwen/Qwen3-4B-Instruct-2507"
    budget = found["storage.budget"]
    assert budget.message.startswith("needs 3 × 56.3 GB checkpoints + 8.0 GB final model")
    assert "model 2 B + optimizer 12 B per param" in budget.message
    assert "Qwen/Qwen3-4B-Instruct-2507" in found["storage.model-download"].message
