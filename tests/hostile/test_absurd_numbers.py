"""Numbers no run survives unless it expects them: from a pod's answer, a provider's API, a
saved report, a policy or a lock. NaN, infinities, negatives, 1e308 TFLOPS and integers of
thousands of digits (Python's int() refuses more than 4,300) make that one pod
probe_failed with the field named, or read as unknown; never a pass, a traceback, or an
exit status decided by a crash.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from computefence import evaluate
from computefence.cli import main
from computefence.connectors.payload import parse_probe_output
from computefence.errors import ConfigError, ProbeOutputError
from computefence.evaluate import judge
from computefence.evaluate.torch_builds import parse_capability, parse_version
from computefence.models import CheckOptions, HostReport, HostStatus, Report, Severity
from computefence.models.base import _Fact
from computefence.policy import parse_policy_text
from computefence.sources.runpod import pod_target

DEMO = Path(__file__).resolve().parents[2] / "computefence/demo/recordings/fleet"
HEALTHY = DEMO / "1-pod-healthy.json"
DIGITS = "9" * 5000
BIG_INT = "1" + "0" * 400  # parses as JSON, overflows float()


def _answer() -> dict:
    facts = json.loads(json.loads(HEALTHY.read_text())["probe_output"])
    gpu = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "matmul_tflops": 700.0, "h2d_gbps": 50.0, "d2h_gbps": 50.0}
    facts["perf"] = {"ran": True, "gpus": [gpu, dict(gpu, index=1)], "interconnect_gbps": 300.0}
    return facts


def _with(path: str, raw_value: str) -> str:
    """The healthy answer as JSON text with the value at `path` replaced by raw JSON text."""
    facts = _answer()
    node = facts
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = "@@VALUE@@"
    return json.dumps(facts).replace('"@@VALUE@@"', raw_value)


@pytest.mark.parametrize(
    "path, value",
    [
        ("perf.gpus.0.matmul_tflops", "NaN"),
        ("perf.gpus.0.matmul_tflops", "Infinity"),
        ("perf.gpus.0.matmul_tflops", "-5.0"),
        ("perf.gpus.0.matmul_tflops", "1e308"),
        ("perf.gpus.1.h2d_gbps", "-Infinity"),
        ("perf.interconnect_gbps", "1e308"),
        ("identity.mem_total_bytes", BIG_INT),
        ("storage.paths.0.free_bytes", BIG_INT),
        ("gpu.gpus.0.memory_total_mib", BIG_INT),
        ("collectors.gpu.duration_s", "NaN"),
    ],
    ids=lambda v: v if len(v) < 40 else f"{len(v)}-digits",
)
def test_an_out_of_range_number_in_an_answer_is_probe_failed_naming_its_field(path, value):
    with pytest.raises(ProbeOutputError) as raised:
        parse_probe_output(_with(path, value))
    parent = path.rsplit(".", 1)[0]
    message = str(raised.value)
    assert message.startswith(f"probe output does not match the facts schema at {parent}")
    assert path.rsplit(".", 1)[1] in message


@pytest.mark.parametrize("value", [str(2**63 + 1), str(-(2**63) - 1)])
def test_a_number_just_beyond_the_fact_limit_is_probe_failed(value):
    with pytest.raises(ProbeOutputError, match=r"at gpu\.gpus\.0\.memory_used_mib: Input should be"):
        parse_probe_output(_with("gpu.gpus.0.memory_used_mib", value))
    assert parse_probe_output(_with("gpu.gpus.0.memory_used_mib", str(2**63))).gpu.gpus[0].memory_used_mib == 2**63


def test_a_fact_field_of_plain_int_is_refused_when_its_model_is_defined():
    # Its range would go unchecked: every whole-number fact is a FactInt.
    with pytest.raises(TypeError, match="Pod.free: a fact's whole number is a FactInt"):
        type("Pod", (_Fact,), {"__annotations__": {"free": "int | None"}, "free": None})


@pytest.mark.parametrize(
    "path, value",
    [
        ("gpu.cuda_version", f'"{DIGITS}"'),
        ("gpu.driver_version", f'"{DIGITS}.1"'),
        ("gpu.gpus.0.compute_cap", f'"{DIGITS}"'),
        ("gpu.gpus.0.compute_cap", f'"sm_{DIGITS}"'),
        ("torch.version", f'"2.{DIGITS}+cu124"'),
        ("torch.cuda_build", f'"12.{DIGITS}"'),
    ],
    ids=["cuda", "driver", "capability", "sm-capability", "torch", "torch-cuda"],
)
def test_a_version_of_thousands_of_digits_is_judged_without_a_crash(path, value):
    facts = parse_probe_output(_with(path, value))
    assert evaluate.evaluate_host(facts, CheckOptions(), None, None)


@pytest.mark.parametrize("text", [DIGITS, f"2.{DIGITS}", f"{DIGITS}.0", f"12.{DIGITS}+cu124", "1.1234567890"])
def test_a_version_part_longer_than_nine_digits_reads_as_unknown(text):
    assert parse_version(text) is None and parse_capability(text) is None
    assert parse_capability(f"sm_{DIGITS}") is None


def test_a_pod_whose_facts_break_a_rule_is_probe_failed_and_the_run_goes_on(monkeypatch):
    facts = parse_probe_output(json.dumps(_answer()))

    def rule_that_trips(facts, checks, ctx):
        if facts.identity.hostname == "tripping-pod":
            raise OverflowError("int too large to convert to float")
        return []

    # evaluate_host reads the rules where they are defined.
    monkeypatch.setattr(judge, "RULES", [*judge.RULES, rule_that_trips])
    tripping = facts.model_copy(update={"identity": facts.identity.model_copy(update={"hostname": "tripping-pod"})})
    bad = evaluate.judge_host(HostReport(name="a", status=HostStatus.OK, facts=tripping), CheckOptions(), None, None)
    good = evaluate.judge_host(HostReport(name="b", status=HostStatus.OK, facts=facts), CheckOptions(), None, None)

    assert bad.status is HostStatus.PROBE_FAILED and bad.facts is None
    assert bad.reason == (
        "its answer could not be judged (rule_that_trips: OverflowError: int too large to convert to float)"
    )
    assert good.status is HostStatus.OK and good.findings


def _replay_dir(tmp_path: Path, answer: str) -> Path:
    folder = tmp_path / "replay"
    shutil.copytree(DEMO, folder)
    recording = json.loads((folder / HEALTHY.name).read_text())
    recording["probe_output"] = answer
    (folder / HEALTHY.name).write_text(json.dumps(recording))
    return folder


@pytest.mark.parametrize("fmt", ["json", "junit", "prometheus"])
def test_one_pods_absurd_answer_costs_that_pod_only_in_every_format(fmt, tmp_path, capsys):
    folder = _replay_dir(tmp_path, _with("perf.gpus.0.matmul_tflops", "1e308"))
    code = main(["fleet", "check", "--replay", str(folder), "--format", fmt])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err  # the demo's other pods still block
    assert not re.search(r"\b(nan|[+-]?inf(inity)?)\b", out, re.IGNORECASE)
    if fmt == "json":
        hosts = {h.name: h for h in Report.model_validate_json(out).hosts}
        assert hosts["pod-healthy"].status is HostStatus.PROBE_FAILED
        assert "perf.gpus.0.matmul_tflops" in hosts["pod-healthy"].reason
        assert hosts["pod-cpu-torch"].status is HostStatus.OK and hosts["pod-cpu-torch"].blockers


def test_a_saved_report_holding_nan_is_refused_before_junit_or_prometheus_sees_it(tmp_path, capsys):
    assert main(["fleet", "check", "--demo", "--format", "json", "-o", str(tmp_path / "run.json")]) == 1
    text = (tmp_path / "run.json").read_text()
    (tmp_path / "nan.json").write_text(text.replace('"duration_s": ', '"duration_s": NaN, "was": ', 1))
    capsys.readouterr()
    for fmt in ("junit", "prometheus"):
        code = main(["report", "show", str(tmp_path / "nan.json"), "--format", fmt])
        out, err = capsys.readouterr()
        assert (code, out) == (2, "")
        assert err.startswith(f"computefence: error: {tmp_path / 'nan.json'}:") and "finite number" in err


@pytest.mark.parametrize(
    "text, field",
    [
        ("hardware:\n  gpu_memory_gb: .nan\n", "hardware.gpu_memory_gb"),
        ("hardware:\n  gpu_count: .inf\n", "hardware.gpu_count"),
        ("thresholds:\n  disk_warn_gb: .nan\n", "thresholds.disk_warn_gb"),
        (f"hardware:\n  gpu_count: {DIGITS}\n", "a number of 5000 digits is out of range"),
        (f"thresholds:\n  disk_warn_gb: {DIGITS}\n", "a number of 5000 digits is out of range"),
    ],
)
def test_a_policy_number_that_is_nan_infinite_or_thousands_of_digits_is_a_file_line_error(text, field):
    with pytest.raises(ConfigError) as raised:
        parse_policy_text(text, "computefence.yaml")
    assert str(raised.value).startswith("computefence.yaml:2: ") and field in str(raised.value)


def _lock(tmp_path: Path, capsys) -> dict:
    assert main(["fleet", "snapshot", "--demo", "-o", str(tmp_path / "lock.json")]) == 0
    capsys.readouterr()
    return json.loads((tmp_path / "lock.json").read_text())


@pytest.mark.parametrize("field", ["torch", "torch-cuda", "nvidia-driver", "driver-cuda", "gpu-count", "python"])
def test_a_lock_value_of_thousands_of_digits_is_drift_not_a_crash(field, tmp_path, capsys):
    lock = _lock(tmp_path, capsys)
    lock["fingerprint"][field] = DIGITS
    (tmp_path / "lock.json").write_text(json.dumps(lock, indent=2))
    code = main(["fleet", "check", "--demo", "--baseline", str(tmp_path / "lock.json"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    drift = [f for h in Report.model_validate_json(out).hosts for f in h.findings if f.check == "env.drift"]
    assert drift and all(f.severity is not Severity.PASS for f in drift)


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda lock: lock["fingerprint"].update({"gpu-count": 8}), ":{line}: not a computefence baseline lock"),
        (lambda lock: lock.update({"schema_version": int("9" * 400)}), ": its schema_version is not one any"),
    ],
)
def test_a_lock_with_a_non_text_value_or_absurd_version_is_one_error_line(change, expected, tmp_path, capsys):
    lock = _lock(tmp_path, capsys)
    change(lock)
    text = json.dumps(lock, indent=2)
    (tmp_path / "lock.json").write_text(text)
    expected = expected.format(line=text[: text.index('"gpu-count"')].count("\n") + 1)
    code = main(["fleet", "check", "--demo", "--baseline", str(tmp_path / "lock.json")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "upgrade" not in err
    assert err.startswith(f"computefence: error: {tmp_path / 'lock.json'}{expected}")


@pytest.mark.parametrize("raw", [float("nan"), float("inf"), "Infinity", "1e400", 10**400])
def test_a_provider_price_or_count_that_is_not_a_finite_number_reads_as_unknown(raw):
    pod = {"id": "p1", "name": "x", "desiredStatus": "RUNNING", "runtime": None, "costPerHr": raw, "gpuCount": raw}
    target = pod_target(pod, "x")
    assert target.provider.cost_per_hour is None and target.provider.gpu_count is None


# A CUDA version no release has: too many digits, an exponent, a sign, NaN as text.
ABSURD_CUDA = ["99999999999999999999.1", "12.4e5", "12.4E-1", "-12.4", "NaN", "Infinity", "1e400", "100.0", "12.4.1.1"]


@pytest.mark.parametrize("text", ABSURD_CUDA)
@pytest.mark.parametrize("path", ["gpu.cuda_version", "torch.cuda_build"])
def test_an_absurd_cuda_version_never_passes_the_driver_checks(path, text):
    facts = parse_probe_output(_with(path, json.dumps(text)))
    findings = evaluate.evaluate_host(facts, CheckOptions(), None, None)
    severities = {f.check: f.severity for f in findings}
    # The driver's own CUDA makes both checks unknown; torch's odd build only the comparison.
    judged = ["gpu.driver", "gpu.driver-too-old"] if path == "gpu.cuda_version" else ["gpu.driver-too-old"]
    assert [severities.get(check) for check in judged] == [Severity.WARN] * len(judged)
    for finding in (f for f in findings if f.check in judged):
        assert repr(text) in finding.message and "is not a CUDA version" in finding.message


@pytest.mark.parametrize("text", ["99999999999999999999.1", "12.4e5", "100.0"])
def test_an_absurd_driver_cuda_never_satisfies_a_policys_driver_cuda(text):
    facts = parse_probe_output(_with("gpu.cuda_version", json.dumps(text)))
    policy = parse_policy_text("requirements: {driver-cuda: '>=12.4'}", "computefence.yaml").for_target("p", [])
    [finding] = [f for f in evaluate.evaluate_host(facts, CheckOptions(), None, policy) if f.subject == "driver-cuda"]
    assert finding.severity is Severity.BLOCK and f"driver CUDA {text} is not a CUDA version" in finding.message


def test_an_absurd_driver_cuda_on_one_replayed_pod_is_no_pass_and_the_others_are_judged(tmp_path, capsys):
    folder = _replay_dir(tmp_path, _with("gpu.cuda_version", '"99999999999999999999.1"'))
    assert main(["fleet", "check", "--replay", str(folder), "--format", "json"]) == 1
    hosts = {h.name: h for h in Report.model_validate_json(capsys.readouterr().out).hosts}
    findings = {f.check: f for f in hosts["pod-healthy"].findings}
    assert findings["gpu.driver"].severity is Severity.WARN
    assert findings["gpu.driver-too-old"].severity is Severity.WARN
    assert "whether driver 550.54.15 runs torch 2.5.1+cu124 is unknown" in findings["gpu.driver-too-old"].message
    assert hosts["pod-cpu-torch"].blockers


def _hand_lock(**changes: object) -> dict:
    lock = {
        "schema_version": 1,
        "tool_version": "0.3.0",
        "generated_at": "2026-12-01T00:00:00+00:00",
        "reference": "majority",
        "pods": ["pod-a", "pod-b", "pod-c"],
        "fingerprint": {"torch": "2.5.1+cu124", "driver-cuda": "12.4"},
        "differing": {"torch": {"pod-c": "2.4.0+cu121"}},
    }
    lock.update(changes)
    return lock


def _error_for(path: Path, text: str, argv: list[str], capsys) -> str:
    path.write_text(text)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    return err.strip()


def _line(text: str, needle: str, nth: int = 0) -> int:
    """The line of the `nth` occurrence of `needle` in `text`."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    return text.count("\n", 0, at) + 1


