"""gpu.*: driver, torch build against the driver, architectures, memory and device counts."""

from __future__ import annotations

from evaluate_builders import env, gpus, laptop, no_torch, of, only, problems, runpod_pod, torch

from computefence.evaluate import evaluate_host
from computefence.evaluate.gpu import NO_GPU
from computefence.models import CheckOptions, CollectorStatus, Facts, GpuFacts, ProviderInfo, Severity
from computefence.policy import EffectivePolicy, Hardware

NO_CHECKS = CheckOptions()
GPU_CHECKS = (
    "gpu.driver",
    "gpu.cuda-unavailable",
    "gpu.torch-cpu-build",
    "gpu.driver-too-old",
    "gpu.arch-unsupported",
    "gpu.memory-in-use",
    "gpu.count-mismatch",
)


def _pod(**update) -> Facts:
    return runpod_pod().model_copy(update=update)


def _gpu_findings(facts: Facts, checks: CheckOptions = NO_CHECKS, provider=None):
    return [f for f in evaluate_host(facts, checks, provider) if f.check.startswith("gpu.")]


# ---------------------------------------------------------------- gpu.driver


def test_healthy_pod_passes_every_gpu_check():
    findings = _gpu_findings(runpod_pod())
    assert {f.check for f in findings} == set(GPU_CHECKS)
    assert problems(findings) == []
    assert only(findings, "gpu.driver").message == "driver 550.54.15 (CUDA 12.4) sees 1 GPU: NVIDIA H100 80GB HBM3"


def test_cpu_machine_gets_one_skip_with_the_reason_and_no_other_gpu_finding():
    findings = _gpu_findings(laptop())
    assert [(f.check, f.severity, f.message) for f in findings] == [("gpu.driver", Severity.SKIP, NO_GPU)]


def test_expect_gpu_turns_the_missing_gpu_into_a_blocker():
    finding = only(_gpu_findings(laptop(), CheckOptions(expect_gpu=True)), "gpu.driver")
    assert finding.severity is Severity.BLOCK
    assert "--expect-gpu" in finding.message
    assert finding.fix.commands == [] and "docker run --gpus all" in finding.fix.advice


def test_provider_gpu_count_makes_a_gpu_expected():
    pod = ProviderInfo(provider="runpod", pod_id="p1", gpu_count=2)
    finding = only(_gpu_findings(laptop(), NO_CHECKS, pod), "gpu.driver")
    assert finding.severity is Severity.BLOCK and "RunPod lists 2 GPU(s)" in finding.message


def test_driver_unreachable_blocks_with_the_real_message_and_skips_dependent_checks():
    text = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    facts = _pod(
        gpu=GpuFacts(
            nvidia_smi_found=True,
            nvidia_smi_path="/usr/bin/nvidia-smi",
            exit_code=9,
            error_output=text,
            device_nodes=["/dev/nvidiactl"],
        ),
        torch=torch(available=False, count=0),
    )
    findings = _gpu_findings(facts)
    driver = only(findings, "gpu.driver")
    assert driver.severity is Severity.BLOCK
    assert "exit 9" in driver.message and "couldn't communicate with the NVIDIA driver" in driver.message
    assert "\n" not in driver.message
    # The pod id comes from RUNPOD_POD_ID: the fix is the exact restart command.
    assert driver.fix.commands == ["runpodctl stop pod a1b2c3d4e5f6 && runpodctl start pod a1b2c3d4e5f6"]
    assert "move to another machine" in driver.fix.advice
    # The CUDA symptoms of the same cause are not reported twice.
    assert of(findings, "gpu.cuda-unavailable") == [] and of(findings, "gpu.memory-in-use") == []


def test_driver_failure_on_bare_metal_suggests_modprobe():
    facts = laptop().model_copy(update={"gpu": GpuFacts(nvidia_smi_found=True, exit_code=9, error_output="failed")})
    finding = only(_gpu_findings(facts), "gpu.driver")
    assert finding.severity is Severity.BLOCK
    assert finding.fix.commands == [
        "sudo modprobe nvidia && nvidia-smi",
        "sudo dmesg | grep -iE 'nvrm|xid' | tail -n 20",
    ]
    assert "ubuntu-drivers install" in finding.fix.advice


