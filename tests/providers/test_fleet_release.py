"""`fleet release` against the fake provider APIs on loopback (RunPod through the real SDK):
the exact requests it sends, what it refuses, and what it never sends."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone

import pytest
from fake_api import Fault, lambda_instance, runpod_pod, vast_instance
from terminal_session import TerminalSession

from computefence.cli import main
from computefence.errors import ConfigError
from computefence.http import RetryPolicy
from computefence.models import (
    SCHEMA_VERSION,
    Facts,
    Finding,
    GpuDevice,
    GpuFacts,
    HostReport,
    HostStatus,
    ReleasePod,
    Remedy,
    Report,
    Severity,
    Target,
)
from computefence.operations import release
from computefence.session import PROVIDER_APIS, open_session, report_targets
from computefence.sources.lambda_cloud import LambdaSource
from computefence.sources.runpod import RunPodSource
from computefence.sources.vast import VastSource

LAMBDA_ID = "0920582c7ff041399e34823a0be62549"
ECC = "GPU 0 (NVIDIA H100 80GB HBM3): 2 uncorrectable ECC errors since boot"
JOB_KEYS = {"name", "provider", "pod_id", "machine_id", "action", "selected_by", "cost_per_hour", "outcome", "detail"}


def _ecc() -> Finding:
    return Finding(check="gpu.ecc", severity=Severity.BLOCK, message=ECC, remedy=Remedy.REPLACE, subject="GPU 0")


def _gpu_facts(used_mib: int = 3) -> Facts:
    return Facts(
        gpu=GpuFacts(
            nvidia_smi_found=True,
            exit_code=0,
            gpus=[GpuDevice(index=0, name="NVIDIA H100 80GB HBM3", memory_used_mib=used_mib, memory_total_mib=81559)],
        )
    )


def _host(target: Target, findings: list[Finding], *, status=HostStatus.OK, used_mib: int = 3) -> HostReport:
    return HostReport(
        name=target.name,
        status=status,
        host=target.host,
        port=target.port,
        provider=target.provider,
        facts=_gpu_facts(used_mib) if status is HostStatus.OK else None,
        findings=findings,
    )


def _report(hosts: list[HostReport], age: timedelta = timedelta(minutes=5)) -> Report:
    when = (datetime.now(timezone.utc) - age).isoformat(timespec="seconds")
    return Report(tool_version="test", kind="fleet", generated_at=when, hosts=hosts)


@pytest.fixture
def fleet(api, monkeypatch):
    """One RunPod pod, one Vast instance and one Lambda instance with ECC errors, and the
    targets discovery makes of them (their report entries are built from those)."""
    for provider, var in (("runpod", "RUNPOD_API_BASE_URL"), ("vast", "VAST_URL"), ("lambda", "LAMBDA_API_URL")):
        monkeypatch.setenv(var, api.base_url(provider))
    api.runpod_pods = [runpod_pod("rp1ecc", "rp-ecc", ssh=("203.0.113.10", 22101), cost=2.99, machine_id="m9x")]
    api.vast_instances = [vast_instance(4242, "vast-ecc", dph=0.4012, machine_id=31337, host_id=77)]
    api.lambda_instances = [lambda_instance(LAMBDA_ID, "lambda-ecc")]
    targets = {}
    for source in (RunPodSource(), VastSource(), LambdaSource()):
        for target in source.targets():
            targets[target.name] = target
    api.requests.clear()
    return targets


def _save(tmp_path, report: Report) -> str:
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json())
    return str(path)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["fleet", "release", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _writes(api) -> list:
    return [r for r in api.requests if r.method != "GET" and not (r.method == "POST" and "myself" in r.body)]


# ---------------------------------------------------------------- the dry run


def test_the_dry_run_prints_each_pod_its_finding_the_exact_call_and_the_money_and_sends_nothing(
    api, fleet, tmp_path, capsys
):
    report = _report([_host(fleet["rp-ecc"], [_ecc()]), _host(fleet["vast-ecc"], [_ecc()])])
    code, out, _ = _run(capsys, "--dry-run", "--from", _save(tmp_path, report))
    assert code == 0
    assert api.requests == []  # not even a listing
    runpod = api.base_url("runpod")
    assert f'call: runpod.stop_pod("rp1ecc"): POST {runpod}/graphql podStop(input: {{podId: "rp1ecc"}})' in out
    assert f'call: PUT {api.base_url("vast")}/api/v0/instances/4242/ {{"state": "stopped"}}' in out
    assert "would stop rp-ecc (runpod rp1ecc, $2.99/h) · gpu.ecc" in out
    assert "Plan: 2 pods to release, saving $3.39/h; nothing was called." in out


def test_the_dry_run_as_json_has_the_documented_shape(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["vast-ecc"], [_ecc()])])
    code, out, _ = _run(capsys, "--dry-run", "--from", _save(tmp_path, report), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and api.requests == []
    assert set(doc) == {"schema_version", "kind", "dry_run", "pods"}
    assert doc["kind"] == "release" and doc["dry_run"] is True
    [pod] = doc["pods"]
    assert set(pod) == JOB_KEYS
    assert pod == {
        "name": "vast-ecc",
        "provider": "vast",
        "pod_id": "4242",
        "machine_id": "31337",
        "action": "stop",
        "selected_by": ["gpu.ecc"],
        "cost_per_hour": 0.4012,
        "outcome": "would_release",
        "detail": f'PUT {api.base_url("vast")}/api/v0/instances/4242/ {{"state": "stopped"}}',
    }


# ---------------------------------------------------------------- acting: the exact requests


def test_yes_stops_a_runpod_pod_through_the_sdk_and_a_vast_instance_with_the_exact_requests(
    api, fleet, tmp_path, capsys
):
    report = _report([_host(fleet["rp-ecc"], [_ecc()]), _host(fleet["vast-ecc"], [_ecc()])])
    code, out, _ = _run(capsys, "--from", _save(tmp_path, report), "--yes", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["dry_run"] is False
    assert [(p["name"], p["outcome"]) for p in doc["pods"]] == [("rp-ecc", "released"), ("vast-ecc", "released")]
    # The providers go in parallel: each one's requests in order, theirs interleaved.
    [rp_write] = [r for r in _writes(api) if r.provider == "runpod"]
    assert rp_write.method == "POST" and rp_write.path == "/graphql"
    assert rp_write.authorization == "Bearer test-runpod-key"
    # The SDK's own mutation text (runpod/api/mutations/pods.py), whitespace aside.
    query = " ".join(json.loads(rp_write.body)["query"].split())
    assert query == 'mutation { podStop(input: { podId: "rp1ecc" }) { id desiredStatus } }'
    vast_writes = [r for r in _writes(api) if r.provider == "vast"]
    assert [(r.method, r.path, json.loads(r.body), r.authorization) for r in vast_writes] == [
        ("PUT", "/api/v0/instances/4242/", {"state": "stopped"}, "Bearer test-vast-key")
    ]
    # Listed again before (and after) acting.
    assert [r.method for r in api.seen("vast")] == ["GET", "PUT", "GET"]
    assert "listed now as exited" in doc["pods"][1]["detail"]
    assert api.vast_instances[0]["actual_status"] == "exited"
    assert api.runpod_pods[0]["desiredStatus"] == "EXITED"


def test_terminate_destroys_a_vast_instance_with_delete_and_a_lambda_instance_with_its_operation(
    api, fleet, tmp_path, capsys
):
    report = _report([_host(fleet["vast-ecc"], [_ecc()]), _host(fleet["lambda-ecc"], [_ecc()])])
    code, out, _ = _run(capsys, "--from", _save(tmp_path, report), "--yes", "--action", "terminate", "--format", "json")
    assert code == 0
    assert [p["outcome"] for p in json.loads(out)["pods"]] == ["released", "released"]
    writes = sorted((r.provider, r.method, r.path, json.loads(r.body or "null"), r.authorization) for r in _writes(api))
    assert writes == [
        (
            "lambda",
            "POST",
            "/api/v1/instance-operations/terminate",
            {"instance_ids": [LAMBDA_ID]},
            "Bearer test-lambda-key",
        ),
        ("vast", "DELETE", "/api/v0/instances/4242/", None, "Bearer test-vast-key"),
    ]
    assert api.vast_instances == [] and api.lambda_instances[0]["status"] == "terminating"


def test_lambda_has_no_stop_so_it_is_refused_without_action_terminate(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["lambda-ecc"], [_ecc()])])
    code, out, _ = _run(capsys, "--from", _save(tmp_path, report), "--yes", "--format", "json")
    [pod] = json.loads(out)["pods"]
    assert code == 0 and pod["outcome"] == "refused" and pod["action"] is None
    assert pod["detail"] == "Lambda Cloud has no stop: pass --action terminate to destroy it"
    assert _writes(api) == []


# ---------------------------------------------------------------- refusals


def test_every_refusal_is_listed_with_its_reason_and_nothing_is_sent(api, fleet, tmp_path, capsys):
    throttled = Finding(check="gpu.throttle", severity=Severity.WARN, message="clocked down", remedy=Remedy.REPLACE)
    inventory_pod = HostReport(
        name="box-from-inventory", status=HostStatus.OK, host="10.0.0.5", port=22, facts=_gpu_facts(), findings=[_ecc()]
    )
    report = _report(
        [
            _host(fleet["rp-ecc"], [_ecc()], used_mib=30000),  # a job holds 30 GB
            _host(fleet["vast-ecc"], [throttled]),  # warnings only
            inventory_pod,
        ]
    )
    code, out, _ = _run(capsys, "--from", _save(tmp_path, report), "--yes", "--format", "json")
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    assert code == 0
    assert {name: p["outcome"] for name, p in pods.items()} == dict.fromkeys(pods, "refused")
    assert pods["rp-ecc"]["detail"] == "a job may be running: GPU memory already in use (GPU 0 30000 MiB)"
    assert pods["vast-ecc"]["detail"] == "warnings only (gpu.throttle), no blocker"
    assert pods["box-from-inventory"]["detail"].startswith("not from a provider API")
    assert api.requests == []


def test_the_memory_in_use_finding_refuses_a_pod_even_below_the_facts_threshold(api, fleet, tmp_path, capsys):
    busy = Finding(
        check="gpu.memory-in-use", severity=Severity.WARN, message="GPU memory already in use (GPU 0 2048 MiB)"
    )
    report = _report([_host(fleet["vast-ecc"], [_ecc(), busy])])
    code, out, _ = _run(capsys, "--from", _save(tmp_path, report), "--yes", "--format", "json")
    [pod] = json.loads(out)["pods"]
    assert code == 0
    assert pod["outcome"] == "refused" and pod["detail"].startswith("a job may be running: GPU memory already in use")
    assert api.requests == []


def test_a_report_older_than_max_age_is_refused_with_one_line(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["vast-ecc"], [_ecc()])], age=timedelta(hours=2))
    code, out, err = _run(capsys, "--from", _save(tmp_path, report), "--yes")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "older than --max-age 1h00m" in err
    assert api.requests == []
    code, _, _ = _run(capsys, "--dry-run", "--from", _save(tmp_path, report), "--max-age", "3h")
    assert code == 0


def test_a_checks_pattern_that_names_no_check_is_a_usage_error(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["vast-ecc"], [_ecc()])])
    code, _, err = _run(capsys, "--from", _save(tmp_path, report), "--checks", "gpu.eccc")
    assert code == 2 and "--checks 'gpu.eccc' names no check" in err


def test_checks_widens_to_a_fix_blocker_and_narrows_away_the_machine_faults(api, fleet, tmp_path, capsys):
    cpu_torch = Finding(check="gpu.torch-cpu-build", severity=Severity.BLOCK, message="CPU torch", remedy=Remedy.FIX)
    report = _report([_host(fleet["rp-ecc"], [cpu_torch]), _host(fleet["vast-ecc"], [_ecc()])])
    path = _save(tmp_path, report)
    _, out, _ = _run(capsys, "--dry-run", "--from", path, "--format", "json")
    assert [p["name"] for p in json.loads(out)["pods"]] == ["vast-ecc"]
    _, out, _ = _run(capsys, "--dry-run", "--from", path, "--format", "json", "--checks", "gpu.torch-cpu-build")
    assert [(p["name"], p["selected_by"]) for p in json.loads(out)["pods"]] == [("rp-ecc", ["gpu.torch-cpu-build"])]


# ---------------------------------------------------------------- the provider changed since the report


def test_a_recycled_id_a_gone_pod_and_a_stopped_one_are_reported_and_not_touched(api, fleet, tmp_path, capsys):
    api.runpod_pods.append(runpod_pod("rp2gone", "rp-gone", cost=1.0))
    api.vast_instances.append(vast_instance(4343, "vast-stopped", dph=0.3))
    targets = {t.name: t for s in (RunPodSource(), VastSource()) for t in s.targets()}
    report = _report([_host(targets[n], [_ecc()]) for n in ("rp-ecc", "rp-gone", "vast-ecc", "vast-stopped")])
    # Since the report: rp1ecc restarted on another port, rp2gone was terminated, 4343 stopped.
    api.runpod_pods[0] = runpod_pod("rp1ecc", "rp-ecc", ssh=("203.0.113.10", 22999), cost=2.99, machine_id="m9x")
    del api.runpod_pods[1]
    api.vast_instances[1].update(actual_status="exited", ports=None)
    api.requests.clear()
    code, out, _ = _run(capsys, "--from", _save(tmp_path, report), "--yes", "--format", "json")
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    assert code == 0
    assert {n: p["outcome"] for n, p in pods.items()} == {
        "rp-ecc": "changed",
        "rp-gone": "gone",
        "vast-ecc": "released",
        "vast-stopped": "already_stopped",
    }
    assert pods["rp-ecc"]["detail"] == (
        "changed since the report, not touched: SSH endpoint now 203.0.113.10:22999, the report saw 203.0.113.10:22101"
    )
    assert [(r.provider, r.method, r.path) for r in _writes(api)] == [("vast", "PUT", "/api/v0/instances/4242/")]


def test_a_pod_now_on_another_machine_is_changed(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["vast-ecc"], [_ecc()])])
    api.vast_instances[0]["machine_id"] = 99
    code, out, _ = _run(capsys, "--from", _save(tmp_path, report), "--yes", "--format", "json")
    [pod] = json.loads(out)["pods"]
    assert code == 0
    assert pod["outcome"] == "changed" and "now on machine 99, the report saw 31337" in pod["detail"]
    assert _writes(api) == []


# ---------------------------------------------------------------- failing APIs


def _plan_and_act(report: Report, sources) -> list:
    planned = release.plan(report, sources)
    return release.act(planned, sources, progress=lambda line: None)


def test_a_429_with_retry_after_is_waited_for_and_the_stop_then_sent(api, fleet, fast, sleeps):
    source = VastSource(policy=fast)
    report = _report([_host(fleet["vast-ecc"], [_ecc()])])
    # The listing goes through; the PUT is rate limited once.
    api.fail(
        "vast", Fault(200, json.dumps({"success": True, "instances": api.vast_instances, "next_token": None}).encode())
    )
    api.fail(
        "vast", Fault(429, b'{"detail": "API requests too frequent endpoint threshold=1.0"}', {"Retry-After": "3"})
    )
    [pod] = _plan_and_act(report, {"vast": source})
    assert pod.outcome == "released"
    assert sleeps.waits == [3.0]
    assert [(r.method, r.path) for r in api.seen("vast")] == [
        ("GET", "/api/v1/instances"),
        ("PUT", "/api/v0/instances/4242/"),
        ("PUT", "/api/v0/instances/4242/"),
        ("GET", "/api/v1/instances"),
    ]


def test_a_500_on_every_try_fails_that_pod_with_exit_1_and_the_key_echoed_in_it_is_redacted(
    api, fleet, fast, sleeps, tmp_path
):
    key = api.keys["lambda"]
    source = LambdaSource(policy=fast)
    report = _report([_host(fleet["lambda-ecc"], [_ecc()])])
    listing = json.dumps({"data": api.lambda_instances}).encode()
    api.fail("lambda", Fault(200, listing))
    echo = json.dumps({"error": {"code": "global/unknown", "message": f"backend failed for key {key}"}}).encode()
    api.fail("lambda", Fault(500, echo), times=3)
    planned = release.plan(report, {"lambda": source}, action="terminate")
    [pod] = release.act(planned, {"lambda": source}, progress=lambda line: None)
    assert pod.outcome == "failed"
    assert (
        pod.detail
        == "Lambda Cloud API failed with HTTP 500 (backend failed for key [redacted]) after 3 tries: retry later"
    )
    assert key not in pod.model_dump_json()
    assert release.exit_code(release.release_report([pod], dry_run=False)) == 1
    assert len([r for r in api.seen("lambda") if r.method == "POST"]) == 3


def test_a_vast_refusal_in_a_200_body_is_a_failure_and_a_key_in_it_is_redacted(api, fleet, fast):
    key = api.keys["vast"]
    source = VastSource(policy=fast)
    report = _report([_host(fleet["vast-ecc"], [_ecc()])])
    api.fail(
        "vast", Fault(200, json.dumps({"success": True, "instances": api.vast_instances, "next_token": None}).encode())
    )
    api.fail("vast", Fault(200, json.dumps({"success": False, "msg": f"key {key[::-1]} may not stop 4242"}).encode()))
    [pod] = _plan_and_act(report, {"vast": source})
    assert pod.outcome == "failed" and key[::-1] not in pod.detail and "[redacted]" in pod.detail


def test_a_listing_that_fails_before_acting_sends_nothing(api, fleet, tmp_path, capsys):
    api.fail("vast", Fault(403, b'{"success": false, "error": "forbidden", "msg": "account suspended"}'))
    report = _report([_host(fleet["vast-ecc"], [_ecc()])])
    code, out, _ = _run(capsys, "--from", _save(tmp_path, report), "--yes", "--format", "json")
    [pod] = json.loads(out)["pods"]
    assert code == 1 and pod["outcome"] == "failed"
    assert pod["detail"].startswith("could not list Vast.ai pods again, so nothing was sent: ")
    assert _writes(api) == []


def test_a_key_from_the_environment_is_never_printed(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["rp-ecc"], [_ecc()]), _host(fleet["vast-ecc"], [_ecc()])])
    path = _save(tmp_path, report)
    for argv in (("--dry-run",), ("--yes",), ("--dry-run", "--format", "json"), ("--yes", "--format", "json")):
        _, out, err = _run(capsys, "--from", path, *argv)
        for key in api.keys.values():
            assert key not in out and key not in err


# ---------------------------------------------------------------- the action log


def test_each_call_is_logged_before_it_is_sent_and_when_answered_without_the_key(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["rp-ecc"], [_ecc()]), _host(fleet["vast-ecc"], [_ecc()])])
    path = _save(tmp_path, report)
    code, _, _ = _run(capsys, "--dry-run", "--from", path)
    log = tmp_path / "home" / ".local" / "state" / "computefence" / "actions.jsonl"
    assert code == 0 and not log.exists()  # a dry run calls nothing, so logs nothing
    code, _, _ = _run(capsys, "--from", path, "--yes")
    assert code == 0
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    text = log.read_text()
    assert all(key not in text for key in api.keys.values())
    lines = [json.loads(line) for line in text.splitlines()]
    by_pod = {(e["pod_id"], e["event"]): e for e in lines}
    assert sorted(by_pod) == [("4242", "answer"), ("4242", "send"), ("rp1ecc", "answer"), ("rp1ecc", "send")]
    send, answer = by_pod["4242", "send"], by_pod["4242", "answer"]
    assert send["call"] == f'PUT {api.base_url("vast")}/api/v0/instances/4242/ {{"state": "stopped"}}'
    assert (answer["action"], answer["outcome"], answer["machine_id"]) == ("stop", "released", "31337")
    assert answer["command"] == "fleet release" and answer["report"] == path
    assert lines.index(send) < lines.index(answer)
    # Run again, both pods are already stopped: nothing is sent, so nothing is added.
    _, out, _ = _run(capsys, "--from", path, "--yes", "--format", "json")
    assert {p["outcome"] for p in json.loads(out)["pods"]} == {"already_stopped"}
    assert log.read_text() == text


def test_a_log_that_cannot_be_written_stops_the_run_before_any_provider_is_called(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["vast-ecc"], [_ecc()])])
    path = _save(tmp_path, report)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for log, says in (
        (tmp_path / "missing" / "actions.jsonl", "does not exist"),
        (tmp_path, "is a directory"),
        (fifo, "fifo"),
    ):
        code, _, err = _run(capsys, "--from", path, "--yes", "--log", str(log))
        assert code == 2 and err.count("\n") == 1 and "--log" in err, err
        assert says in err.lower() or "no such device" in err.lower(), err
    assert api.requests == []


def test_a_log_that_fails_mid_run_sends_no_unlogged_call_and_keeps_every_answer(api, fleet, tmp_path, monkeypatch):
    from computefence.operations import action_log

    sources = {"runpod": RunPodSource(), "vast": VastSource()}
    real_record = action_log.ActionLog.record

    def act_with_disk_full_at(failing: tuple[str, str], pod: str) -> ReleasePod:
        def record(self, event, **fields):
            if (event, fields["provider"]) == failing:
                raise ConfigError(f"--log {self.path}: No space left on device")
            real_record(self, event, **fields)

        monkeypatch.setattr(action_log.ActionLog, "record", record)
        report = _report([_host(fleet[pod], [_ecc()])])
        with action_log.open_log(tmp_path / f"{pod}.jsonl", {}) as log:
            [released] = release.act(release.plan(report, sources), sources, progress=lambda line: None, log=log)
        return released

    sent_unlogged = act_with_disk_full_at(("send", "vast"), "vast-ecc")
    assert sent_unlogged.outcome == "failed"
    assert sent_unlogged.detail.startswith("could not log the call, so nothing was sent: --log ")
    assert _writes(api) == []
    answered_unlogged = act_with_disk_full_at(("answer", "runpod"), "rp-ecc")
    assert answered_unlogged.outcome == "released" and "its answer is not logged: --log " in answered_unlogged.detail


# ---------------------------------------------------------------- --unreachable-runs


def _history(tmp_path, runs: list[Report]):
    directory = tmp_path / "history"
    directory.mkdir()
    for i, run in enumerate(runs):
        (directory / f"20261201T20{i:02d}00Z.json").write_text(run.model_dump_json())
    return directory


def test_a_pod_unreachable_in_each_of_the_last_k_runs_is_released(api, fleet, tmp_path, capsys):
    rp, vast = fleet["rp-ecc"], fleet["vast-ecc"]
    down = HostStatus.UNREACHABLE

    def run(rp_status, vast_status):
        return _report([_host(rp, [], status=rp_status), _host(vast, [], status=vast_status)])

    history = _history(
        tmp_path, [run(down, HostStatus.OK), run(down, HostStatus.TIMEOUT), run(HostStatus.TIMEOUT, down)]
    )
    current = _save(tmp_path, run(HostStatus.TIMEOUT, down))
    _, out, _ = _run(
        capsys, "--dry-run", "--from", current, "--history", str(history), "--unreachable-runs", "3", "--format", "json"
    )
    assert [(p["name"], p["selected_by"]) for p in json.loads(out)["pods"]] == [("rp-ecc", ["unreachable"])]
    _, out, _ = _run(
        capsys, "--dry-run", "--from", current, "--history", str(history), "--unreachable-runs", "2", "--format", "json"
    )
    assert [p["name"] for p in json.loads(out)["pods"]] == ["rp-ecc", "vast-ecc"]
    # Fewer runs than asked: nobody is released for not answering.
    code, out, err = _run(
        capsys, "--dry-run", "--from", current, "--history", str(history), "--unreachable-runs", "4", "--format", "json"
    )
    assert code == 0 and json.loads(out)["pods"] == [] and "fewer than --unreachable-runs 4" in err
    assert api.requests == []


def test_a_pod_unreachable_before_but_ready_in_the_report_is_refused(api, fleet, tmp_path, capsys):
    rp = fleet["rp-ecc"]
    history = _history(tmp_path, [_report([_host(rp, [], status=HostStatus.UNREACHABLE)])] * 2)
    current = _save(tmp_path, _report([_host(rp, [])]))
    _, out, _ = _run(
        capsys, "--dry-run", "--from", current, "--history", str(history), "--unreachable-runs", "2", "--format", "json"
    )
    [pod] = json.loads(out)["pods"]
    assert pod["outcome"] == "refused" and pod["detail"] == "answered in this report and is ready"


def test_a_pod_that_stopped_answering_while_its_gpus_were_busy_is_refused(api, fleet, tmp_path, capsys):
    rp, vast = fleet["rp-ecc"], fleet["vast-ecc"]
    down = HostStatus.TIMEOUT
    busy_then = _report([_host(rp, [], used_mib=60000), _host(vast, [])])
    busy_then.generated_at = "2026-12-01T19:00:00+00:00"
    history = _history(
        tmp_path, [busy_then, *[_report([_host(rp, [], status=down), _host(vast, [], status=down)])] * 2]
    )
    current = _save(tmp_path, _report([_host(rp, [], status=down), _host(vast, [], status=down)]))
    _, out, _ = _run(
        capsys, "--dry-run", "--from", current, "--history", str(history), "--unreachable-runs", "2", "--format", "json"
    )
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    assert pods["rp-ecc"]["outcome"] == "refused"
    assert pods["rp-ecc"]["detail"] == (
        "a job may still be running: the last run it answered (2026-12-01T19:00:00+00:00) showed "
        "GPU memory already in use (GPU 0 60000 MiB)"
    )
    assert pods["vast-ecc"]["outcome"] == "would_release"


def test_unreachable_runs_without_history_is_a_usage_error(api, fleet, tmp_path, capsys):
    code, _, err = _run(capsys, "--from", _save(tmp_path, _report([])), "--unreachable-runs", "2")
    assert code == 2 and "--unreachable-runs needs --history DIR" in err


def test_discovery_records_the_machine_behind_each_pod(fleet):
    assert (fleet["rp-ecc"].provider.machine_id, fleet["rp-ecc"].provider.host_id) == ("m9x", None)
    assert (fleet["vast-ecc"].provider.machine_id, fleet["vast-ecc"].provider.host_id) == ("31337", "77")
    # Lambda Cloud does not say which machine an instance runs on.
    assert fleet["lambda-ecc"].provider.machine_id is None


def test_a_pod_id_not_of_the_providers_shape_is_refused_and_never_sent(api, fleet, tmp_path, capsys):
    # The SDK pastes the id into its GraphQL text: this one would terminate another pod.
    hostile = fleet["rp-ecc"].model_copy(deep=True)
    hostile.provider.pod_id = 'x" }) { id } podTerminate(input: { podId: "victim'
    code, out, _ = _run(
        capsys, "--from", _save(tmp_path, _report([_host(hostile, [_ecc()])])), "--yes", "--format", "json"
    )
    [pod] = json.loads(out)["pods"]
    assert code == 0 and pod["outcome"] == "refused" and pod["detail"].endswith("is not a RunPod id: not touched")
    assert api.requests == []


def test_the_result_goes_to_output_and_a_report_with_nothing_to_release_says_so(api, fleet, tmp_path, capsys):
    report = _report([_host(fleet["vast-ecc"], [])])
    target = tmp_path / "release.json"
    # Nothing to do: no question, even without a terminal, and the plan is the result.
    code, out, err = _run(capsys, "--from", _save(tmp_path, report), "--format", "json", "-o", str(target))
    assert code == 0 and out == "" and f"wrote the result to {target}" in err
    assert "computefence: nothing to release: no pod of the report needs a provider call" in err
    assert json.loads(target.read_text()) == {
        "schema_version": SCHEMA_VERSION,
        "kind": "release",
        "dry_run": True,
        "pods": [],
    }
    _, out, _ = _run(capsys, "--from", _save(tmp_path, report))
    assert "No pod to release" in out
    code, _, err = _run(capsys, "--from", _save(tmp_path, report), "--yes", "-o", str(tmp_path / "missing" / "x.json"))
    assert code == 2 and "does not exist" in err and api.requests == []


def test_lambda_instances_are_terminated_in_one_request_and_one_by_one_after_a_404(api, fleet, sleeps):
    api.lambda_instances.append(lambda_instance("ab" * 16, "lambda-ecc-2"))
    targets = {t.name: t for t in LambdaSource().targets()}
    report = _report([_host(targets["lambda-ecc"], [_ecc()]), _host(targets["lambda-ecc-2"], [_ecc()])])
    # Lambda's pacing (a request a second), the waits recorded rather than slept.
    source = LambdaSource(policy=RetryPolicy(min_interval_s=1.0, sleep=sleeps))
    api.requests.clear()
    pods = release.act(release.plan(report, {"lambda": source}, action="terminate"), {"lambda": source}, lambda _: None)
    assert [p.outcome for p in pods] == ["released", "released"]
    [post] = [r for r in api.requests if r.method == "POST"]
    assert json.loads(post.body) == {"instance_ids": [LAMBDA_ID, "ab" * 16]}
    # Listing, terminate, listing on one connection: the pacing spans all three.
    assert len(api.requests) == 3 and len(sleeps.waits) == 2 and all(0.5 < wait <= 1.0 for wait in sleeps.waits)

    # Gone between the listing and the call: the batch's 404 becomes one request per instance.
    api.lambda_instances = [lambda_instance(LAMBDA_ID, "lambda-ecc"), lambda_instance("ab" * 16, "lambda-ecc-2")]
    listing = json.dumps({"data": api.lambda_instances}).encode()
    api.fail("lambda", Fault(200, listing))
    gone = {"error": {"code": "global/object-does-not-exist", "message": "Specified instance does not exist."}}
    api.fail("lambda", Fault(404, json.dumps(gone).encode()), times=2)
    api.requests.clear()
    pods = release.act(release.plan(report, {"lambda": source}, action="terminate"), {"lambda": source}, lambda _: None)
    assert [p.outcome for p in pods] == ["gone", "released"]
    assert [json.loads(r.body)["instance_ids"] for r in api.requests if r.method == "POST"] == [
        [LAMBDA_ID, "ab" * 16],
        [LAMBDA_ID],
        ["ab" * 16],
    ]


def test_a_missing_key_for_one_provider_stops_the_run_before_anything_is_sent_to_any(
    api, fleet, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("VAST_API_KEY")
    report = _report([_host(fleet["rp-ecc"], [_ecc()]), _host(fleet["vast-ecc"], [_ecc()])])
    code, out, err = _run(capsys, "--from", _save(tmp_path, report), "--yes")
    assert code == 2 and out == "" and "Vast.ai: no API key found" in err
    assert _writes(api) == []


@pytest.mark.sshd
def test_end_to_end_a_real_fleet_check_then_release_stops_only_the_pod_with_a_machine_fault(
    api, start_pods, ssh_fleet, home, tmp_path, capsys, monkeypatch
):
    from sshfleet import PodSpec

    faulty, healthy = start_pods(
        PodSpec("vast-remap", nvidia_smi="a100x1-remap-pending", torch="cu124"),
        PodSpec("vast-good", nvidia_smi="h100x1", torch="cu124"),
    )
    (home / ".ssh").mkdir()
    key = home / ".ssh" / "id_ed25519"
    key.write_bytes(ssh_fleet.identity_file.read_bytes())
    key.chmod(0o600)
    known = tmp_path / "known_hosts"
    known.write_text(faulty.known_hosts_line() + healthy.known_hosts_line())
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("VAST_URL", api.base_url("vast"))
    api.vast_instances = [
        vast_instance(51, "vast-remap", direct=(faulty.host, faulty.port), dph=1.10, machine_id=9001),
        vast_instance(52, "vast-good", direct=(healthy.host, healthy.port), dph=2.20, machine_id=9002),
    ]
    saved = tmp_path / "fleet.json"
    code = main(
        ["fleet", "check", "--provider", "vast", "--known-hosts", str(known), "--format", "json", "-o", str(saved)]
    )
    capsys.readouterr()
    assert code == 1
    remap = {h.name: h for h in Report.model_validate_json(saved.read_text()).hosts}["vast-remap"]
    replace = [f.check for f in remap.blocking_findings if f.remedy is Remedy.REPLACE]
    assert replace == ["gpu.ecc"] and remap.provider.machine_id == "9001"

    api.requests.clear()
    code, out, _ = _run(capsys, "--dry-run", "--from", str(saved))
    assert code == 0 and api.requests == []
    assert "would stop vast-remap (vast 51, $1.10/h) · gpu.ecc" in out and "vast-good" not in out

    code, out, _ = _run(capsys, "--from", str(saved), "--yes", "--format", "json")
    [pod] = json.loads(out)["pods"]
    assert code == 0 and (pod["name"], pod["outcome"], pod["machine_id"]) == ("vast-remap", "released", "9001")
    assert [(r.method, r.path) for r in _writes(api)] == [("PUT", "/api/v0/instances/51/")]


# ---------------------------------------------------------------- the question


def test_the_plan_is_shown_in_full_before_the_question_and_yes_acts(api, fleet, tmp_path):
    report = _report([_host(fleet["rp-ecc"], [_ecc()]), _host(fleet["vast-ecc"], [_ecc()])])
    session = TerminalSession("fleet", "release", "--from", _save(tmp_path, report), env=dict(os.environ))

    before_question = session.read_until("[y/N]")
    assert _writes(api) == []  # nothing sent while it asks
    assert "would stop rp-ecc (runpod rp1ecc, $2.99/h) · gpu.ecc" in before_question
    assert f"call: PUT {api.base_url('vast')}/api/v0/instances/4242/ " in before_question
    assert "stop 2 pods (rp-ecc, vast-ecc), as listed above? [y/N]" in before_question

    session.type("y")
    assert session.finish() == 0, session.seen
    shown = re.sub(r"\x1b\[[0-9;]*m", "", session.seen)  # the result is coloured on a terminal
    assert "ComputeFence fleet release · acting" in shown
    assert sorted((r.provider, r.method, r.path) for r in _writes(api)) == [
        ("runpod", "POST", "/graphql"),
        ("vast", "PUT", "/api/v0/instances/4242/"),
    ]
    assert api.vast_instances[0]["actual_status"] == "exited" and api.runpod_pods[0]["desiredStatus"] == "EXITED"


def test_answered_no_sends_nothing_and_exits_1(api, fleet, tmp_path):
    report = _report([_host(fleet["vast-ecc"], [_ecc()]), _host(fleet["lambda-ecc"], [_ecc()])])
    argv = ("fleet", "release", "--from", _save(tmp_path, report), "--action", "terminate")
    session = TerminalSession(*argv, env=dict(os.environ))

    assert "terminate 2 pods (vast-ecc, lambda-ecc), as listed above? [y/N]" in session.read_until("[y/N]")
    session.type("n")
    assert session.finish() == 1
    assert "computefence: nothing released" in session.seen and "acting" not in session.seen
    assert api.requests == []


def test_without_a_terminal_it_needs_yes_or_dry_run(api, fleet, tmp_path, capsys):
    path = _save(tmp_path, _report([_host(fleet["vast-ecc"], [_ecc()])]))
    code, out, err = _run(capsys, "--from", path)
    assert code == 2 and out == "" and api.requests == []
    assert err == (
        "computefence: error: fleet release without a terminal needs --yes to act or --dry-run to plan (nothing was called)\n"
    )
    code, _, err = _run(capsys, "--from", path, "--yes", "--dry-run")
    assert code == 2 and "give one of them" in err and api.requests == []


# ---------------------------------------------------------------- the run session


def test_the_release_session_holds_the_reports_pods_and_reaches_them_only_through_their_providers(api, fleet):
    inventory_pod = Target(name="box", host="198.51.100.7")
    report = _report(
        [_host(fleet["vast-ecc"], [_ecc()]), _host(fleet["lambda-ecc"], [_ecc()]), _host(inventory_pod, [])]
    )

    with open_session(report_targets(report), connector=PROVIDER_APIS, verb="release") as session:
        apis = session.providers()
        hosts = session.probe()

    assert [t.name for t in session.targets] == ["vast-ecc", "lambda-ecc", "box"]
    assert {name: type(source) for name, source in apis.items()} == {"lambda": LambdaSource, "vast": VastSource}
    # Nothing is run on a pod: each is not checkable here, and no provider was called either.
    assert [(h.name, h.status) for h in hosts] == [
        (name, HostStatus.NOT_CHECKABLE) for name in ("vast-ecc", "lambda-ecc", "box")
    ]
    assert api.requests == []
