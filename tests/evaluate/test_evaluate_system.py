"""system.shm: DataLoader workers need shared memory."""

from __future__ import annotations

from evaluate_builders import GB, laptop, only, runpod_pod

from computefence.evaluate import evaluate_host
from computefence.models import CheckOptions, Severity, StorageFacts


def _shm(facts):
    return only(evaluate_host(facts, CheckOptions()), "system.shm")


def test_large_shm_passes():
    finding = _shm(runpod_pod(shm=30 * GB))
    assert finding.severity is Severity.PASS and finding.message == "/dev/shm is 30.0 GB"


def test_docker_default_64mb_shm_warns_with_a_remount_sized_for_the_machine():
    finding = _shm(runpod_pod(shm=64 * 10**6))
    assert finding.severity is Severity.WARN
    assert "64 MB (under 1 GB)" in finding.message and "bus error" in finding.message
    # 240 GB of RAM: half of it, capped at 64 GB; root needs no sudo.
    assert finding.fix.commands == ["mount -o remount,size=64G /dev/shm"]
    assert "--shm-size=64g" in finding.fix.advice and "num_workers=0" in finding.fix.advice
    assert finding.subject == "/dev/shm"


def test_shm_threshold_is_one_gb_decimal():
    assert _shm(runpod_pod(shm=10**9)).severity is Severity.PASS
    assert _shm(runpod_pod(shm=10**9 - 1)).severity is Severity.WARN


def test_missing_dev_shm_warns():
    facts = runpod_pod()
    paths = [
        p if p.role != "shm" else p.model_copy(update={"exists": False, "total_bytes": None})
        for p in facts.storage.paths
    ]
    facts = facts.model_copy(update={"storage": StorageFacts(mounts=facts.storage.mounts, paths=paths)})
    finding = _shm(facts)
    assert finding.severity is Severity.WARN and "does not exist" in finding.message


def test_cpu_laptop_shm_is_not_judged():
    facts = laptop()
    paths = [p if p.role != "shm" else p.model_copy(update={"total_bytes": 64 * 10**6}) for p in facts.storage.paths]
    facts = facts.model_copy(update={"storage": StorageFacts(mounts=facts.storage.mounts, paths=paths)})
    finding = _shm(facts)
    assert finding.severity is Severity.SKIP and "no GPU and no torch" in finding.message
