"""storage.*: HF cache, output dir, persistent volume and free space, judged by mount."""

from __future__ import annotations

from evaluate_builders import GB, env, laptop, mount, of, only, path, runpod_pod

from computefence.evaluate import evaluate_host
from computefence.models import (
    CheckOptions,
    CollectorStatus,
    Facts,
    IdentityFacts,
    ProviderInfo,
    Severity,
    StorageFacts,
)

NO_CHECKS = CheckOptions()


def _with_paths(facts: Facts, *extra, mounts=()) -> Facts:
    return facts.model_copy(
        update={"storage": StorageFacts(mounts=[*facts.storage.mounts, *mounts], paths=[*facts.storage.paths, *extra])}
    )


def _replace_path(facts: Facts, role: str, new) -> Facts:
    paths = [p for p in facts.storage.paths if p.role != role] + [new]
    return facts.model_copy(update={"storage": StorageFacts(mounts=facts.storage.mounts, paths=paths)})


def _bare_metal(hf_cache: str = "/home/ml/.cache/huggingface/hub", origin: str = "default") -> Facts:
    root = mount("/", "ext4", "/dev/nvme0n1p2")
    facts = runpod_pod()
    return facts.model_copy(
        update={
            "identity": IdentityFacts(hostname="box", user="ml", uid=1000, home="/home/ml"),
            "environment": env(),
            "storage": StorageFacts(
                mounts=[root, mount("/proc", "proc")],
                paths=[
                    path("root", "/", root, free=300 * GB),
                    path("home", "/home/ml", root, free=300 * GB),
                    path("hf_cache", hf_cache, root, origin=origin, free=300 * GB),
                ],
            ),
        }
    )


# ---------------------------------------------------------------- storage.hf-cache


def test_hf_cache_on_the_runpod_volume_passes_and_says_what_survives():
    finding = only(evaluate_host(runpod_pod(), NO_CHECKS), "storage.hf-cache")
    assert finding.severity is Severity.PASS
    assert "/workspace" in finding.message and "deleted when the pod is terminated" in finding.message


def test_default_hf_cache_on_the_container_disk_warns_with_the_volume_path_and_ssh_persistence():
    finding = only(evaluate_host(runpod_pod(hf_on_volume=False), NO_CHECKS), "storage.hf-cache")
    assert finding.severity is Severity.WARN
    assert "/root/.cache/huggingface/hub" in finding.message and "wiped when the pod stops" in finding.message
    assert "HF_HOME is not set" in finding.message
    assert finding.fix.commands == [
        "mkdir -p /workspace/.cache/huggingface",
        "echo 'export HF_HOME=/workspace/.cache/huggingface' >> ~/.bashrc",
        "export HF_HOME=/workspace/.cache/huggingface",
    ]
    # RunPod's profile: container ENV is invisible over SSH and ~/.bashrc is on the container disk.
    assert "SSH sessions do not see the pod's container ENV" in finding.fix.advice
    assert finding.subject == "/root/.cache/huggingface/hub"


def test_hf_home_set_only_in_the_container_env_warns_that_ssh_sessions_miss_it():
    facts = runpod_pod(hf_on_volume=False).model_copy(
        update={"environment": env(HF_HOME={"container": "/workspace/hf"})}
    )
    finding = only(evaluate_host(facts, NO_CHECKS), "storage.hf-cache")
    assert finding.severity is Severity.WARN
    assert "HF_HOME=/workspace/hf is set only in the container environment" in finding.message
    assert "SSH sessions do not see" in finding.message
    # The container's value is on the volume, so the fix makes SSH sessions use it.
    assert finding.fix.commands[-1] == "export HF_HOME=/workspace/hf"


def test_hf_variable_set_for_the_process_too_is_not_hidden():
    facts = runpod_pod().model_copy(
        update={
            "environment": env(
                HF_HOME={"process": "/workspace/.cache/huggingface", "container": "/workspace/.cache/huggingface"}
            )
        }
    )
    assert only(evaluate_host(facts, NO_CHECKS), "storage.hf-cache").severity is Severity.PASS


def test_hf_hub_cache_under_tmp_on_a_local_disk_warns_and_keeps_the_variable():
    facts = _bare_metal("/tmp/hub", origin="HF_HUB_CACHE")
    finding = only(evaluate_host(facts, NO_CHECKS), "storage.hf-cache")
    assert finding.severity is Severity.WARN
    assert "under /tmp" in finding.message and "cleared on reboot" in finding.message
    assert finding.fix.commands[-1] == "export HF_HUB_CACHE=/home/ml/.cache/huggingface/hub"
    assert finding.fix.advice is None  # a bare-metal login shell sees ~/.bashrc


