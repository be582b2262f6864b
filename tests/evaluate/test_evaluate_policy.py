"""policy.requirement, policy.hardware, custom.<id> and the policy's severities and skips."""

from __future__ import annotations

from evaluate_builders import GB, of, only, problems, runpod_pod
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from computefence.evaluate import evaluate_host, finish_hosts
from computefence.models import (
    CheckOptions,
    CollectorStatus,
    CustomCheckResult,
    HostReport,
    HostStatus,
    ProviderInfo,
    Severity,
)
from computefence.policy import parse_policy_text


def policy(text: str, name: str = "pod", tags: list[str] | None = None):
    return parse_policy_text(text, "computefence.yaml").for_target(name, tags or [])


def test_too_old_package_blocks_with_pip_fix_for_the_pods_interpreter():
    facts = runpod_pod()
    facts.packages.versions["transformers"] = "4.41.2"
    facts.torch.python_executable = "/opt/conda/bin/python"
    finding = only(
        evaluate_host(facts, CheckOptions(), policy=policy("requirements: {transformers: '>=4.48'}")),
        "policy.requirement",
    )
    assert finding.severity is Severity.BLOCK
    assert finding.message == "transformers 4.41.2 does not satisfy >=4.48"
    assert finding.fix.commands == ["/opt/conda/bin/python -m pip install 'transformers>=4.48'"]


def test_any_version_requires_the_package_installed_under_any_spelling():
    facts = runpod_pod()
    facts.packages.versions["flash_attn"] = None
    missing = only(
        evaluate_host(facts, CheckOptions(), policy=policy("requirements: {Flash-Attn: '*'}")), "policy.requirement"
    )
    assert missing.severity is Severity.BLOCK and "flash-attn is not installed" in missing.message
    assert missing.fix.commands == ["/usr/bin/python3 -m pip install flash-attn"]
    facts.packages.versions["flash_attn"] = "2.6.3"
    present = only(
        evaluate_host(facts, CheckOptions(), policy=policy("requirements: {flash_attn: '*'}")), "policy.requirement"
    )
    assert present.severity is Severity.PASS and "2.6.3" in present.message


def test_a_package_the_probe_did_not_look_up_is_a_warning_not_a_pass():
    finding = only(
        evaluate_host(runpod_pod(), CheckOptions(), policy=policy("requirements: {vllm: '>=0.6'}")),
        "policy.requirement",
    )
    assert finding.severity is Severity.WARN and "could not be checked" in finding.message


def test_torch_cuda_requirement_reuses_the_torch_build_choice():
    facts = runpod_pod()
    facts.torch.cuda_build, facts.torch.version = "11.8", "2.4.1+cu118"
    finding = only(
        evaluate_host(facts, CheckOptions(), policy=policy("requirements: {torch-cuda: '>=12.1'}")),
        "policy.requirement",
    )
    assert finding.message == "torch CUDA build 11.8 does not satisfy >=12.1"
    assert finding.fix.commands == [
        "/usr/bin/python3 -m pip uninstall -y torch && /usr/bin/python3 -m pip install "
        "torch==2.4.1 --index-url https://download.pytorch.org/whl/cu124"
    ]


def test_driver_requirement_says_which_machines_to_look_for_per_provider():
    facts = runpod_pod()
    vast = ProviderInfo(provider="vast", pod_id="123")
    runpod = ProviderInfo(provider="runpod", pod_id="abc")
    rule = policy("requirements: {nvidia-driver: '>=560'}")
    on_vast = only(evaluate_host(facts, CheckOptions(), vast, rule), "policy.requirement")
    assert on_vast.message == "NVIDIA driver 550.54.15 does not satisfy >=560"
    assert on_vast.fix.commands[0].startswith("vastai search offers 'cuda_max_good>=12.6'")
    on_runpod = only(evaluate_host(facts, CheckOptions(), runpod, rule), "policy.requirement")
    assert "CUDA Versions filter" in on_runpod.fix.advice and "12.6" in on_runpod.fix.advice


def test_hardware_mismatch_names_what_differs():
    facts = runpod_pod(n_gpus=2, shm=2 * GB)
    rule = policy("hardware: {gpu_model: '*A100*', gpu_count: 8, gpu_memory_gb: '>=80', shm_gb: 8}\n")
    findings = {f.subject: f for f in of(evaluate_host(facts, CheckOptions(), policy=rule), "policy.hardware")}
    assert findings["gpu_model"].message == "GPU model NVIDIA H100 80GB HBM3 does not match *A100*"
    assert findings["gpu_count"].message == "2 GPUs here, the policy expects gpu_count 8"
    assert findings["gpu_memory_gb"].severity is Severity.PASS  # 81559 MiB is 85.5 GB
    assert findings["shm_gb"].severity is Severity.BLOCK and "2.0 GB" in findings["shm_gb"].message


