"""The demo fakes replay their recordings faithfully, under Python 3.8 too."""

from __future__ import annotations

import subprocess
import sys

import pytest
from probe_pod import PYTHON38

from computefence.demo import fakes

QUERY = [
    "--query-gpu=index,name,uuid,driver_version,memory.total,memory.used,compute_cap",
    "--format=csv,noheader,nounits",
]
INTERPRETERS = [sys.executable] + ([PYTHON38] if PYTHON38 else [])


def test_agreed_scenario_names():
    assert {"h100x1", "a100x2", "rtx4090x1", "h100x8", "driver-unreachable", "hang"} <= set(fakes.NVIDIA_SMI_SCENARIOS)
    assert {
        "cu124",
        "cu121-h100",
        "cu118-no-sm90",
        "cpu",
        "cu126-driver-too-old",
        "import-error",
        "hang-on-import",
    } <= set(fakes.TORCH_SCENARIOS)


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("scenario", ["h100x1", "a100x2", "rtx4090x1", "h100x8", "h100x1-busy"])
def test_nvidia_smi_replays_the_recording(tmp_path, python, scenario):
    script = fakes.write_fake_nvidia_smi(tmp_path, scenario)
    recorded = fakes._recording("nvidia-smi", f"{scenario}.query.csv")
    query = subprocess.run([python, str(script), *QUERY], capture_output=True, text=True, timeout=30)
    assert (query.returncode, query.stdout) == (0, recorded)
    table = subprocess.run([python, str(script)], capture_output=True, text=True, timeout=30)
    assert table.stdout == fakes._recording("nvidia-smi", f"{scenario}.txt")
    assert "Driver Version: " in table.stdout and "CUDA Version: " in table.stdout


@pytest.mark.parametrize("python", INTERPRETERS)
def test_nvidia_smi_units_header_and_unknown_fields(tmp_path, python):
    script = str(fakes.write_fake_nvidia_smi(tmp_path, "a100x2"))
    with_units = subprocess.run(
        [python, script, "--query-gpu=index,memory.total", "--format=csv"], capture_output=True, text=True, timeout=30
    )
    assert with_units.stdout == "index, memory.total [MiB]\n0, 81920 MiB\n1, 81920 MiB\n"
    old = str(fakes.write_fake_nvidia_smi(tmp_path / "old", "a100x1-driver470"))
    refused = subprocess.run([python, old, *QUERY], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and refused.stdout.startswith('Field "compute_cap" is not a valid field to query.')


def test_driver_unreachable_prints_the_real_failure(tmp_path):
    script = fakes.write_fake_nvidia_smi(tmp_path, "driver-unreachable")
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 9
    assert done.stdout == (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n\n"
    )


def test_rewriting_a_pod_replaces_its_torch(tmp_path):
    fakes.write_fake_torch(tmp_path, "cu124")
    fakes.write_fake_torch(tmp_path, "cpu")
    assert [p.name for p in tmp_path.glob("torch-*.dist-info")] == ["torch-2.5.1+cpu.dist-info"]
    done = subprocess.run(
        [sys.executable, "-B", "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path)},
        timeout=30,
    )
    assert done.stdout == "2.5.1+cpu\n"


def test_unknown_scenarios_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown nvidia-smi scenario 'v100'"):
        fakes.write_fake_nvidia_smi(tmp_path, "v100")
    with pytest.raises(ValueError, match="unknown torch scenario 'rocm'"):
        fakes.write_fake_torch(tmp_path, "rocm")


XML_SCENARIOS = [
    "h100x8",
    "h100x8-fabric-manager-stopped",
    "a100x1-remap-pending",
    "a100x1-mig",
    "rtx4090x1-driver535",
    "rtx4090x1-pcie-x4",
    "rtx4090x1-power-capped",
    "a100x1-driver470",
]


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("scenario", XML_SCENARIOS)
def test_nvidia_smi_replays_the_xml_recording(tmp_path, python, scenario):
    script = fakes.write_fake_nvidia_smi(tmp_path, scenario)
    for argv in (["-q", "-x"], ["-x", "-q"], ["--query", "--xml-format"]):
        done = subprocess.run([python, str(script), *argv], capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stdout) == (0, fakes._recording("nvidia-smi", f"{scenario}.xml"))
    assert done.stdout.startswith('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v1')


def test_a_scenario_without_a_table_says_so_instead_of_inventing_one(tmp_path):
    script = fakes.write_fake_nvidia_smi(tmp_path, "a100x1-mig")
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == "" and "has no recording of `nvidia-smi `" in done.stderr


def test_fabric_manager_stopped_makes_torch_fail_with_error_802(tmp_path):
    fakes.write_fake_nvidia_smi(tmp_path / "bin", "h100x8-fabric-manager-stopped")
    fakes.write_fake_torch(tmp_path / "site", "cu124")
    code = (
        "import warnings, torch\nwith warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n    print(torch.cuda.is_available())\n    print(w[0].message)\n"
        "try:\n    torch.cuda.init()\nexcept RuntimeError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-B", "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"},
    )
    available, warning, raised = done.stdout.splitlines()
    assert available == "False"
    assert warning == fakes._recording("torch", "cuda-error-802.txt").strip()
    assert raised.endswith("Error 802: system not yet initialized") and raised.startswith("Unexpected error")
