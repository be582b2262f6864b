"""The baseline lock, env.drift against it and env.outlier without one."""

from __future__ import annotations

import json

import pytest
from evaluate_builders import only, runpod_pod

from computefence.errors import ConfigError
from computefence.evaluate import finish_hosts
from computefence.evaluate.checks.environment import build_lock, differing_lines
from computefence.models import BaselineLock, CollectorStatus, HostReport, HostStatus, Severity
from computefence.policy import parse_policy_text


def pod(name: str, transformers: str = "4.48.0", cuda: str = "12.4", driver: str = "550.54.15") -> HostReport:
    facts = runpod_pod()
    facts.packages.versions["transformers"] = transformers
    facts.torch.cuda_build = cuda
    facts.gpu.driver_version = driver
    return HostReport(name=name, status=HostStatus.OK, facts=facts)


def test_lock_keeps_the_majority_and_names_the_pods_that_differ():
    lock = build_lock(
        [pod("a"), pod("b", transformers="4.41.2"), pod("c"), HostReport(name="down", status=HostStatus.UNREACHABLE)]
    )
    assert lock.pods == ["a", "b", "c"] and lock.reference == "majority"
    assert lock.fingerprint["transformers"] == "4.48.0" and lock.fingerprint["torch-cuda"] == "12.4"
    assert lock.differing == {"transformers": {"b": "4.41.2"}}
    assert differing_lines(lock) == ["transformers: recorded 4.48.0; differs on b 4.41.2"]
    # Stable: the same pods give the same document, field for field.
    again = build_lock([pod("c"), pod("a"), pod("b", transformers="4.41.2")])
    assert list(json.loads(again.model_dump_json())) == list(json.loads(lock.model_dump_json()))
    assert again.fingerprint == lock.fingerprint


def test_lock_from_one_pod_and_from_an_unknown_pod():
    lock = build_lock([pod("a"), pod("b", transformers="4.41.2"), pod("c")], from_pod="b")
    assert lock.fingerprint["transformers"] == "4.41.2" and lock.reference == "pod b"
    with pytest.raises(ConfigError, match="--from nope: not among the pods checked"):
        build_lock([pod("a")], from_pod="nope")


def test_drift_names_exactly_the_moved_fields_and_the_policy_raises_one():
    lock = build_lock([pod("ref")])
    moved = pod("moved", transformers="4.41.2", cuda="11.8")
    same = pod("same")
    [m, s] = finish_hosts([moved, same], {}, lock, only=[], skip=[])
    drift = only(m.findings, "env.drift")
    assert drift.severity is Severity.WARN
    assert drift.message == "differs from the baseline: torch CUDA build 12.4 → 11.8; transformers 4.48.0 → 4.41.2"
    assert drift.fix.commands == [
        "/usr/bin/python3 -m pip uninstall -y torch && /usr/bin/python3 -m pip install torch==2.4.1 "
        "--index-url https://download.pytorch.org/whl/cu124",
        "/usr/bin/python3 -m pip install transformers==4.48.0",
    ]
    assert only(s.findings, "env.drift").severity is Severity.PASS
    strict = parse_policy_text("severity: {env.drift.torch-cuda: block}", "computefence.yaml").for_target("moved", [])
    [raised] = finish_hosts([moved], {"moved": strict}, lock, only=[], skip=[])
    assert only(raised.findings, "env.drift").severity is Severity.BLOCK


def test_outlier_among_five_pods_only_for_what_the_job_imports():
    hosts = [pod("a"), pod("b"), pod("c"), pod("d", driver="535.104.05"), pod("e", transformers="4.41.2")]
    finished = {h.name: h for h in finish_hosts(hosts, {}, None, only=[], skip=[])}
    odd = only(finished["e"].findings, "env.outlier")
    assert odd.message == "transformers 4.41.2 here; 4 of 5 pods have 4.48.0"
    assert odd.severity is Severity.WARN and odd.subject == "transformers"
    # Another driver is normal between rented machines: no outlier for pod d.
    assert not [f for f in finished["d"].findings if f.check == "env.outlier"]
    assert not [f for h in ("a", "b", "c") for f in finished[h].findings if f.check == "env.outlier"]