def test_hf_cache_on_tmpfs_warns():
    facts = runpod_pod()
    scratch = mount("/scratch", "tmpfs", "tmpfs")
    facts = _replace_path(facts, "hf_cache", path("hf_cache", "/scratch/hf/hub", scratch, origin="HF_HOME"))
    facts = _with_paths(facts, mounts=[scratch])
    finding = only(evaluate_host(facts, NO_CHECKS), "storage.hf-cache")
    assert finding.severity is Severity.WARN and "tmpfs" in finding.message


def test_hf_cache_on_the_vast_container_disk_passes_because_it_survives_a_stop():
    facts = runpod_pod(volume=False, hf_on_volume=False).model_copy(
        update={"identity": IdentityFacts(user="root", uid=0, provider_hints={"VAST_CONTAINERLABEL": "C.123"})}
    )
    finding = only(evaluate_host(facts, NO_CHECKS), "storage.hf-cache")
    assert finding.severity is Severity.PASS
    assert "kept when the instance stops, deleted when the instance is destroyed" in finding.message


def test_hf_cache_fix_without_any_persistent_storage_points_at_no_volume():
    finding = only(evaluate_host(runpod_pod(volume=False, hf_on_volume=False), NO_CHECKS), "storage.hf-cache")
    assert finding.severity is Severity.WARN
    # Nowhere to move it: advice only, no command to paste.
    assert finding.fix.commands == []
    assert "storage.no-volume" in finding.fix.advice and "Volume Disk" in finding.fix.advice


# ---------------------------------------------------------------- storage.output-dir


def _with_output(facts: Facts, out) -> Facts:
    return _with_paths(facts, out)


def test_no_output_dir_given_means_no_output_dir_finding():
    assert of(evaluate_host(runpod_pod(), NO_CHECKS), "storage.output-dir") == []


def test_output_dir_on_the_volume_passes():
    facts = runpod_pod()
    volume = next(m for m in facts.storage.mounts if m.mount_point == "/workspace")
    facts = _with_output(facts, path("output_dir", "/workspace/ckpt", volume, exists=False, origin="--output-dir"))
    finding = only(evaluate_host(facts, CheckOptions(output_dir="/workspace/ckpt")), "storage.output-dir")
    assert finding.severity is Severity.PASS and "volume disk" in finding.message


def test_relative_output_dir_on_the_container_disk_blocks_and_names_the_volume_target():
    facts = runpod_pod()
    root = facts.storage.mounts[0]
    facts = _with_output(facts, path("output_dir", "./out", root, resolved="/root/out", exists=False))
    finding = only(evaluate_host(facts, CheckOptions(output_dir="./out")), "storage.output-dir")
    assert finding.severity is Severity.BLOCK
    assert "./out (resolves to /root/out)" in finding.message
    assert "container disk" in finding.message and "wiped when the pod stops" in finding.message
    assert finding.fix.commands == ["mkdir -p /workspace/out"] and "/workspace/out" in finding.fix.advice
    assert finding.subject == "/root/out"


def test_output_dir_with_a_missing_parent_blocks_with_mkdir():
    facts = runpod_pod()
    volume = next(m for m in facts.storage.mounts if m.mount_point == "/workspace")
    out = path(
        "output_dir",
        "/workspace/runs/7/ckpt",
        volume,
        exists=False,
        parent_exists=False,
        existing_ancestor="/workspace",
    )
    finding = only(
        evaluate_host(_with_output(facts, out), CheckOptions(output_dir="/workspace/runs/7/ckpt")), "storage.output-dir"
    )
    assert finding.severity is Severity.BLOCK
    assert "parent /workspace/runs/7" in finding.message
    assert finding.fix.commands == ["mkdir -p /workspace/runs/7/ckpt"]


def test_unwritable_output_dir_blocks_with_chown_for_the_login_user():
    facts = _bare_metal()
    data = mount("/data", "xfs", "/dev/sdc")
    facts = _with_paths(facts, path("output_dir", "/data/out", data, writable=False), mounts=[data])
    finding = only(evaluate_host(facts, CheckOptions(output_dir="/data/out")), "storage.output-dir")
    assert finding.severity is Severity.BLOCK and "not writable" in finding.message
    assert finding.fix.commands == ["sudo chown -R ml /data/out"]


def test_output_dir_on_a_read_only_mount_says_so():
    facts = _bare_metal()
    data = mount("/datasets", "nfs4", "nas:/export", options=["ro"])
    facts = _with_paths(facts, path("output_dir", "/datasets/out", data, writable=False), mounts=[data])
    finding = only(evaluate_host(facts, CheckOptions(output_dir="/datasets/out")), "storage.output-dir")
    assert finding.severity is Severity.BLOCK and "read-only" in finding.message
    assert finding.fix.commands == [] and "writable filesystem" in finding.fix.advice


