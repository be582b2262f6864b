"""accelerate.num-processes: processes per machine against the GPUs this machine shows."""

from __future__ import annotations

from evaluate_builders import gpus, laptop, of, only, runpod_pod, torch

from computefence.evaluate import evaluate_host
from computefence.models import AccelerateFacts, CheckOptions, GpuFacts, Severity

CONFIG = "/root/.cache/huggingface/accelerate/default_config.yaml"


def _config(**values) -> AccelerateFacts:
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "MULTI_GPU",
        "num_machines": 1,
        "gpu_ids": "all",
        "use_cpu": False,
    }
    config.update(values)
    return AccelerateFacts(path=CONFIG, found=True, config=config)


def _check(n_gpus: int, torch_count: int | None = None, checks: CheckOptions = CheckOptions(), **config):
    count = n_gpus if torch_count is None else torch_count
    facts = runpod_pod().model_copy(
        update={"gpu": gpus(n_gpus), "torch": torch(count=count), "accelerate": _config(**config)}
    )
    return only(evaluate_host(facts, checks), "accelerate.num-processes")


def test_one_process_per_gpu_passes():
    finding = _check(2, num_processes=2)
    assert finding.severity is Severity.PASS and finding.subject == CONFIG


def test_more_processes_than_gpus_blocks_with_the_real_count_and_path():
    finding = _check(1, num_processes=2)
    assert finding.severity is Severity.BLOCK
    assert "2 processes per machine" in finding.message and "1 visible GPU(s)" in finding.message
    assert finding.fix.commands == [f"sed -i -e 's/^num_processes:.*/num_processes: 1/' {CONFIG}"]
    assert finding.fix.advice == "or pass --num_processes 1 to accelerate launch"


def test_fewer_processes_than_gpus_warns_and_switches_a_single_process_config_to_multi_gpu():
    finding = _check(4, num_processes=1, distributed_type="NO")
    assert finding.severity is Severity.WARN and "3 stay idle" in finding.message
    [command] = finding.fix.commands
    assert "num_processes: 4" in command and "distributed_type: MULTI_GPU" in command


def test_num_processes_counts_all_machines():
    assert _check(8, num_processes=16, num_machines=2).severity is Severity.PASS
    blocked = _check(4, num_processes=16, num_machines=2)
    assert blocked.severity is Severity.BLOCK and "16 over 2 machines" in blocked.message
    assert "num_processes: 8" in blocked.fix.commands[0]
    assert _check(8, num_processes=3, num_machines=2).severity is Severity.WARN


def test_visible_gpus_are_what_torch_sees_and_what_gpu_ids_select():
    assert _check(2, torch_count=1, num_processes=2).severity is Severity.BLOCK
    assert _check(2, num_processes=1, gpu_ids="1").severity is Severity.PASS


def test_cpu_launch_configs_are_not_compared_with_gpus():
    assert _check(1, num_processes=4, distributed_type="MULTI_CPU").severity is Severity.SKIP
    assert _check(1, num_processes=4, use_cpu=True).severity is Severity.SKIP


def test_no_config_found_is_silent_unless_one_was_named():
    assert of(evaluate_host(runpod_pod(), CheckOptions()), "accelerate.num-processes") == []
    finding = only(
        evaluate_host(runpod_pod(), CheckOptions(accelerate_config="/workspace/acc.yaml")), "accelerate.num-processes"
    )
    assert finding.severity is Severity.BLOCK
    assert finding.fix.commands == ["accelerate config --config_file /workspace/acc.yaml"]


def test_unreadable_config_warns():
    facts = runpod_pod().model_copy(
        update={"accelerate": AccelerateFacts(path=CONFIG, found=True, error="line 3: bad indentation")}
    )
    finding = only(evaluate_host(facts, CheckOptions()), "accelerate.num-processes")
    assert finding.severity is Severity.WARN and "bad indentation" in finding.message


def test_config_on_a_machine_without_gpu_is_skipped_not_blocked():
    facts = laptop().model_copy(update={"accelerate": _config(num_processes=8)})
    finding = only(evaluate_host(facts, CheckOptions()), "accelerate.num-processes")
    assert finding.severity is Severity.SKIP and "no NVIDIA GPU" in finding.message


def test_broken_driver_leaves_the_count_to_gpu_driver():
    facts = runpod_pod().model_copy(
        update={
            "gpu": GpuFacts(nvidia_smi_found=True, exit_code=9, error_output="failed"),
            "torch": torch(available=False, count=0),
            "accelerate": _config(num_processes=2),
        }
    )
    assert of(evaluate_host(facts, CheckOptions()), "accelerate.num-processes") == []


def test_nonsense_num_processes_warns():
    assert _check(1, num_processes="two").severity is Severity.WARN
