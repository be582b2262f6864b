"""Storage facts from recorded mountinfo layouts of RunPod, Vast.ai and Lambda machines."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from probe_pod import path_fact

from computefence.probe import core, storage


def test_runpod_network_volume(pod):
    moved = pod.mountinfo("runpod-network-volume", {"/workspace": "workspace"})
    volume = moved["/workspace"]
    facts = pod.run(output_dir=str(volume / "runs" / "llama")).facts
    root = path_fact(facts, "root")
    assert (root.mount_point, root.fs_type, root.mount_source) == ("/", "overlay", "overlay")
    assert root.exists and root.free_bytes > 0 and root.total_bytes >= root.free_bytes
    out = path_fact(facts, "output_dir")
    assert (out.mount_point, out.fs_type, out.mount_source) == (str(volume), "fuse.mfs", "mfs#eur-is-1.runpod.net:9421")
    assert not out.exists and out.existing_ancestor == str(volume) and not out.parent_exists
    assert out.writable and out.origin == "--output-dir"
    [vol] = [p for p in facts.storage.paths if p.role == "volume"]
    assert vol.path == str(volume) and vol.exists and vol.is_dir and vol.fs_type == "fuse.mfs"
    shm = path_fact(facts, "shm")
    assert shm.fs_type == "tmpfs" and "size=65536k" in next(
        m.super_options for m in facts.storage.mounts if m.mount_point == "/dev/shm"
    )
    # The container's /workspace is the volume's real path; on this machine it is absent.
    assert path_fact(facts, "workspace").path == "/workspace"


def test_only_volumes_are_listed_as_volumes(pod):
    pod.mountinfo("runpod-network-volume", {"/workspace": "workspace"})
    # A single file bind-mounted outside the system trees is no volume either.
    key = pod.root / "authorized_keys"
    key.write_text("ssh-ed25519 AAAA\n")
    text = (pod.proc / "self" / "mountinfo").read_text()
    pod.write_mountinfo(text + f"2130 2104 259:3 /keys/authorized_keys {key} ro,relatime - ext4 /dev/nvme0n1p3 rw\n")
    facts = pod.run().facts
    volumes = [p.path for p in facts.storage.paths if p.role == "volume"]
    # Not /etc/hosts (a bind-mounted file), /dev/*, /proc/*, /sys/*, /run/*, /usr/* or the driver files.
    assert volumes == [str(pod.root / "mnt" / "workspace")]
    assert len(facts.storage.mounts) == 23


def test_runpod_pod_volume_on_a_block_device(pod):
    moved = pod.mountinfo("runpod-pod-volume", {"/workspace": "workspace"})
    facts = pod.run(output_dir=str(moved["/workspace"])).facts
    out = path_fact(facts, "output_dir")
    assert (out.fs_type, out.mount_source, out.exists, out.writable) == ("xfs", "/dev/md127", True, True)
    mount = next(m for m in facts.storage.mounts if m.mount_point == str(moved["/workspace"]))
    assert mount.root == "/runpod-volume/k2x9q7w1m4" and "prjquota" in mount.super_options


def test_vast_without_volume_defaults_everything_to_the_overlay(pod):
    pod.mountinfo("vast-no-volume")
    pod.env["HF_HOME"] = str(pod.home / "hf")
    facts = pod.run(output_dir="checkpoints").facts
    assert [p for p in facts.storage.paths if p.role == "volume"] == []
    for role in ("home", "hf_cache", "output_dir", "workspace"):
        fact = path_fact(facts, role)
        assert (fact.mount_point, fact.fs_type) == ("/", "overlay"), role
    # Relative output dirs resolve against the working directory, as the job's would.
    out = path_fact(facts, "output_dir")
    assert out.path == "checkpoints" and out.resolved == str(pod.cwd / "checkpoints")
    assert out.parent_exists and out.existing_ancestor == str(pod.cwd)


def test_vast_bind_mounted_workspace(pod):
    moved = pod.mountinfo("vast-bind-workspace", {"/workspace": "workspace"})
    facts = pod.run().facts
    [vol] = [p for p in facts.storage.paths if p.role == "volume"]
    assert (vol.path, vol.fs_type, vol.mount_source) == (str(moved["/workspace"]), "ext4", "/dev/nvme0n1p2")
    mount = next(m for m in facts.storage.mounts if m.mount_point == vol.path)
    assert mount.root == "/var/lib/docker/volumes/C.9481727_workspace/_data"


@pytest.mark.parametrize(
    "fixture, point, fs_type, source",
    [
        ("lambda-virtiofs", "/lambda/nfs/llm-train", "virtiofs", "llm-train"),
        ("lambda-nfs", "/home/ubuntu/llm-train", "nfs4", "10.19.60.11:/llm-train"),
    ],
)
def test_lambda_persistent_filesystem(pod, fixture, point, fs_type, source):
    moved = pod.mountinfo(fixture, {point: "llm-train"})
    pod.env["HF_HUB_CACHE"] = str(moved[point] / "hub")
    facts = pod.run().facts
    root = path_fact(facts, "root")
    assert (root.fs_type, root.mount_source) == ("ext4", "/dev/vda1")
    cache = path_fact(facts, "hf_cache")
    assert (cache.origin, cache.fs_type, cache.mount_source) == ("HF_HUB_CACHE", fs_type, source)
    assert [p.path for p in facts.storage.paths if p.role == "volume"] == [str(moved[point])]
    # Not volumes: /boot/efi (vfat), snaps (squashfs), /run tmpfs.
    shm = path_fact(facts, "shm")
    assert shm.fs_type == "tmpfs"


@pytest.mark.parametrize(
    "env, origin, expected",
    [
        ({"HF_HUB_CACHE": "{pod}/a", "HF_HOME": "{pod}/b"}, "HF_HUB_CACHE", "{pod}/a"),
        ({"HUGGINGFACE_HUB_CACHE": "{pod}/legacy", "HF_HOME": "{pod}/b"}, "HUGGINGFACE_HUB_CACHE", "{pod}/legacy"),
        ({"HF_HOME": "{pod}/b", "XDG_CACHE_HOME": "{pod}/c"}, "HF_HOME", "{pod}/b/hub"),
        ({"XDG_CACHE_HOME": "{pod}/c"}, "XDG_CACHE_HOME", "{pod}/c/huggingface/hub"),
        ({}, "default", "{home}/.cache/huggingface/hub"),
    ],
)
def test_hf_cache_resolution(pod, env, origin, expected):
    pod.env.update({k: v.format(pod=pod.root) for k, v in env.items()})
    cache = path_fact(pod.run().facts, "hf_cache")
    assert cache.origin == origin
    assert cache.path == expected.format(pod=pod.root, home=pod.home)


def test_hf_cache_set_only_in_the_container_env_is_not_used(pod):
    # An SSH session (the probe, the job) does not see the container's ENV.
    pod.container_env(b"HF_HOME=/workspace/hf\0PATH=/usr/bin\0")
    facts = pod.run().facts
    assert path_fact(facts, "hf_cache").origin == "default"
    assert facts.environment.variables["HF_HOME"][0].source == "container"


def test_symlinked_cache_resolves_to_the_volume(pod):
    moved = pod.mountinfo("runpod-network-volume", {"/workspace": "workspace"})
    (moved["/workspace"] / "cache").mkdir()
    os.symlink(moved["/workspace"] / "cache", pod.home / ".cache")
    cache = path_fact(pod.run().facts, "hf_cache")
    assert cache.resolved == str(moved["/workspace"] / "cache" / "huggingface" / "hub")
    assert (cache.fs_type, cache.existing_ancestor) == ("fuse.mfs", str(moved["/workspace"] / "cache"))


def test_mounts_match_by_component_never_by_string_prefix(pod):
    data = pod.root / "srv" / "data"
    data.mkdir(parents=True)
    (pod.root / "srv" / "database").mkdir()
    mountinfo = f"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:17 / {data} rw - xfs /dev/sdb1 rw\n"
    pod.write_mountinfo(mountinfo)
    facts = pod.run(extra_paths=[str(pod.root / "srv" / "database" / "x"), str(data / "x")]).facts
    near, inside = [p for p in facts.storage.paths if p.role == "extra"]
    assert (near.mount_point, near.fs_type) == ("/", "ext4")
    assert (inside.mount_point, inside.fs_type) == (str(data), "xfs")


def test_octal_escapes_and_optional_fields(pod):
    spaced = pod.root / "my data\tset"
    spaced.mkdir()
    mountinfo = (
        "1 0 8:1 / / rw,relatime shared:1 master:2 - ext4 /dev/sda1 rw\n"
        "2 1 0:40 / "
        + str(spaced).replace(" ", "\\040").replace("\t", "\\011")
        + " rw,relatime shared:7 - fuse.juicefs JuiceFS:my\\040vol rw,user_id=0\n"
        "not a mountinfo line\n"
    )
    pod.write_mountinfo(mountinfo)
    facts = pod.run(extra_paths=[str(spaced / "runs")]).facts
    assert [m.mount_point for m in facts.storage.mounts] == ["/", str(spaced)]
    juice = facts.storage.mounts[1]
    assert (juice.fs_type, juice.source, juice.options) == ("fuse.juicefs", "JuiceFS:my vol", ["rw", "relatime"])
    assert path_fact(facts, "extra").mount_point == str(spaced)
    assert path_fact(facts, "volume").path == str(spaced)


def test_output_dir_that_is_a_file(pod):
    target = pod.cwd / "out"
    target.write_text("not a directory")
    out = path_fact(pod.run(output_dir="out").facts, "output_dir")
    assert out.exists and out.is_dir is False


def test_unreadable_mountinfo_is_reported(pod):
    (pod.proc / "self" / "mountinfo").unlink()
    run = pod.run()
    assert run.facts.storage.error.startswith("mountinfo: ")
    assert run.facts.storage.mounts == [] and path_fact(run.facts, "root").exists


MOUNT_CASES = json.loads((Path(__file__).parent.parent / "fixtures" / "mount_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", MOUNT_CASES, ids=[case["why"] for case in MOUNT_CASES])
def test_the_probe_finds_the_mount_of_a_path(case):
    # The same table pins the evaluator's mount_of (tests/evaluate/test_evaluate_profiles.py).
    mounts = [{"mount_point": point, "mount_id": index} for index, point in enumerate(case["mounts"])]
    found = storage._mount_for(case["path"], mounts)
    assert (None if found is None else found["mount_id"]) == case["expect"]


def test_mountinfo_parser_keeps_stacked_mounts_in_order():
    text = (
        "10 1 0:1 / / rw - overlay overlay rw\n"
        "11 10 0:2 / /data rw - ext4 /dev/sdb rw\n"
        "12 11 0:3 / /data rw - nfs4 host:/export rw,vers=4.1\n"
    )
    mounts = storage._parse_mountinfo(text)
    assert storage._mount_for("/data/x", mounts)["fs_type"] == "nfs4"
    assert storage._mount_for("/database", mounts)["fs_type"] == "overlay"
    assert storage._mount_for("/", mounts)["mount_id"] == 10


def test_a_hung_mount_costs_only_its_paths(pod, monkeypatch):
    # A dead NFS server makes stat calls block; simulate it in-process for one mount.
    dead = pod.root / "mnt" / "dead"
    dead.mkdir(parents=True)
    pod.write_mountinfo(f"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:50 / {dead} rw - nfs4 nas:/export rw\n")
    release = threading.Event()
    real_statvfs = os.statvfs

    def statvfs(path):
        if str(path).startswith(str(dead)):
            release.wait(30)
        return real_statvfs(path)

    monkeypatch.setattr(storage.os, "statvfs", statvfs)
    params = core._load_params(
        json.dumps(
            {
                "roots": {"proc": str(pod.proc)},
                "extra_paths": [str(dead / "a"), str(dead / "b"), str(pod.cwd)],
            }
        )
    )
    params["_deadline"] = time.time() + 8.0
    started = time.monotonic()
    try:
        facts = storage.collect_storage(params)
    finally:
        release.set()
    assert time.monotonic() - started < 4.0
    [volume] = [p for p in facts["paths"] if p["role"] == "volume"]
    assert volume["path"] == str(dead) and volume["error"].startswith("no answer within 2.0s")
    extra = {p["path"]: p for p in facts["paths"] if p["role"] == "extra"}
    for path in (dead / "a", dead / "b"):
        assert extra[str(path)]["error"] == f"skipped: {dead} did not answer"
        assert extra[str(path)]["fs_type"] == "nfs4"
    assert extra[str(pod.cwd)]["exists"] and "error" not in extra[str(pod.cwd)]
