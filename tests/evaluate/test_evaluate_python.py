"""python.torch-missing: torch must import where the job runs, when torch matters there."""

from __future__ import annotations

from evaluate_builders import gpus, laptop, no_torch, only, runpod_pod

from computefence.evaluate import evaluate_host
from computefence.models import CheckOptions, PackageFacts, Severity, TorchFacts


def _torch_finding(facts, checks=CheckOptions()):
    return only(evaluate_host(facts, checks), "python.torch-missing")


def test_importable_torch_passes():
    finding = _torch_finding(runpod_pod())
    assert finding.severity is Severity.PASS and "torch 2.4.1+cu124 imports in python3" in finding.message


def test_missing_torch_on_a_gpu_pod_blocks_with_the_cuda_build_for_the_driver():
    facts = runpod_pod().model_copy(
        update={
            "torch": no_torch(),
            "gpu": gpus(cuda="12.2"),
            "packages": PackageFacts(python_found=True, versions={"torch": None}),
        }
    )
    finding = _torch_finding(facts)
    assert finding.severity is Severity.BLOCK
    assert "No module named 'torch'" in finding.message
    # The newest release with a CUDA 12 build this driver (12.2) runs.
    assert finding.fix.commands == [
        "python3 -m pip install 'torch==2.5.*' --index-url https://download.pytorch.org/whl/cu121"
    ]


def test_missing_torch_on_a_cpu_laptop_is_a_skip_with_the_reason():
    finding = _torch_finding(laptop())
    assert finding.severity is Severity.SKIP and "no GPU here" in finding.message


def test_missing_torch_blocks_on_a_laptop_with_expect_gpu():
    finding = _torch_finding(laptop(), CheckOptions(expect_gpu=True))
    assert finding.severity is Severity.BLOCK and finding.fix.commands == ["python3 -m pip install torch"]


def test_installed_but_broken_torch_blocks_even_without_gpu():
    broken = no_torch().model_copy(update={"import_error": "ImportError: libtorch_cpu.so: cannot open shared object"})
    facts = laptop().model_copy(
        update={"torch": broken, "packages": PackageFacts(python_found=True, versions={"torch": "2.3.0"})}
    )
    finding = _torch_finding(facts)
    assert finding.severity is Severity.BLOCK and "torch 2.3.0 is installed" in finding.message
    assert finding.fix.commands == ["python3 -m pip install --force-reinstall torch==2.3.0"]


def test_broken_cuda_torch_is_reinstalled_at_its_own_version_from_its_own_index():
    # A later `pip install` replaced NCCL: the fix restores this release, never another one.
    broken = no_torch().model_copy(
        update={
            "import_error": "ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so: "
            "undefined symbol: ncclCommRegister"
        }
    )
    facts = runpod_pod().model_copy(
        update={"torch": broken, "packages": PackageFacts(python_found=True, versions={"torch": "2.5.1+cu124"})}
    )
    finding = _torch_finding(facts)
    assert finding.severity is Severity.BLOCK and "undefined symbol: ncclCommRegister" in finding.message
    assert finding.fix.commands == [
        "python3 -m pip install --force-reinstall torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124"
    ]


def test_named_interpreter_that_does_not_exist_blocks():
    facts = laptop().model_copy(update={"torch": TorchFacts(python="/opt/venv/bin/python", python_found=False)})
    finding = _torch_finding(facts)
    assert finding.severity is Severity.BLOCK and "/opt/venv/bin/python was not found" in finding.message
    assert finding.subject == "/opt/venv/bin/python"


def test_hanging_import_blocks_on_a_gpu_pod_and_warns_on_a_laptop():
    hung = TorchFacts(python_found=True, timed_out=True)
    assert _torch_finding(runpod_pod().model_copy(update={"torch": hung})).severity is Severity.BLOCK
    warned = _torch_finding(laptop().model_copy(update={"torch": hung}))
    assert warned.severity is Severity.WARN
    assert warned.fix.commands == ["timeout 300 python3 -c 'import torch; print(torch.__version__)'"]