def torch_pod(name: str, version: str, cuda: str | None) -> HostReport:
    host = pod(name, cuda=cuda)
    host.facts.torch.version = version
    return host


def test_a_torch_outlier_is_one_warning_whose_fix_installs_the_majority_build():
    hosts = [torch_pod(n, "2.5.1+cu124", "12.4") for n in "abc"]
    hosts += [torch_pod("cpu", "2.5.1+cpu", None), torch_pod("newer", "2.6.0+cu126", "12.6")]
    finished = {h.name: h for h in finish_hosts(hosts, {}, None, only=[], skip=[])}
    majority_build = (
        "/usr/bin/python3 -m pip uninstall -y torch && /usr/bin/python3 -m pip install torch==2.5.1 "
        "--index-url https://download.pytorch.org/whl/cu124"
    )
    for name, mine in (("cpu", "2.5.1+cpu"), ("newer", "2.6.0+cu126")):
        [odd] = [f for f in finished[name].findings if f.check == "env.outlier"]
        assert odd.message == f"torch {mine} here; 3 of 5 pods have 2.5.1+cu124"
        assert odd.fix.commands == [majority_build]


def test_with_a_baseline_drift_speaks_and_outlier_keeps_quiet():
    hosts = [pod("a"), pod("b"), pod("c"), pod("e", transformers="4.41.2")]
    finished = {h.name: h for h in finish_hosts(hosts, {}, build_lock(hosts), only=[], skip=[])}
    assert not [f for h in finished.values() for f in h.findings if f.check == "env.outlier"]
    assert only(finished["e"].findings, "env.drift").severity is Severity.WARN


def test_no_outlier_without_three_pods_or_a_strict_majority():
    two = finish_hosts([pod("a"), pod("b", transformers="4.41.2")], {}, None, only=[], skip=[])
    assert not [f for h in two for f in h.findings if f.check == "env.outlier"]
    split = finish_hosts(
        [pod("a"), pod("b", transformers="4.41.2"), pod("c", transformers="4.40.0"), pod("d", transformers="4.39.0")],
        {},
        None,
        only=[],
        skip=[],
    )
    assert not [f for h in split for f in h.findings if f.check == "env.outlier"]


def test_a_lock_from_a_newer_computefence_is_refused(tmp_path):
    from computefence.baseline import load_baseline

    path = tmp_path / "computefence.lock.json"
    path.write_text(BaselineLock(schema_version=99, tool_version="9", generated_at="x").model_dump_json())
    with pytest.raises(ConfigError, match="schema_version 99"):
        load_baseline(path)
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not a computefence baseline lock"):
        load_baseline(path)


def test_drift_back_to_a_build_the_driver_cannot_run_gets_words_not_a_command():
    lock = build_lock([pod("ref")])  # torch 2.4.1+cu124
    old = pod("old", cuda="12.6", driver="470.182.03")
    old.facts.gpu.cuda_version = "11.4"
    [finished] = finish_hosts([old], {}, lock, only=[], skip=[])
    drift = only(finished.findings, "env.drift")
    assert drift.message == (
        "differs from the baseline: torch CUDA build 12.4 → 12.6; NVIDIA driver 550.54.15 → 470.182.03; "
        "driver CUDA 12.4 → 11.4"
    )
    assert drift.fix.commands == []
    assert "the baseline's torch 2.4.1 (CUDA 12.4 build) cannot run here" in drift.fix.advice


def test_collectors_past_their_limits_are_no_drift_to_not_installed():
    lock = build_lock([pod("ref")])
    slow = pod("slow")
    slow.facts.torch = slow.facts.torch.model_copy(
        update={"importable": False, "version": None, "cuda_build": None, "timed_out": True}
    )
    slow.facts.packages = slow.facts.packages.model_copy(update={"versions": {}, "timed_out": True})
    slow.facts.collectors["gpu"] = CollectorStatus(ok=False, timed_out=True, error="timed out after 15.0s")
    slow.facts.gpu = slow.facts.gpu.model_copy(update={"driver_version": None, "cuda_version": None, "gpus": []})
    [host] = finish_hosts([slow], {}, lock, only=[], skip=[])
    drift = only(host.findings, "env.drift")
    # Unknown torch, packages and driver are left out of the comparison, never "not installed".
    assert drift.severity is Severity.PASS, drift.message