@pytest.mark.parametrize(
    "lock, needle, nth",
    [
        # The key occurs twice (fingerprint and differing): the fingerprint's is the offending one.
        (_hand_lock(fingerprint={"torch": 5, "driver-cuda": "12.4"}), '"torch"', 0),
        (_hand_lock(differing={"torch": {"pod-c": 7}}), '"pod-c": 7', 0),
        # A list item: its own line, not the line of the list's key.
        (_hand_lock(pods=["pod-a", "pod-b", 9]), "9", 0),
    ],
    ids=["key-in-two-places", "nested-key", "list-item"],
)
def test_a_lock_error_names_the_line_of_the_offending_occurrence(lock, needle, nth, tmp_path, capsys):
    text = json.dumps(lock, indent=2)
    path = tmp_path / "lock.json"
    err = _error_for(path, text, ["fleet", "check", "--demo", "--baseline", str(path)], capsys)
    assert err.startswith(f"computefence: error: {path}:{_line(text, needle, nth)}: not a computefence baseline lock")


def test_a_key_given_twice_in_one_object_names_the_file_without_a_line(tmp_path, capsys):
    text = json.dumps(_hand_lock(), indent=2).replace('"driver-cuda": "12.4"', '"driver-cuda": "12.4",\n "torch": 5')
    path = tmp_path / "lock.json"
    err = _error_for(path, text, ["fleet", "check", "--demo", "--baseline", str(path)], capsys)
    assert err.startswith(f"computefence: error: {path} is not a computefence baseline lock (fingerprint.torch")


