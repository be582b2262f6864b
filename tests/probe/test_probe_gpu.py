"""GPU facts from fake nvidia-smi binaries that replay recorded driver output."""

from __future__ import annotations

import textwrap

import pytest
from probe_pod import processes_mentioning


def test_h100_driver_550(pod):
    pod.nvidia("h100x1")
    gpu = pod.run().facts.gpu
    assert gpu.nvidia_smi_found and gpu.nvidia_smi_path == str(pod.bin / "nvidia-smi")
    assert gpu.exit_code == 0 and not gpu.timed_out and gpu.error_output is None
    assert (gpu.driver_version, gpu.cuda_version) == ("550.54.15", "12.4")
    [device] = gpu.gpus
    assert device.index == 0 and device.name == "NVIDIA H100 80GB HBM3"
    assert device.uuid.startswith("GPU-") and device.memory_total_mib == 81559
    assert (device.memory_used_mib, device.compute_cap) == (0, "9.0")


@pytest.mark.parametrize(
    "scenario, count, name, driver, cuda, cap, used",
    [
        ("a100x2", 2, "NVIDIA A100-SXM4-80GB", "535.129.03", "12.2", "8.0", 4),
        ("h100x8", 8, "NVIDIA H100 80GB HBM3", "535.161.08", "12.2", "9.0", 0),
        ("rtx4090x1", 1, "NVIDIA GeForce RTX 4090", "550.127.05", "12.4", "8.9", 1),
        ("h100x1-busy", 1, "NVIDIA H100 80GB HBM3", "550.54.15", "12.4", "9.0", 71893),
    ],
)
def test_recorded_drivers(pod, scenario, count, name, driver, cuda, cap, used):
    pod.nvidia(scenario)
    gpu = pod.run().facts.gpu
    assert [g.index for g in gpu.gpus] == list(range(count))
    assert {(g.name, g.compute_cap, g.memory_used_mib) for g in gpu.gpus} == {(name, cap, used)}
    assert (gpu.driver_version, gpu.cuda_version) == (driver, cuda)
    assert len({g.uuid for g in gpu.gpus}) == count


def test_old_driver_without_compute_cap_is_queried_again_without_it(pod):
    pod.nvidia("a100x1-driver470")
    gpu = pod.run().facts.gpu
    assert gpu.exit_code == 0 and gpu.error_output is None
    assert (gpu.driver_version, gpu.cuda_version) == ("470.182.03", "11.4")
    [device] = gpu.gpus
    assert device.name == "NVIDIA A100-SXM4-40GB" and device.memory_total_mib == 40536
    assert device.compute_cap is None


def test_driver_unreachable_exit_9_is_a_fact(pod):
    pod.nvidia("driver-unreachable")
    pod.gpu_nodes(1)
    run = pod.run()
    gpu = run.facts.gpu
    assert gpu.nvidia_smi_found and gpu.exit_code == 9 and not gpu.timed_out
    assert gpu.error_output.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert gpu.gpus == [] and gpu.cuda_version is None
    assert gpu.device_nodes == [str(pod.dev / "nvidia0")]
    assert run.facts.collectors["gpu"].ok


def test_missing_nvidia_smi(pod):
    gpu = pod.run().facts.gpu
    assert not gpu.nvidia_smi_found and gpu.nvidia_smi_path is None and gpu.exit_code is None
    assert gpu.device_nodes == []


def test_device_nodes_are_listed_in_numeric_order(pod):
    pod.gpu_nodes(11)
    (pod.dev / "nvidia-uvm").touch()
    nodes = pod.run().facts.gpu.device_nodes
    assert nodes == [str(pod.dev / f"nvidia{i}") for i in range(11)]


def test_hung_nvidia_smi_costs_only_the_gpu_collector(pod):
    pod.nvidia("hang")
    pod.torch("cu124")
    run = pod.run(timeouts={"gpu": 2.0}, deadline_s=6.0)
    gpu = run.facts.gpu
    assert gpu.timed_out and gpu.exit_code is None and "did not answer" in gpu.error_output
    assert run.elapsed < 5.0, run.elapsed
    # Everything else still answered.
    for name in ("identity", "environment", "storage", "packages", "torch", "accelerate"):
        assert run.facts.collectors[name].ok, name
    assert run.facts.identity.hostname and run.facts.storage.mounts
    assert run.facts.torch.importable and run.facts.packages.versions["torch"] == "2.5.1+cu124"
    # The fake ignores SIGTERM like a process stuck in the driver: it must have been SIGKILLed.
    assert processes_mentioning(str(pod.bin / "nvidia-smi")) == []


def test_not_available_values_parse_to_none(pod):
    # Real drivers print bracketed placeholders for fields a GPU or mode cannot report.
    script = pod.bin / "nvidia-smi"
    script.write_text(
        textwrap.dedent("""\
        #!/bin/sh
        if [ -z "$1" ]; then
            echo "| NVIDIA-SMI 535.54.03              Driver Version: 535.54.03    CUDA Version: 12.2     |"
            exit 0
        fi
        echo "0, NVIDIA A100-SXM4-40GB MIG 3g.20gb, [N/A], 535.54.03, 40960, [Not Supported], 8.0"
        echo "1, NVIDIA GeForce RTX 3090, GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, 535.54.03, [N/A], 512, [Unknown Error]"
        """)
    )
    script.chmod(0o755)
    gpu = pod.run().facts.gpu
    first, second = gpu.gpus
    assert first.uuid is None and first.memory_used_mib is None and first.memory_total_mib == 40960
    assert second.memory_total_mib is None and second.compute_cap is None and second.memory_used_mib == 512
    assert gpu.cuda_version == "12.2"
