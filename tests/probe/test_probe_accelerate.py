"""accelerate config found where accelerate looks, read without PyYAML."""

from __future__ import annotations

import json

import pytest
import yaml

from computefence.probe import accelerate

# As `accelerate config` writes them (yaml.safe_dump, sorted keys).
MULTI_GPU = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
enable_cpu_affinity: false
gpu_ids: all
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
"""

FSDP = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_use_orig_params: true
machine_rank: 0
main_process_ip: 10.0.0.4
main_process_port: 29500
main_training_function: main
mixed_precision: bf16
num_machines: 2
num_processes: 16
rdzv_backend: c10d
same_network: true
tpu_env: []
use_cpu: false
"""

DEEPSPEED = """\
compute_environment: LOCAL_MACHINE
deepspeed_config:
  gradient_accumulation_steps: 4
  gradient_clipping: 1.0
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 2
distributed_type: DEEPSPEED
dynamo_config: {}
gpu_ids: 0,1
num_processes: 2
tpu_env:
- ENV_A
- ENV_B
use_cpu: false
"""


@pytest.mark.parametrize("text", [MULTI_GPU, FSDP, DEEPSPEED])
def test_subset_parser_reads_what_accelerate_writes_like_pyyaml(text):
    assert accelerate._parse_accelerate_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: &anchor 1\n",
        "a: |\n  block\n",
        "a:\n    b: 1\n  c: 2\n",
        "just words\n",
        "- top-level list\n",
        "a: 'unterminated\n",
    ],
)
def test_subset_parser_refuses_other_yaml(text):
    with pytest.raises(ValueError):
        accelerate._parse_accelerate_yaml(text)


def test_default_location_under_the_hf_cache(pod):
    config = pod.home / ".cache" / "huggingface" / "accelerate" / "default_config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(FSDP)
    accelerate = pod.run().facts.accelerate
    assert accelerate.found and accelerate.path == str(config) and accelerate.origin == "default"
    assert accelerate.config["num_processes"] == 16 and accelerate.config["num_machines"] == 2
    assert accelerate.config["fsdp_config"]["fsdp_sharding_strategy"] == "FULL_SHARD"
    assert accelerate.error is None


def test_hf_home_and_json_config(pod):
    pod.env["HF_HOME"] = str(pod.root / "hf")
    config = pod.root / "hf" / "accelerate" / "default_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"num_processes": 4, "distributed_type": "MULTI_GPU"}))
    accelerate = pod.run().facts.accelerate
    assert accelerate.path == str(config) and accelerate.config == {"num_processes": 4, "distributed_type": "MULTI_GPU"}


def test_xdg_cache_home_and_nothing_found(pod):
    pod.env["XDG_CACHE_HOME"] = str(pod.root / "xdg")
    accelerate = pod.run().facts.accelerate
    assert not accelerate.found and accelerate.config == {} and accelerate.error is None
    assert accelerate.searched == [
        str(pod.root / "xdg" / "huggingface" / "accelerate" / "default_config.yaml"),
        str(pod.root / "xdg" / "huggingface" / "accelerate" / "default_config.json"),
    ]


def test_explicit_config_relative_to_cwd_wins(pod):
    (pod.cwd / "ds.yaml").write_text(DEEPSPEED)
    pod.env["ACCELERATE_CONFIG_FILE"] = str(pod.root / "elsewhere.yaml")
    accelerate = pod.run(accelerate_config="ds.yaml").facts.accelerate
    assert accelerate.path == str(pod.cwd / "ds.yaml") and accelerate.origin == "--accelerate-config"
    assert accelerate.config["deepspeed_config"]["zero_stage"] == 2 and accelerate.config["tpu_env"] == [
        "ENV_A",
        "ENV_B",
    ]


def test_env_config_file(pod):
    (pod.root / "multi.yaml").write_text(MULTI_GPU)
    pod.env["ACCELERATE_CONFIG_FILE"] = str(pod.root / "multi.yaml")
    accelerate = pod.run().facts.accelerate
    assert accelerate.origin == "ACCELERATE_CONFIG_FILE" and accelerate.config["num_processes"] == 8


def test_missing_explicit_config_and_broken_config_are_errors(pod):
    missing = pod.run(accelerate_config="/nope/config.yaml").facts.accelerate
    assert not missing.found and missing.error == "/nope/config.yaml: no such file"
    (pod.cwd / "bad.yaml").write_text("num_processes: 8\n  fsdp: x\n")
    broken = pod.run(accelerate_config="bad.yaml").facts.accelerate
    assert broken.found and broken.config == {} and "line 2" in broken.error