def test_a_missing_key_names_the_object_that_lacks_it_not_the_same_key_elsewhere(tmp_path, capsys):
    finding = {"check": "gpu.driver", "severity": "pass", "message": "m"}
    host = {"name": "a", "status": "ok", "findings": [finding, {"check": "gpu.ecc", "severity": "warn"}]}
    report = {
        "schema_version": 2,
        "tool_version": "0.3.0",
        "generated_at": "2026-12-01T00:00:00+00:00",
        "hosts": [host],
    }
    text = json.dumps(report, indent=2)
    path = tmp_path / "r.json"
    err = _error_for(path, text, ["report", "show", str(path)], capsys)
    second = _line(text, "{", 3)  # the report, its host, the first finding, then the second
    assert (
        err
        == f"computefence: error: {path}:{second}: not a computefence JSON report (hosts.0.findings.1.message: Field required)"
    )


@pytest.mark.parametrize(
    "value",
    ["4.48,,", "1.0 --index-url http://example.invalid", "latest", DIGITS + "x"],
    ids=["empty-part", "option-text", "word", "5000-digits"],
)
def test_a_lock_version_that_is_no_version_gets_words_not_a_pip_command(value, tmp_path, capsys):
    lock = _lock(tmp_path, capsys)
    lock["fingerprint"]["numpy"] = value
    (tmp_path / "lock.json").write_text(json.dumps(lock, indent=2))
    code = main(["fleet", "check", "--demo", "--baseline", str(tmp_path / "lock.json"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    [host] = [h for h in Report.model_validate_json(out).hosts if h.name == "pod-healthy"]
    [drift] = [f for f in host.findings if f.check == "env.drift"]
    assert drift.severity is Severity.WARN and not any("numpy" in command for command in drift.fix.commands)
    assert "is not a PEP 440 version: no pip command installs it" in drift.fix.advice
