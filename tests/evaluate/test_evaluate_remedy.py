"""Every check declares its remedy class (fix, config, replace), and every finding carries it."""

from __future__ import annotations

import pytest
from evaluate_builders import gpus, only, runpod_pod, torch

from computefence.evaluate import CHECKS, CheckSpec, Remedy, evaluate_host
from computefence.models import CheckOptions, CustomCheckResult, Facts
from computefence.policy import parse_policy_text


def test_every_check_in_the_registry_declares_a_description_and_a_remedy():
    assert CHECKS, "the registry is empty"
    for check, spec in CHECKS.items():
        assert isinstance(spec, CheckSpec), check
        assert isinstance(spec.remedy, Remedy), check
        assert spec.description.strip(), check


def test_a_spec_without_a_remedy_or_with_a_plain_string_does_not_build():
    with pytest.raises(TypeError):
        CheckSpec("no remedy")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        CheckSpec("a string is not a Remedy", "replace")  # type: ignore[arg-type]


def test_machine_faults_are_replace_and_the_users_settings_are_config():
    remedies = {check: spec.remedy for check, spec in CHECKS.items()}
    for check in ("gpu.ecc", "gpu.pcie-link", "gpu.fabric-manager", "gpu.xid", "gpu.perf-compute"):
        assert remedies[check] is Remedy.REPLACE, check
    assert remedies["storage.output-dir"] is Remedy.CONFIG
    assert remedies["gpu.torch-cpu-build"] is Remedy.FIX
    # The signal that a job may be running is never a reason to give the pod back.
    assert remedies["gpu.memory-in-use"] is Remedy.FIX


def _driver_too_old(driver: str, cuda: str, name: str = "NVIDIA H100 80GB HBM3") -> Facts:
    return runpod_pod().model_copy(
        update={
            "gpu": gpus(name=name, cap=None, driver=driver, cuda=cuda),
            "torch": torch(version="2.6.0+cu126", cuda="12.6", available=False, count=0),
        }
    )


def test_a_driver_an_older_torch_build_runs_on_is_a_fix_and_one_no_build_runs_on_is_replace():
    fixable = only(evaluate_host(_driver_too_old("535.104.05", "12.2"), CheckOptions()), "gpu.driver-too-old")
    assert fixable.remedy is Remedy.FIX and fixable.fix.commands
    hopeless = only(evaluate_host(_driver_too_old("470.182.03", "11.4"), CheckOptions()), "gpu.driver-too-old")
    assert hopeless.remedy is Remedy.REPLACE and hopeless.fix.commands == []


def test_a_custom_check_takes_its_remedy_from_the_policy_and_defaults_to_fix():
    facts = runpod_pod()
    facts.custom = [CustomCheckResult(id="nvlink", exit_code=1), CustomCheckResult(id="login", exit_code=1)]
    policy = parse_policy_text(
        "custom:\n  - {id: nvlink, run: nvidia-smi nvlink -s, remedy: replace}\n  - {id: login, run: wandb status}\n",
        "computefence.yaml",
    )
    findings = {f.check: f for f in evaluate_host(facts, CheckOptions(), policy=policy.for_target("p", []))}
    assert findings["custom.nvlink"].remedy is Remedy.REPLACE
    assert findings["custom.login"].remedy is Remedy.FIX