def test_hung_nvidia_smi_blocks():
    facts = _pod(gpu=GpuFacts(nvidia_smi_found=True, timed_out=True))
    finding = only(_gpu_findings(facts), "gpu.driver")
    assert finding.severity is Severity.BLOCK and "did not answer in time" in finding.message
    vast = ProviderInfo(provider="vast", pod_id="4242")
    assert only(_gpu_findings(facts, NO_CHECKS, vast), "gpu.driver").fix.commands == ["vastai reboot instance 4242"]
    # A machine with no provider restart command: the kernel log first; root needs no sudo.
    bare = facts.model_copy(update={"identity": facts.identity.model_copy(update={"provider_hints": {}})})
    fix = only(_gpu_findings(bare), "gpu.driver").fix
    assert fix.commands == ["dmesg | grep -iE 'nvrm|xid' | tail -n 20"] and fix.advice == "reboot the machine"


def test_gpu_collector_timeout_is_not_mistaken_for_no_gpu():
    facts = laptop()
    facts = facts.model_copy(
        update={"collectors": {"gpu": CollectorStatus(ok=False, timed_out=True, error="timed out after 10.0s")}}
    )
    finding = only(_gpu_findings(facts), "gpu.driver")
    assert finding.severity is Severity.BLOCK and "timed out after 10.0s" in finding.message


def test_device_nodes_without_nvidia_smi_block_unless_torch_uses_cuda():
    nodes = GpuFacts(device_nodes=["/dev/nvidia0", "/dev/nvidiactl"])
    blocked = only(_gpu_findings(_pod(gpu=nodes, torch=torch(available=False, count=0))), "gpu.driver")
    assert blocked.severity is Severity.BLOCK and "/dev/nvidia0" in blocked.message
    warned = only(_gpu_findings(_pod(gpu=nodes)), "gpu.driver")
    assert warned.severity is Severity.WARN and "torch uses CUDA" in warned.message


def test_nvidia_smi_listing_no_gpu_is_skipped_unless_one_is_expected():
    facts = laptop().model_copy(update={"gpu": GpuFacts(nvidia_smi_found=True, exit_code=0)})
    assert only(_gpu_findings(facts), "gpu.driver").severity is Severity.SKIP
    expected = only(_gpu_findings(facts, CheckOptions(expect_gpu=True)), "gpu.driver")
    assert expected.severity is Severity.BLOCK and "lists no GPUs" in expected.message


# ---------------------------------------------------------------- gpu.torch-cpu-build


def test_cpu_torch_on_a_gpu_pod_blocks_with_the_cuda_build_for_this_driver():
    facts = _pod(torch=torch(version="2.5.1+cpu", cuda=None, available=False, count=0, arch=[]))
    findings = _gpu_findings(facts)
    finding = only(findings, "gpu.torch-cpu-build")
    assert finding.severity is Severity.BLOCK and "CPU-only build" in finding.message
    assert finding.fix.commands == [
        "python3 -m pip uninstall -y torch && python3 -m pip install torch==2.5.1 "
        "--index-url https://download.pytorch.org/whl/cu124"
    ]
    assert of(findings, "gpu.cuda-unavailable") == []


def test_cpu_torch_fix_picks_the_newest_build_the_driver_runs():
    facts = _pod(
        gpu=gpus(driver="535.104.05", cuda="12.2"),
        torch=torch(version="2.3.1+cpu", cuda=None, available=False, count=0, arch=[], python="/opt/venv/bin/python"),
    )
    [command] = only(_gpu_findings(facts), "gpu.torch-cpu-build").fix.commands
    assert command.startswith("/opt/venv/bin/python -m pip uninstall -y torch")
    assert "torch==2.3.1 --index-url https://download.pytorch.org/whl/cu121" in command


def test_cpu_torch_on_a_cpu_machine_is_not_a_gpu_problem():
    facts = laptop().model_copy(update={"torch": torch(version="2.13.0+cpu", cuda=None, available=False, count=0)})
    assert problems(_gpu_findings(facts)) == []


# ---------------------------------------------------------------- gpu.driver-too-old


def test_driver_older_than_torch_cuda_blocks_and_offers_a_build_it_runs():
    facts = _pod(
        gpu=gpus(driver="535.104.05", cuda="12.2"),
        torch=torch(version="2.6.0+cu126", cuda="12.6", available=False, count=0),
    )
    findings = _gpu_findings(facts)
    finding = only(findings, "gpu.driver-too-old")
    assert finding.severity is Severity.BLOCK
    assert "built for CUDA 12.6" in finding.message and "supports CUDA 12.2 only" in finding.message
    assert "falls back to the CPU" in finding.message
    # The newest release with a CUDA 12 build the driver runs, rather than torch 2.6 on CUDA 11.8.
    assert "'torch==2.5.*' --index-url https://download.pytorch.org/whl/cu121" in finding.fix.commands[0]
    assert "driver supports CUDA 12.6" in finding.fix.advice
    # One root cause, one blocker: cuda-unavailable stays silent.
    assert of(findings, "gpu.cuda-unavailable") == []