def test_gpus_that_could_not_be_listed_are_one_finding_not_a_wrong_model_and_count():
    facts = runpod_pod()
    facts.gpu.gpus, facts.gpu.exit_code, facts.torch.devices = [], 9, []
    findings = of(
        evaluate_host(facts, CheckOptions(), policy=policy("hardware: {gpu_model: '*H100*', gpu_count: 8}")),
        "policy.hardware",
    )
    assert [f.message for f in findings] == [
        "the GPUs could not be listed (see gpu.driver); the policy expects gpu_model *H100*, gpu_count 8"
    ]


def test_custom_check_results_become_one_finding_each():
    facts = runpod_pod()
    facts.custom = [
        CustomCheckResult(id="ok", exit_code=0, stdout="Logged in as bot", stdout_matched=True),
        CustomCheckResult(id="wrong-account", exit_code=0, stdout="Not logged in", stdout_matched=False),
        CustomCheckResult(id="fails", exit_code=1, stderr="wandb: not logged in"),
        CustomCheckResult(id="slow", timed_out=True, timeout_s=2, signal=9),
        CustomCheckResult(id="crash", signal=11),
    ]
    rule = policy("""
custom:
  - {id: ok, run: wandb status, expect: {stdout_matches: Logged in}}
  - {id: wrong-account, run: wandb status, expect: {stdout_matches: Logged in}}
  - {id: fails, run: wandb status, fix: wandb login}
  - {id: slow, run: sleep 60, timeout: 2, severity: warn}
  - {id: crash, run: ./crash}
  - {id: absent, run: "true"}
""")
    findings = {f.check: f for f in evaluate_host(facts, CheckOptions(), policy=rule) if f.check.startswith("custom.")}
    assert findings["custom.ok"].severity is Severity.PASS
    assert (
        findings["custom.wrong-account"].message == "`wandb status` printed nothing matching /Logged in/: Not logged in"
    )
    assert findings["custom.fails"].severity is Severity.BLOCK and findings["custom.fails"].fix.commands == [
        "wandb login"
    ]
    assert "exited 1 (expected 0): wandb: not logged in" in findings["custom.fails"].message
    assert findings["custom.slow"].severity is Severity.WARN and "2 s timeout" in findings["custom.slow"].message
    assert "killed by signal 11" in findings["custom.crash"].message
    assert findings["custom.absent"].message == "`true` did not run: the probe reported no result for it"
    facts.collectors["custom"] = CollectorStatus(ok=False, timed_out=True, error="timed out after 55.0s")
    [late] = [f for f in evaluate_host(facts, CheckOptions(), policy=rule) if f.check == "custom.absent"]
    assert late.message == "`true` did not run: timed out after 55.0s"


def test_severity_skip_and_thresholds_apply_per_target_after_overrides():
    facts = runpod_pod(volume=False)
    rule_text = """
severity: {storage.no-volume: warn, system: ignore}
thresholds: {disk_warn_gb: 50, disk_block_gb: 30}
overrides:
  - match: {tag: scratch}
    skip: [storage]
"""
    host = HostReport(name="pod", status=HostStatus.OK, facts=facts)
    plain = policy(rule_text)
    [judged] = finish_hosts(
        [host.model_copy(update={"findings": evaluate_host(facts, CheckOptions(), policy=plain)})],
        {"pod": plain},
        None,
        only=[],
        skip=[],
    )
    assert only(judged.findings, "storage.no-volume").severity is Severity.WARN
    assert not of(judged.findings, "system.shm")
    # 12 GB free on the container disk is under the policy's 30 GB block threshold.
    assert "under 30 GB" in problems(of(judged.findings, "storage.disk-headroom"))[0].message
    scratch = policy(rule_text, tags=["scratch"])
    [skipped] = finish_hosts(
        [host.model_copy(update={"findings": evaluate_host(facts, CheckOptions(), policy=scratch)})],
        {"pod": scratch},
        None,
        only=[],
        skip=[],
    )
    assert not [f for f in skipped.findings if f.check.startswith("storage.")]


versions = st.tuples(st.integers(0, 12), st.integers(0, 60), st.integers(0, 20)).map(lambda t: ".".join(map(str, t)))
specifiers = st.lists(
    st.tuples(st.sampled_from([">=", "<=", ">", "<", "==", "!="]), versions), min_size=1, max_size=3
).map(lambda parts: ",".join(op + v for op, v in parts))


@settings(max_examples=200, deadline=None)
@given(version=versions, spec=specifiers)
def test_a_version_satisfies_its_specifier_or_produces_exactly_one_finding(version, spec):
    facts = runpod_pod()
    facts.packages.versions["transformers"] = version
    findings = of(
        evaluate_host(facts, CheckOptions(), policy=policy(f"requirements: {{transformers: '{spec}'}}")),
        "policy.requirement",
    )
    assert len(findings) == 1
    satisfied = SpecifierSet(spec).contains(Version(version), prereleases=True)
    assert (findings[0].severity is Severity.PASS) == satisfied