def test_output_dir_the_probe_did_not_report_warns():
    finding = only(evaluate_host(runpod_pod(), CheckOptions(output_dir="/workspace/x")), "storage.output-dir")
    assert finding.severity is Severity.WARN and finding.fix.commands == ["ls -ld /workspace/x && df -h /workspace/x"]


def test_output_dir_under_rootfs_is_not_on_a_volume_mounted_at_root():
    # /rootfs is not inside /root: matching is by path component, never by string prefix.
    facts = runpod_pod(volume=False)
    home_volume = mount("/root", "ext4", "/dev/sdb")
    facts = _with_paths(
        facts, path("output_dir", "/rootfs/out", facts.storage.mounts[0], exists=False), mounts=[home_volume]
    )
    finding = only(evaluate_host(facts, CheckOptions(output_dir="/rootfs/out")), "storage.output-dir")
    assert finding.severity is Severity.BLOCK and "overlay at /" in finding.message
    assert finding.fix.commands == ["mkdir -p /root/out"]


def test_output_dir_on_a_lambda_persistent_filesystem_passes():
    root = mount("/", "ext4", "/dev/vda1")
    nfs = mount("/lambda/nfs/myfs", "virtiofs", "myfs")
    facts = runpod_pod().model_copy(
        update={
            "identity": IdentityFacts(user="ubuntu", uid=1000, home="/home/ubuntu"),
            "environment": env(),
            "storage": StorageFacts(
                mounts=[root, nfs],
                paths=[
                    path("home", "/home/ubuntu", root),
                    path("output_dir", "/lambda/nfs/myfs/ckpt", nfs, exists=False),
                ],
            ),
        }
    )
    lambda_pod = ProviderInfo(provider="lambda", pod_id="i-1", persistent_paths=["/lambda/nfs/myfs"])
    findings = evaluate_host(facts, CheckOptions(output_dir="/lambda/nfs/myfs/ckpt"), lambda_pod)
    out = only(findings, "storage.output-dir")
    assert out.severity is Severity.PASS and "kept after the instance is terminated" in out.message
    assert only(findings, "storage.no-volume").severity is Severity.PASS


# ---------------------------------------------------------------- storage.no-volume


def test_runpod_volume_passes_no_volume():
    finding = only(evaluate_host(runpod_pod(), NO_CHECKS), "storage.no-volume")
    assert finding.severity is Severity.PASS and finding.subject == "/workspace"


def test_runpod_pod_with_volume_size_zero_warns_that_workspace_is_a_plain_folder():
    facts = runpod_pod(volume=False, hf_on_volume=False)
    pod = ProviderInfo(provider="runpod", pod_id="abc", volume_gb=0, volume_mount_path="/workspace", cost_per_hour=0.69)
    finding = only(evaluate_host(facts, NO_CHECKS, pod), "storage.no-volume")
    assert finding.severity is Severity.WARN
    assert "RunPod reports none" in finding.message and "/workspace is a plain folder" in finding.message
    assert "wiped when the pod stops" in finding.message
    assert finding.fix.commands == [] and "Volume Disk mounted at /workspace" in finding.fix.advice


def test_volume_size_zero_overrides_a_local_mount_at_the_volume_path():
    # The API is authoritative: with no volume, a local mount at /workspace is container disk.
    pod = ProviderInfo(provider="runpod", pod_id="abc", volume_gb=0, volume_mount_path="/workspace")
    finding = only(evaluate_host(runpod_pod(), NO_CHECKS, pod), "storage.no-volume")
    assert finding.severity is Severity.WARN


def test_provider_volume_that_is_not_mounted_warns():
    pod = ProviderInfo(provider="runpod", pod_id="abc", volume_gb=50, volume_mount_path="/work")
    finding = only(evaluate_host(runpod_pod(), NO_CHECKS, pod), "storage.no-volume")
    assert finding.severity is Severity.WARN
    assert "RunPod reports a 50 GB volume at /work, but nothing is mounted there" in finding.message
    assert finding.fix.commands == ["findmnt /work"] and "restart the pod" in finding.fix.advice


def test_runpod_network_volume_survives_terminate():
    facts = runpod_pod(volume=False)
    network = mount("/workspace", "fuse.mfs", "mfs#eu-ro-1")
    facts = _with_paths(facts, mounts=[network])
    pod = ProviderInfo(
        provider="runpod", pod_id="abc", volume_gb=20, volume_mount_path="/workspace", network_volume=True
    )
    finding = only(evaluate_host(facts, NO_CHECKS, pod), "storage.no-volume")
    assert finding.severity is Severity.PASS and "kept after the pod is terminated" in finding.message


