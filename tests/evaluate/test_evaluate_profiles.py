"""Provider profiles, provider detection and mount matching."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evaluate_builders import mount

from computefence.errors import ConfigError
from computefence.evaluate.mounts import Level, StorageMap, is_within
from computefence.evaluate.profiles import detect_provider, get_profile, load_profiles, profiles_dir
from computefence.models import ProviderInfo


def test_every_shipped_profile_loads():
    profiles = load_profiles()
    assert set(profiles) == {"generic", "runpod", "vast", "lambda", "slurm"}
    assert profiles["lambda"].ssh.user == "ubuntu" and profiles["runpod"].ssh.user == "root"
    assert profiles["runpod"].storage.volume_mount_paths == ["/workspace"]
    assert not profiles["runpod"].container_env_visible_over_ssh
    assert profiles_dir().name in ("providers", "_providers")


def test_unknown_provider_names_get_the_generic_profile():
    assert get_profile("aws").name == "generic" and get_profile(None).name == "generic"
    assert get_profile("RunPod").name == "runpod"


@pytest.mark.parametrize(
    ("hints", "provider"),
    [
        ({"RUNPOD_POD_ID": "abc"}, "runpod"),
        ({"VAST_CONTAINERLABEL": "C.1"}, "vast"),
        ({"lambda": "/etc/lambda-stack-version"}, "lambda"),
        ({}, "generic"),
        ({"SOMETHING_ELSE": "x"}, "generic"),
    ],
)
def test_provider_from_hints(hints, provider):
    assert detect_provider(hints) == provider


def _write_profiles(folder, runpod_text: str) -> None:
    folder.mkdir()
    (folder / "generic.yaml").write_text((profiles_dir() / "generic.yaml").read_text())
    (folder / "runpod.yaml").write_text(runpod_text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: runpod\ntitle: x: y\n", "line 2: mapping values are not allowed here"),
        ("- just\n- a list\n", "expected a mapping"),
        ("name: runpod\ntitle: RunPod\n", "storage: Field required"),
        ("name: other\ntitle: X\nstorage: {}\n", "storage.container: Field required"),
    ],
)
def test_a_malformed_profile_is_one_line_naming_the_file(tmp_path, text, expected):
    folder = tmp_path / "providers"
    _write_profiles(folder, text)
    with pytest.raises(ConfigError) as caught:
        load_profiles(folder)
    message = str(caught.value)
    assert "\n" not in message and str(folder / "runpod.yaml") in message and expected in message


def test_a_profile_named_differently_from_its_file_is_rejected(tmp_path):
    folder = tmp_path / "providers"
    text = (profiles_dir() / "vast.yaml").read_text()
    _write_profiles(folder, text)
    with pytest.raises(ConfigError, match="does not match the file name"):
        load_profiles(folder)


MOUNT_CASES = json.loads((Path(__file__).parent.parent / "fixtures" / "mount_cases.json").read_text())["cases"]


def test_rootfs_is_not_inside_root():
    assert is_within("/root/x", "/root") and is_within("/root", "/root") and is_within("/x", "/")
    assert not is_within("/rootfs/x", "/root")


@pytest.mark.parametrize("case", MOUNT_CASES, ids=[case["why"] for case in MOUNT_CASES])
def test_the_evaluator_finds_the_mount_of_a_path(case):
    # The same table pins the probe's lookup (tests/probe/test_probe_storage.py).
    mounts = [mount(point, "ext4", f"/dev/sd{index}") for index, point in enumerate(case["mounts"])]
    found = StorageMap(mounts, get_profile("runpod"), None).mount_of(case["path"])
    assert (None if found is None else mounts.index(found)) == case["expect"]


@pytest.mark.parametrize(
    ("fs_type", "level"),
    [
        ("tmpfs", Level.EPHEMERAL),
        ("ramfs", Level.EPHEMERAL),
        ("nfs4", Level.PERSISTENT),
        ("cifs", Level.PERSISTENT),
        ("virtiofs", Level.PERSISTENT),
        ("fuse.juicefs", Level.PERSISTENT),
        ("fuse.s3fs", Level.PERSISTENT),
        ("ceph", Level.PERSISTENT),
        ("lustre", Level.PERSISTENT),
        ("glusterfs", Level.PERSISTENT),
        ("beegfs", Level.PERSISTENT),
        ("ext4", Level.INSTANCE),
        ("xfs", Level.INSTANCE),
        ("btrfs", Level.INSTANCE),
    ],
)
def test_lifetime_of_a_data_mount_on_runpod(fs_type, level):
    storage = StorageMap([mount("/", "overlay"), mount("/data", fs_type, "/dev/sdb")], get_profile("runpod"), None)
    assert storage.classify(storage.mounts[1]).level is level


def test_root_lifetime_depends_on_the_provider():
    overlay, ext4 = mount("/", "overlay"), mount("/", "ext4", "/dev/vda1")
    assert StorageMap([overlay], get_profile("runpod"), None).classify(overlay).level is Level.EPHEMERAL
    assert StorageMap([overlay], get_profile("vast"), None).classify(overlay).level is Level.INSTANCE
    assert StorageMap([overlay], get_profile("generic"), None).classify(overlay).level is Level.EPHEMERAL
    assert StorageMap([ext4], get_profile("lambda"), None).classify(ext4).level is Level.INSTANCE
    assert StorageMap([ext4], get_profile("generic"), None).classify(ext4).level is Level.PERSISTENT


def test_lambda_filesystems_under_the_profile_roots_are_persistent():
    fs = mount("/lambda/nfs/team", "ext4", "/dev/vdb")
    storage = StorageMap([mount("/", "ext4", "/dev/vda1"), fs], get_profile("lambda"), None)
    assert storage.classify(fs).level is Level.PERSISTENT
    assert [s.mount.mount_point for s in storage.volumes()] == ["/lambda/nfs/team"]


def test_provider_volume_comes_first_among_volumes():
    mounts = [
        mount("/", "overlay"),
        mount("/data", "nfs4", "nas:/d"),
        mount("/vol", "ext4", "/dev/sdb"),
        mount("/ro", "nfs4", "nas:/ro", options=["ro"]),
    ]
    pod = ProviderInfo(provider="runpod", pod_id="p", volume_mount_path="/vol", volume_gb=50)
    storage = StorageMap(mounts, get_profile("runpod"), pod)
    assert [s.mount.mount_point for s in storage.volumes()] == ["/vol", "/data"]
