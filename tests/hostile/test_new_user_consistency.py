"""What a new user found contradictory in one report (#25, class 7): a warning suggesting a torch
build that the pod's own blocker says cannot run there, and one pod's script installing the same
package twice with two interpreters."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement

from computefence.cli import main
from computefence.cli.policy import starter_policy
from computefence.evaluate import evaluate_host
from computefence.evaluate.fingerprint import fingerprint
from computefence.models import CheckOptions, Facts, Severity
from computefence.policy import parse_policy_text


def _pip_lines(command: str) -> list[tuple[str, str]]:
    """(interpreter, package) for each package a pasted `... -m pip install|uninstall ...` names."""
    found = []
    for part in command.split("&&"):
        words = shlex.split(part)
        if len(words) > 3 and words[1:3] == ["-m", "pip"] and words[3] in ("install", "uninstall"):
            args = [w for i, w in enumerate(words[4:], 4) if not w.startswith("-") and words[i - 1] != "--index-url"]
            found += [(words[0], Requirement(arg).name.lower()) for arg in args]
    return found


@pytest.fixture(scope="module")
def demo_report_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "r.json"
    assert main(["fleet", "check", "--demo", "--no-policy", "--format", "json", "-o", str(out)]) == 1
    return out


@pytest.fixture(scope="module")
def demo_report(demo_report_file):
    return {h["name"]: h for h in json.loads(demo_report_file.read_text())["hosts"]}


def _problems(host: dict) -> list[dict]:
    return [f for f in host["findings"] if f["severity"] in ("warn", "block")]


def test_no_demo_pod_installs_a_package_twice_or_with_two_interpreters(demo_report):
    for name, host in demo_report.items():
        pip = [line for f in _problems(host) for step in f.get("fix_steps", []) for line in _pip_lines(step["run"])]
        # An uninstall and its install of one build are one fix: count the findings that touch each package.
        per_package = Counter(
            package
            for f in _problems(host)
            for package in {p for step in f.get("fix_steps", []) for _, p in _pip_lines(step["run"])}
        )
        assert [p for p, n in per_package.items() if n > 1] == [], name
        assert len({python for python, _ in pip}) <= 1, (name, pip)


def test_the_cpu_torch_pods_one_torch_fix_is_its_blocker_and_the_outlier_points_there(demo_report):
    host = demo_report["pod-cpu-torch"]
    [outlier] = [f for f in host["findings"] if f["check"] == "env.outlier"]
    assert outlier["fix_steps"] == []
    assert "gpu.torch-cpu-build's fix already installs torch" in outlier["fix_advice"]
    [blocker] = [f for f in host["findings"] if f["check"] == "gpu.torch-cpu-build"]
    # The interpreter the probe found for the job, whichever machine the demo runs on.
    job_python = host["facts"]["torch"]["python_executable"]
    assert blocker["fix_steps"][0]["run"].startswith(f"{shlex.quote(job_python)} -m pip uninstall")


def test_the_old_driver_pod_is_never_told_to_install_a_build_its_driver_cannot_run(demo_report):
    host = demo_report["pod-old-driver"]
    [blocker] = [f for f in host["findings"] if f["check"] == "gpu.driver-too-old"]
    assert "no published PyTorch CUDA build runs on this driver" in blocker["fix_advice"]
    [outlier] = [f for f in host["findings"] if f["check"] == "env.outlier"]
    assert outlier["fix_steps"] == [] and "pip" not in json.dumps(outlier)
    assert "cannot run here: this driver runs builds up to CUDA 11.4 only" in outlier["fix_advice"]
    assert "no command on this pod helps (see gpu.driver-too-old)" in outlier["fix_advice"]


# ---------------------------------------------------------------- PEP 440 specifiers in requirements

# packaging's SpecifierSet reads ">=2.4,," as ">=2.4"; pip refuses it, and so must the policy.
BAD_SPECIFIERS = [">=2.4,,", ",>=2.4", ">=2.4, ,<2.7", "=>2", ">=2.4 <2.7", "torch>=2", ">=2.4;"]
# Each place a policy file gives requirements, with the line the specifier is on.
PLACES = [
    ("requirements:\n  numpy: '*'\n  torch: {spec}\n", 3, "requirements.torch"),
    ("requirements: {{numpy: '*', torch: {spec}}}\n", 1, "requirements.torch"),
    (
        "requirements: {{numpy: '*'}}\noverrides:\n  - match: {{name: pod-*}}\n    requirements:\n      torch: {spec}\n",
        5,
        "overrides.0.requirements.torch",
    ),
]


@pytest.mark.parametrize("spec", BAD_SPECIFIERS)
@pytest.mark.parametrize(("text", "line", "where"), PLACES, ids=["block", "flow", "override"])
def test_an_invalid_specifier_is_file_colon_line_and_exit_2(
    tmp_path, capsys, demo_report_file, spec, text, line, where
):
    policy = tmp_path / "computefence.yaml"
    policy.write_text(text.format(spec=json.dumps(spec)))
    capsys.readouterr()
    for argv in (
        ["policy", "show", "--policy", str(policy)],
        ["fleet", "check", "--demo", "--policy", str(policy)],
        ["doctor", "--policy", str(policy)],
        ["report", "show", str(demo_report_file), "--policy", str(policy)],
    ):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, (argv, err)
        assert err.startswith(f"computefence: error: {policy}:{line}: {where}: {spec!r} is not a PEP 440"), err


# ---------------------------------------------------------------- GPU memory: one unit, one rounding

RUNPOD_POD = Path(__file__).resolve().parents[1] / "evaluate/cases/_facts/runpod-pod.json"


@settings(max_examples=300, deadline=None)
@given(mib=st.integers(min_value=1, max_value=400_000))
def test_policy_init_and_the_lock_state_gpu_memory_as_the_same_whole_gb_and_it_holds(mib):
    facts = Facts.model_validate_json(RUNPOD_POD.read_text())
    facts.gpu.gpus[0].memory_total_mib = mib
    policy = parse_policy_text(starter_policy(facts, "a test"), "computefence.yaml")
    written = policy.hardware.gpu_memory_gb
    assert written is not None and written.text.startswith(">=")
    assert written.text.removeprefix(">=") == fingerprint(facts)["gpu-memory-gb"]
    effective = policy.for_target("pod", [])
    [memory] = [f for f in evaluate_host(facts, CheckOptions(), None, effective) if f.subject == "gpu_memory_gb"]
    assert memory.severity is Severity.PASS
    assert memory.message.startswith(
        f"smallest GPU memory: {written.text.removeprefix('>=')} GB (10^9 bytes; {mib} MiB)"
    )


def test_the_demo_pods_policy_lock_and_check_agree_on_its_gpu_memory(tmp_path, capsys, demo_report_file):
    policy, lock = tmp_path / "computefence.yaml", tmp_path / "computefence.lock.json"
    assert main(["policy", "init", "--from", str(demo_report_file), "--pod", "pod-healthy", "-o", str(policy)]) == 0
    assert main(["fleet", "snapshot", "--demo", "--no-policy", "--from", "pod-healthy", "-o", str(lock)]) == 0
    [line] = [line for line in policy.read_text().splitlines() if "gpu_memory_gb" in line]
    # An H100's 81559 MiB: 85.5 GB, written and recorded as the same whole 86, and the unit said.
    assert line == '  gpu_memory_gb: ">=86"  # smallest GPU, whole GB of 10^9 bytes (nvidia-smi\'s 81559 MiB)'
    assert json.loads(lock.read_text())["fingerprint"]["gpu-memory-gb"] == "86"
    capsys.readouterr()
    argv = ["fleet", "check", "--demo", "--limit", "pod-healthy", "--policy", str(policy), "--baseline", str(lock)]
    assert main([*argv, "--format", "json"]) == 0
    [host] = json.loads(capsys.readouterr().out)["hosts"]
    [memory] = [f for f in host["findings"] if f["subject"] == "gpu_memory_gb"]
    assert memory["severity"] == "pass"
    assert memory["message"] == "smallest GPU memory: 86 GB (10^9 bytes; 81559 MiB) (gpu_memory_gb >=86)"
    [drift] = [f for f in host["findings"] if f["check"] == "env.drift"]
    assert drift["severity"] == "pass"


# ---------------------------------------------------------------- one pod, one install per package

CPU_TORCH = {"version": "2.5.1+cpu", "cuda_build": None, "cuda_available": False, "devices": [], "arch_list": []}
CAUSES = {
    "cpu-torch-and-a-torch-policy": ({"torch": CPU_TORCH}, "requirements: {torch: '>=2.6', torch-cuda: '>=12.4'}"),
    "old-driver-and-missing-arch": (
        {"torch": {"version": "2.6.0+cu126", "cuda_build": "12.6", "cuda_available": False, "arch_list": ["sm_80"]}},
        "requirements: {torch: '>=2.6'}",
    ),
    "torch-missing-and-required": (
        {"torch": {"importable": False, "version": None, "cuda_build": None, "import_error": "No module named torch"}},
        "requirements: {torch: '>=2.4', torch-cuda: '>=12.1', transformers: '>=4.50'}",
    ),
    "a-venv-interpreter": (
        {"torch": {**CPU_TORCH, "python": "python3", "python_executable": "/opt/venv/bin/python3"}},
        "requirements: {transformers: '>=4.50', torch: '>=2.6'}",
    ),
}


@pytest.mark.parametrize("cause", CAUSES)
def test_a_pod_with_several_causes_installs_each_package_once_with_one_interpreter(cause):
    patch, policy_text = CAUSES[cause]
    data = json.loads(RUNPOD_POD.read_text())
    for section, values in patch.items():
        data[section] = {**data[section], **values}
    facts = Facts.model_validate(data)
    policy = parse_policy_text(policy_text, "computefence.yaml").for_target("pod", [])
    findings = [f for f in evaluate_host(facts, CheckOptions(), None, policy) if f.severity.value in ("warn", "block")]
    installs = [
        (f.check, line) for f in findings for step in (f.fix.steps if f.fix else []) for line in _pip_lines(step.run)
    ]
    # An uninstall and its install of one build are one fix: count the findings that touch each package.
    per_package = Counter(package for _, package in {(check, package) for check, (_, package) in installs})
    assert installs and [p for p, n in per_package.items() if n > 1] == [], installs
    assert {python for _, (python, _) in installs} == {facts.torch.python_executable}