def test_lambda_instance_without_a_filesystem_warns_with_lambda_advice():
    root = mount("/", "ext4", "/dev/vda1")
    facts = runpod_pod().model_copy(
        update={
            "identity": IdentityFacts(user="ubuntu", uid=1000, provider_hints={"lambda": "/etc/lambda-stack-version"}),
            "storage": StorageFacts(mounts=[root, mount("/proc", "proc")], paths=[path("root", "/", root)]),
        }
    )
    finding = only(evaluate_host(facts, NO_CHECKS), "storage.no-volume")
    assert finding.severity is Severity.WARN
    assert "instance root disk" in finding.message and "deleted when the instance is terminated" in finding.message
    assert "/lambda/nfs/<name>" in finding.fix.advice


def test_lambda_declared_persistent_path_is_matched_by_mount_not_by_type():
    root = mount("/", "ext4", "/dev/vda1")
    old_image_fs = mount("/home/ubuntu/myfs", "ext4", "/dev/vdb")
    facts = runpod_pod().model_copy(update={"storage": StorageFacts(mounts=[root, old_image_fs])})
    pod = ProviderInfo(provider="lambda", pod_id="i-1", persistent_paths=["/home/ubuntu/myfs"])
    finding = only(evaluate_host(facts, NO_CHECKS, pod), "storage.no-volume")
    assert finding.severity is Severity.PASS and "persistent filesystem" in finding.message


def test_bare_metal_local_disk_passes_and_docker_overlay_warns():
    assert only(evaluate_host(_bare_metal(), NO_CHECKS), "storage.no-volume").severity is Severity.PASS
    overlay = mount("/", "overlay")
    docker = _bare_metal().model_copy(update={"storage": StorageFacts(mounts=[overlay])})
    finding = only(evaluate_host(docker, NO_CHECKS), "storage.no-volume")
    assert finding.severity is Severity.WARN and "docker run -v" in finding.fix.advice


def test_container_plumbing_bind_mounts_are_not_volumes():
    # /etc/hosts and driver files are ext4 bind mounts in every container, not data volumes.
    finding = only(evaluate_host(runpod_pod(volume=False), NO_CHECKS), "storage.no-volume")
    assert finding.severity is Severity.WARN


# ---------------------------------------------------------------- storage.disk-headroom


def _headroom(facts: Facts, subject: str):
    return next(
        f for f in evaluate_host(facts, NO_CHECKS) if f.check == "storage.disk-headroom" and f.subject == subject
    )


def test_disk_headroom_pass_warn_block_on_the_data_volume():
    assert _headroom(runpod_pod(volume_free=20 * GB), "/workspace").severity is Severity.PASS
    warned = _headroom(runpod_pod(volume_free=20 * GB - 1), "/workspace")
    assert warned.severity is Severity.WARN
    assert "/workspace (ext4 on /dev/sdb: workspace, HF cache)" in warned.message and "under 20 GB" in warned.message
    assert warned.fix.commands == ["du -xh -d 2 /workspace 2>/dev/null | sort -h | tail -n 15"]
    assert "huggingface-cli delete-cache" in warned.fix.advice
    assert _headroom(runpod_pod(volume_free=5 * GB), "/workspace").severity is Severity.WARN
    blocked = _headroom(runpod_pod(volume_free=4.9 * GB), "/workspace")
    assert blocked.severity is Severity.BLOCK and "only 4.9 GB free of 100 GB" in blocked.message


def test_root_without_job_data_only_blocks_when_nearly_full():
    # A 20 GB container disk with 12 GB free is normal on RunPod: no permanent warning.
    assert _headroom(runpod_pod(root_free=12 * GB), "/").severity is Severity.PASS
    assert _headroom(runpod_pod(root_free=3 * GB), "/").severity is Severity.BLOCK


def test_storage_collector_failure_is_a_warning_not_silence():
    facts = runpod_pod()
    facts = facts.model_copy(
        update={
            "collectors": {
                **facts.collectors,
                "storage": CollectorStatus(ok=False, timed_out=True, error="timed out after 8.0s"),
            }
        }
    )
    finding = only(evaluate_host(facts, NO_CHECKS), "storage.disk-headroom")
    assert finding.severity is Severity.WARN and "timed out after 8.0s" in finding.message


def test_laptop_storage_is_not_judged_as_a_pod_but_a_named_output_dir_is():
    findings = evaluate_host(laptop(), NO_CHECKS)
    for check in ("storage.hf-cache", "storage.no-volume", "storage.disk-headroom"):
        assert only(findings, check).severity is Severity.SKIP
    root = laptop().storage.mounts[0]
    facts = _with_paths(laptop(), path("output_dir", "/home/dev/out", root, free=3 * GB))
    finding = only(evaluate_host(facts, CheckOptions(output_dir="/home/dev/out")), "storage.disk-headroom")
    assert finding.severity is Severity.BLOCK and "output dir" in finding.message
