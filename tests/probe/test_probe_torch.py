"""torch and package facts, from a subprocess of the training interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest
from probe_pod import processes_mentioning

H100_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


def test_cuda_build_sees_the_drivers_gpus(pod):
    pod.nvidia("h100x8")
    pod.torch("cu124")
    torch = pod.run().facts.torch
    assert torch.python_found and torch.importable and not torch.timed_out
    assert torch.python_executable == sys.executable
    assert (torch.version, torch.cuda_build, torch.hip_build) == ("2.5.1+cu124", "12.4", None)
    assert torch.cuda_available and torch.cuda_error is None and torch.device_count == 8
    assert {(d.name, d.capability, d.total_memory_bytes) for d in torch.devices} == {
        ("NVIDIA H100 80GB HBM3", "9.0", 81559 * 1024 * 1024)
    }
    assert [d.index for d in torch.devices] == list(range(8))
    assert torch.arch_list == H100_ARCHS
    assert (torch.cudnn_version, torch.nccl_version) == (90100, "2.21.5")
    assert torch.warnings == []


def test_cuda_visible_devices_limits_what_torch_sees(pod):
    pod.nvidia("h100x8")
    pod.torch("cu121-h100")
    pod.env["CUDA_VISIBLE_DEVICES"] = "0,3"
    facts = pod.run().facts
    assert len(facts.gpu.gpus) == 8
    assert facts.torch.device_count == 2 and facts.torch.version == "2.1.2+cu121"
    assert facts.torch.nccl_version == "2.18.1"


def test_build_without_sm90_on_h100(pod):
    pod.nvidia("h100x1")
    pod.torch("cu118-no-sm90")
    torch = pod.run().facts.torch
    assert torch.cuda_available and torch.devices[0].capability == "9.0"
    assert "sm_90" not in torch.arch_list and "sm_86" in torch.arch_list
    [warning] = torch.warnings
    assert (
        "NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch installation"
        in warning
    )


def test_driver_too_old_for_the_build(pod):
    pod.nvidia("a100x1-driver470")
    pod.torch("cu126-driver-too-old")
    torch = pod.run().facts.torch
    assert torch.importable and torch.cuda_build == "12.6"
    assert torch.cuda_available is False and torch.device_count == 0 and torch.arch_list == []
    assert torch.cuda_error.startswith(
        "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040)."
    )


def test_broken_driver_seen_from_torch(pod):
    pod.nvidia("driver-unreachable")
    pod.torch("cu124")
    torch = pod.run().facts.torch
    assert torch.cuda_available is False and torch.device_count == 0
    assert "CUDA unknown error" in torch.cuda_error


def test_cuda_build_without_any_driver_is_silently_unavailable(pod):
    pod.torch("cu124")
    torch = pod.run().facts.torch
    assert torch.cuda_available is False and torch.cuda_error is None and torch.devices == []


def test_cpu_build(pod):
    pod.nvidia("h100x1")
    pod.torch("cpu")
    torch = pod.run().facts.torch
    assert torch.version == "2.5.1+cpu" and torch.cuda_build is None
    assert torch.cuda_available is False and torch.arch_list == []
    assert torch.cudnn_version is None and torch.nccl_version is None


def test_import_error_is_a_fact(pod):
    pod.torch("import-error")
    run = pod.run()
    torch = run.facts.torch
    assert torch.python_found and not torch.importable
    assert torch.import_error == "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    # Installed but broken: the package metadata still names it.
    assert run.facts.packages.versions["torch"] == "2.5.1+cu124"


def test_hanging_import_is_killed_at_the_torch_timeout(pod):
    pod.torch("hang-on-import")
    run = pod.run(timeouts={"torch": 2.0})
    torch = run.facts.torch
    assert torch.timed_out and torch.python_found and not torch.importable
    assert run.elapsed < 5.0, run.elapsed
    assert run.facts.collectors["torch"].ok
    assert processes_mentioning(str(pod.site)) == []


def test_missing_interpreter(pod):
    run = pod.run(python="/opt/conda/envs/train/bin/python")
    for facts in (run.facts.torch, run.facts.packages):
        assert facts.python == "/opt/conda/envs/train/bin/python" and not facts.python_found
    assert "No such file" in run.facts.torch.import_error
    assert run.facts.packages.versions == {}


def test_packages_are_read_from_metadata_without_importing(pod):
    pod.torch("hang-on-import")  # importing torch would hang: metadata must not import it
    for name, version in (("flash_attn", "2.6.3"), ("transformers", "4.44.2")):
        dist = pod.site / f"{name}-{version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    run = pod.run(timeouts={"torch": 1.0})
    versions = run.facts.packages.versions
    assert run.facts.packages.python_found and run.facts.packages.error is None
    assert versions["torch"] == "2.5.1+cu124"
    assert versions["flash-attn"] == "2.6.3" and versions["transformers"] == "4.44.2"
    assert set(versions) == {
        "transformers",
        "accelerate",
        "peft",
        "trl",
        "datasets",
        "deepspeed",
        "flash-attn",
        "bitsandbytes",
        "xformers",
        "vllm",
        "torch",
        "numpy",
    }
    assert versions["vllm"] is None


def test_interpreter_that_is_not_python(pod):
    not_python = pod.bin / "python-broken"
    not_python.write_text(
        "#!/bin/sh\necho 'error while loading shared libraries: libpython3.10.so.1.0' >&2\nexit 127\n"
    )
    not_python.chmod(0o755)
    run = pod.run(python=str(not_python))
    assert run.facts.torch.python_found and not run.facts.torch.importable
    assert "libpython3.10.so.1.0" in run.facts.torch.import_error
    assert "libpython3.10.so.1.0" in run.facts.packages.error


def _real_torch_importable() -> bool:
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _real_torch_importable(), reason="torch is not installed in this interpreter")
def test_real_cpu_torch(pod):
    import torch as real

    run = pod.run(python=sys.executable)
    torch = run.facts.torch
    assert torch.importable and not torch.timed_out, torch.import_error
    assert torch.version == real.__version__ and torch.version.endswith("+cpu")
    assert torch.cuda_build is None and torch.hip_build is None
    assert torch.cuda_available is False and torch.device_count == 0 and torch.devices == []
    assert torch.arch_list == []
    assert run.facts.packages.versions["torch"] == real.__version__


def test_fabric_manager_stopped_gives_error_802_whole(pod):
    pod.nvidia("h100x8-fabric-manager-stopped")
    pod.torch("cu124")
    torch = pod.run().facts.torch
    assert torch.cuda_available is False and torch.device_count == 0
    assert torch.cuda_error == (
        "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? "
        "Error 802: system not yet initialized (Triggered internally at "
        "../c10/cuda/CUDAFunctions.cpp:108.)"
    )


def test_no_visible_device_is_asked_of_torch_cuda_init(pod):
    # CUDA error 100 is silent in is_available(); on a GPU machine the probe asks init() why.
    pod.nvidia("h100x1")
    pod.torch("cu124")
    pod.env["CUDA_VISIBLE_DEVICES"] = "7"
    torch = pod.run().facts.torch
    assert torch.cuda_available is False and torch.cuda_error == "RuntimeError: No CUDA GPUs are available"


def test_an_interpreter_too_slow_to_list_packages_is_unknown_not_empty(pod, tmp_path):
    # A loaded pod: the interpreter answers nothing within the limits, for torch or packages.
    slow = tmp_path / "slow-python"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    run = pod.run(python=str(slow), timeouts={"torch": 1.0, "packages": 1.0})
    packages, torch = run.facts.packages, run.facts.torch
    assert packages.timed_out and packages.versions == {}
    assert packages.error == f"{slow} did not answer within 0.5s"
    assert torch.timed_out and torch.import_error == "`import torch` did not finish within 0.5s"
    assert run.elapsed < 5.0, run.elapsed