def test_driver_too_old_for_every_build_says_so():
    facts = _pod(
        gpu=gpus(name="NVIDIA A100-SXM4-40GB", cap=None, driver="470.182.03", cuda="11.4"),
        torch=torch(version="2.6.0+cu126", cuda="12.6", available=False, count=0),
    )
    fix = only(_gpu_findings(facts), "gpu.driver-too-old").fix
    # Nothing to install helps: plain advice, no command.
    assert fix.commands == [] and fix.advice.startswith(
        "no published PyTorch CUDA build runs on this driver (CUDA 11.4)"
    )


# ---------------------------------------------------------------- gpu.cuda-unavailable


CUDA_802 = (
    "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
    "calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized "
    "(Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)"
)
CUDA_804 = (
    "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
    "calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was "
    "attempted on non supported HW (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)"
)
CUDA_999 = (
    "CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. "
    "changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero. "
    "(Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)"
)
CUDA_35 = (
    "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). Please update your "
    "GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
    "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
    "version of the CUDA driver. (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)"
)
CUDA_100 = "RuntimeError: No CUDA GPUs are available"


def _cuda_failure(error: str, **update) -> Facts:
    return _pod(torch=torch(available=False, count=0).model_copy(update={"cuda_error": error}), **update)


def test_error_802_keeps_the_whole_message_and_points_at_the_fabric_manager_not_torch():
    finding = only(_gpu_findings(_cuda_failure(CUDA_802, gpu=gpus(8))), "gpu.cuda-unavailable")
    assert finding.severity is Severity.BLOCK and finding.subject == "CUDA error 802"
    assert "Error 802: system not yet initialized; training would silently run on the CPU" in finding.message
    assert "Triggered internally" not in finding.message
    assert "pip" not in finding.fix.as_text()
    assert "fabric manager" in finding.fix.advice and "reinstalling torch cannot help" in finding.fix.advice
    assert finding.fix.commands[0] == "runpodctl stop pod a1b2c3d4e5f6 && runpodctl start pod a1b2c3d4e5f6"
    bare = _cuda_failure(CUDA_802, identity=runpod_pod().identity.model_copy(update={"provider_hints": {}}))
    assert only(_gpu_findings(bare), "gpu.cuda-unavailable").fix.commands == [
        "systemctl start nvidia-fabricmanager",
        "nvidia-smi -q | grep -A 2 -i fabric",
    ]


def test_error_999_needs_a_reset_or_reboot():
    finding = only(_gpu_findings(_cuda_failure(CUDA_999)), "gpu.cuda-unavailable")
    assert finding.subject == "CUDA error 999" and "Setting the available devices to be zero." in finding.message
    assert (
        "pip" not in finding.fix.as_text()
        and "runpodctl stop pod a1b2c3d4e5f6 && runpodctl start pod a1b2c3d4e5f6" in finding.fix.commands
    )


def test_error_100_is_the_container_not_seeing_the_devices():
    finding = only(_gpu_findings(_cuda_failure(CUDA_100)), "gpu.cuda-unavailable")
    assert finding.subject == "CUDA error 100"
    assert finding.fix.commands == ["ls -l /dev/nvidia*"] and "--gpus all" in finding.fix.advice
    assert "pip" not in finding.fix.as_text()


def test_error_35_installs_a_build_the_driver_runs():
    finding = only(_gpu_findings(_cuda_failure(CUDA_35, gpu=gpus(cuda=None))), "gpu.cuda-unavailable")
    assert finding.subject == "CUDA error 35" and "(found version 11040)" in finding.message
    assert "pip uninstall -y torch" in finding.fix.commands[0] and "newer driver" in finding.fix.advice


def test_error_804_is_a_forward_compatibility_mismatch():
    finding = only(_gpu_findings(_cuda_failure(CUDA_804)), "gpu.cuda-unavailable")
    assert (
        finding.subject == "CUDA error 804"
        and "forward compatibility was attempted on non supported HW" in finding.message
    )
    assert finding.fix.commands == ["ldconfig -p | grep -F libcuda.so"] and "LD_LIBRARY_PATH" in finding.fix.advice


