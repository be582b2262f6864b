"""Environment facts with their sources, secrets redacted, hostile values survived."""

from __future__ import annotations

import os

SECRET = "hf_SuperSecretTokenValue123"


def _values(facts, name):
    return [(v.source, v.value, v.redacted) for v in facts.environment.variables.get(name, [])]


def test_each_value_carries_its_source(pod):
    pod.env["HF_HOME"] = "/workspace/hf"
    pod.env["CUDA_VISIBLE_DEVICES"] = "0,1"
    pod.container_env(b"HF_HOME=/workspace/.cache/hf\0NVIDIA_VISIBLE_DEVICES=all\0RUNPOD_POD_ID=k2x9q7w1m4\0")
    pod.etc_file("environment", 'PATH="/usr/local/sbin:/usr/bin"\n# comment\nHF_HUB_OFFLINE=1\n')
    pod.etc_file(
        "rp_environment",
        'export RUNPOD_POD_ID="k2x9q7w1m4"\nexport HF_HOME="/workspace/rp hf"\n'
        'export PUBLIC_KEY="ssh-ed25519 AAAA one\nssh-ed25519 BBBB two"\n'
        "export RUNPOD_GPU_COUNT='1'\n",
    )
    facts = pod.run().facts
    assert facts.environment.container_env_readable
    assert _values(facts, "HF_HOME") == [
        ("process", "/workspace/hf", False),
        ("container", "/workspace/.cache/hf", False),
        ("rp_environment", "/workspace/rp hf", False),
    ]
    assert _values(facts, "HF_HUB_OFFLINE") == [("etc_environment", "1", False)]
    assert _values(facts, "NVIDIA_VISIBLE_DEVICES") == [("container", "all", False)]
    assert _values(facts, "RUNPOD_GPU_COUNT") == [("rp_environment", "1", False)]
    assert _values(facts, "CUDA_VISIBLE_DEVICES") == [("process", "0,1", False)]
    # Only allow-listed variables are collected.
    assert "LANG" not in facts.environment.variables and "PUBLIC_KEY" not in facts.environment.variables
    assert facts.identity.provider_hints == {"RUNPOD_POD_ID": "k2x9q7w1m4", "RUNPOD_GPU_COUNT": "1"}


def test_hostile_values_keep_the_output_valid(pod):
    pod.env["HF_HOME"] = '/tmp/a\nb"c\\d\x1b[31m'
    pod.env["WANDB_DIR"] = "x" * 100_000
    pod.env["TORCH_HOME"] = os.fsdecode(b"/models/\xffcache")  # passed to the probe as raw bytes
    pod.container_env(b"HF_HOME=/data/\xff\xfe\x80cache\0VAST_CONTAINERLABEL=C.\xc3\x28\0NOEQUALS\0=novalue\0")
    pod.etc_file("environment", 'HF_DATASETS_CACHE="unterminated\n')
    run = pod.run()
    variables = run.facts.environment.variables
    assert variables["HF_HOME"][0].value == '/tmp/a\nb"c\\d\x1b[31m'
    assert variables["HF_HOME"][1].value == "/data/\ufffd\ufffd\ufffdcache"
    assert len(variables["WANDB_DIR"][0].value) < 5000
    assert variables["TORCH_HOME"][0].value == "/models/\ufffdcache"
    assert run.facts.identity.provider_hints["VAST_CONTAINERLABEL"] == "C.\ufffd("
    assert variables["HF_DATASETS_CACHE"][0].source == "etc_environment"
    assert run.stdout.isascii()


def test_unreadable_container_env(pod):
    (pod.proc / "1" / "environ").unlink(missing_ok=True)
    facts = pod.run().facts
    assert facts.environment.container_env_readable is False
    assert facts.collectors["environment"].ok


def test_identity(pod):
    pod.etc_file("apt/sources.list.d/lambda-repository.list", "deb http://archive.lambdalabs.com/ubuntu jammy main\n")
    pod.env["VAST_CONTAINERLABEL"] = "C.9481727"
    pod.env["CONTAINER_ID"] = "9481727"
    identity = pod.run().facts.identity
    assert identity.os_release.id == "ubuntu" and identity.os_release.version_id == "22.04"
    assert identity.os_release.pretty_name == "Ubuntu 22.04.4 LTS"
    assert identity.glibc and identity.glibc[0].isdigit()
    assert identity.mem_total_bytes == 263855104 * 1024
    assert identity.cpu_count >= 1 and identity.hostname and identity.kernel
    assert identity.cwd == str(pod.cwd) and identity.home == str(pod.home)
    assert identity.user and identity.uid is not None
    assert identity.provider_hints == {
        "VAST_CONTAINERLABEL": "C.9481727",
        "CONTAINER_ID": "9481727",
        "lambda": str(pod.etc / "apt/sources.list.d/lambda-repository.list"),
    }


def test_login_files_that_select_gpus_are_named(pod):
    (pod.home / ".bashrc").write_text('case $- in *i*) ;; *) return;; esac\nexport CUDA_VISIBLE_DEVICES="0"\n')
    pod.etc_file("profile.d/gpus.sh", "export CUDA_VISIBLE_DEVICES=0,1\nexport HF_HOME=/not/reported/from/here\n")
    pod.etc_file("ssh/sshd_config", "Port 22\nSetEnv CUDA_VISIBLE_DEVICES=3 LANG=C\n")
    variables = pod.run().facts.environment.variables
    assert _values_of(variables, "CUDA_VISIBLE_DEVICES") == [
        (f"file:{pod.home / '.bashrc'}", "0"),
        (f"file:{pod.etc / 'profile.d' / 'gpus.sh'}", "0,1"),
        (f"file:{pod.etc / 'ssh' / 'sshd_config'}", "3"),
    ]
    assert "HF_HOME" not in variables


def _values_of(variables, name):
    return [(v.source, v.value) for v in variables.get(name, [])]