def test_cuda_unavailable_blocks_with_the_error_and_a_reinstall():
    facts = _pod(torch=torch(available=False, count=0).model_copy(update={"cuda_error": "CUDA error: unknown error"}))
    finding = only(_gpu_findings(facts), "gpu.cuda-unavailable")
    assert finding.severity is Severity.BLOCK
    assert "cannot use CUDA although the driver sees 1 GPU(s): CUDA error: unknown error" in finding.message
    assert "whl/cu124" in finding.fix.commands[0] and "torch.cuda.init()" in finding.fix.advice


def test_cuda_visible_devices_hiding_every_gpu_is_named():
    facts = _pod(torch=torch(available=False, count=0), environment=env(CUDA_VISIBLE_DEVICES=""))
    finding = only(_gpu_findings(facts), "gpu.cuda-unavailable")
    assert finding.severity is Severity.BLOCK and "CUDA_VISIBLE_DEVICES=''" in finding.message
    assert finding.fix.commands == ["unset CUDA_VISIBLE_DEVICES"] and "~/.bashrc" in finding.fix.advice


# ---------------------------------------------------------------- gpu.arch-unsupported


def test_h100_with_a_torch_without_sm90_blocks():
    arch = ["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]
    facts = _pod(gpu=gpus(2), torch=torch(version="1.13.1+cu117", cuda="11.7", arch=arch, count=2))
    finding = only(_gpu_findings(facts), "gpu.arch-unsupported")
    assert finding.severity is Severity.BLOCK
    assert "no kernels for sm_90" in finding.message and "GPU 0,1" in finding.message
    assert finding.subject == "sm_90"
    # The newest release with a CUDA 12 build for sm_90 that this driver (12.4) runs.
    assert "'torch==2.6.*' --index-url https://download.pytorch.org/whl/cu124" in finding.fix.commands[0]


def test_same_major_binaries_and_ptx_cover_newer_gpus():
    rtx4090 = gpus(name="NVIDIA GeForce RTX 4090", cap="8.9")
    assert (
        only(_gpu_findings(_pod(gpu=rtx4090, torch=torch(arch=["sm_80", "sm_86"]))), "gpu.arch-unsupported").severity
        is Severity.PASS
    )
    assert (
        only(_gpu_findings(_pod(torch=torch(arch=["sm_80", "compute_80"]))), "gpu.arch-unsupported").severity
        is Severity.PASS
    )


def test_blackwell_needs_a_cuda_12_8_build():
    facts = _pod(gpu=gpus(name="NVIDIA RTX PRO 6000", cap="12.0", driver="570.124.06", cuda="12.8"))
    finding = only(_gpu_findings(facts), "gpu.arch-unsupported")
    assert finding.severity is Severity.BLOCK and finding.subject == "sm_120"
    assert "whl/cu128" in finding.fix.commands[0]


def test_capability_falls_back_to_torch_when_the_driver_does_not_report_it():
    facts = _pod(gpu=gpus(cap=None), torch=torch(arch=["sm_80"], cap="9.0"))
    assert only(_gpu_findings(facts), "gpu.arch-unsupported").severity is Severity.BLOCK


# ---------------------------------------------------------------- gpu.memory-in-use and gpu.count-mismatch


def test_busy_gpu_memory_warns_with_the_real_numbers():
    facts = _pod(gpu=gpus(used=71893))
    finding = only(_gpu_findings(facts), "gpu.memory-in-use")
    assert finding.severity is Severity.WARN
    assert "GPU 0 71893 of 81559 MiB" in finding.message and finding.subject == "GPU 0"
    assert finding.fix.commands == ["nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"]
    assert "kill the stale PIDs" in finding.fix.advice


def test_a_little_memory_in_use_is_normal():
    assert only(_gpu_findings(_pod(gpu=gpus(used=1024))), "gpu.memory-in-use").severity is Severity.PASS


def test_torch_seeing_fewer_gpus_than_the_driver_warns():
    facts = _pod(gpu=gpus(2), torch=torch(count=1))
    finding = only(_gpu_findings(facts), "gpu.count-mismatch")
    assert finding.severity is Severity.WARN and "torch sees 1 GPU(s), the driver lists 2" in finding.message


def test_cuda_visible_devices_set_machine_wide_hides_paid_gpus_and_the_fix_removes_it_there():
    facts = _pod(
        gpu=gpus(8),
        torch=torch(count=1),
        environment=env(CUDA_VISIBLE_DEVICES={"process": "0", "etc_environment": "0"}),
    )
    finding = only(_gpu_findings(facts), "gpu.count-mismatch")
    assert finding.severity is Severity.WARN
    assert "CUDA_VISIBLE_DEVICES=0 hides 7 of the 8 GPUs" in finding.message and "/etc/environment" in finding.message
    assert finding.fix.commands == [
        "sed -i '/^[[:space:]]*\\(export[[:space:]]\\+\\)\\?CUDA_VISIBLE_DEVICES=/d' -- /etc/environment"
    ]


def test_cuda_visible_devices_passes_when_the_policy_intends_that_many_gpus():
    facts = _pod(
        gpu=gpus(8),
        torch=torch(count=1),
        environment=env(CUDA_VISIBLE_DEVICES={"process": "0", "etc_environment": "0"}),
    )
    intended = EffectivePolicy(hardware=Hardware(gpu_count=1))
    finding = only(
        [f for f in evaluate_host(facts, NO_CHECKS, None, intended) if f.check == "gpu.count-mismatch"],
        "gpu.count-mismatch",
    )
    assert finding.severity is Severity.PASS and "as the policy's gpu_count 1 intends" in finding.message
    other = EffectivePolicy(hardware=Hardware(gpu_count=">=8"))
    assert only(evaluate_host(facts, NO_CHECKS, None, other), "gpu.count-mismatch").severity is Severity.WARN


def test_cuda_visible_devices_from_a_shell_startup_file_names_that_file():
    facts = _pod(
        gpu=gpus(2),
        torch=torch(count=1),
        environment=env(CUDA_VISIBLE_DEVICES={"process": "1", "file:/root/.bashrc": "1"}),
    )
    finding = only(_gpu_findings(facts), "gpu.count-mismatch")
    assert "set in /root/.bashrc" in finding.message and finding.fix.commands[0].endswith("-- /root/.bashrc")
    assert finding.fix.advice == "then log in again; or set the GPUs the job should use in the job's own command"


def test_a_bashrc_selection_the_probe_session_missed_still_warns():
    # After Ubuntu's "not interactive: return" guard: the probe's session sees all GPUs, a shell does not.
    facts = _pod(gpu=gpus(4), torch=torch(count=4), environment=env(CUDA_VISIBLE_DEVICES={"file:/root/.bashrc": "0"}))
    finding = only(_gpu_findings(facts), "gpu.count-mismatch")
    assert finding.severity is Severity.WARN
    assert finding.message.startswith("/root/.bashrc sets CUDA_VISIBLE_DEVICES=0 for interactive shells")
    [command] = finding.fix.commands
    assert command.startswith("sed -i ") and command.endswith("-- /root/.bashrc")


def test_cuda_visible_devices_from_the_container_or_nowhere_known():
    container = _pod(
        gpu=gpus(2), torch=torch(count=1), environment=env(CUDA_VISIBLE_DEVICES={"process": "1", "container": "1"})
    )
    finding = only(_gpu_findings(container), "gpu.count-mismatch")
    assert "the container's environment" in finding.message and "pod's template" in finding.fix.advice
    login = _pod(gpu=gpus(2), torch=torch(count=1), environment=env(CUDA_VISIBLE_DEVICES="1"))
    finding = only(_gpu_findings(login), "gpu.count-mismatch")
    assert "set in the login environment" in finding.message
    assert finding.fix.commands[0].startswith("grep -ns CUDA_VISIBLE_DEVICES ~/.bashrc")


def test_cuda_visible_devices_not_matching_what_torch_sees_warns():
    facts = _pod(gpu=gpus(4), torch=torch(count=1), environment=env(CUDA_VISIBLE_DEVICES="0,1"))
    finding = only(_gpu_findings(facts), "gpu.count-mismatch")
    assert finding.severity is Severity.WARN and finding.fix.commands == ["export CUDA_VISIBLE_DEVICES=0,1,2,3"]


def test_missing_torch_silences_torch_dependent_gpu_checks():
    findings = _gpu_findings(_pod(torch=no_torch()))
    assert {f.check for f in findings} == {"gpu.driver", "gpu.memory-in-use"}
