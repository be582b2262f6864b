"""A pod's environment holds credentials (the user's own, or planted): the probe collects only
allow-listed variables and redacts secrets among them by name and by value, on the pod, so no
secret is ever in the bytes the probe prints."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from computefence.models import EnvValue

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
from probe_pod import Pod

SECRET = "hf_SuperSecretTokenValue123"
REDACTED = EnvValue(source="process", value=None, redacted=True)


@pytest.fixture
def pod(tmp_path) -> Pod:
    return Pod(tmp_path / "pod")


def test_variables_off_the_allow_list_never_leave_the_pod(pod):
    for name in (
        "RUNPOD_API_KEY",
        "WANDB_API_KEY",
        "WANDB_APIKEY",
        "JUPYTER_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "DATABASE_URL",
        "MY_APP_CONFIG",
    ):
        pod.env[name] = SECRET
    pod.container_env(f"OPENAI_API_KEY={SECRET}\0".encode())
    pod.etc_file("rp_environment", f'export RUNPOD_API_KEY="{SECRET}"\nexport PUBLIC_KEY="ssh-ed25519 AAAA"\n')
    run = pod.run()
    assert SECRET.encode() not in run.stdout and b"SuperSecret" not in run.stdout
    variables = run.facts.environment.variables
    for name in ("RUNPOD_API_KEY", "WANDB_API_KEY", "WANDB_APIKEY", "OPENAI_API_KEY", "DATABASE_URL", "PUBLIC_KEY"):
        assert name not in variables, name


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "HF_API_KEY", "CUDA_SECRET", "NCCL_PASS", "TORCH_AUTH_HEADER", "HF_CREDENTIALS", "ACCELERATE_PWD"],
)
def test_allow_listed_names_that_hold_a_secret_are_redacted_by_name(pod, name):
    pod.env[name] = "not-a-token-shape"
    run = pod.run()
    assert b"not-a-token-shape" not in run.stdout
    assert run.facts.environment.variables[name] == [REDACTED]


@pytest.mark.parametrize(
    "value",
    [
        "hf_AbCdEfGhIjKlMnOp",
        "sk-proj-AbCdEfGhIjKl",
        "ghp_AbCdEfGhIjKlMnOp",
        "github_pat_11ABCDEFG0123456789",
        "xoxb-123456789012-abcdef",
        "AKIAIOSFODNN7EXAMPLE",
        "glpat-AbCdEfGhIjKl",
        "rpa_AbCdEfGhIjKlMn",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
        "--token hf_AbCdEfGhIjKlMnOp --verbose",
    ],
)
def test_a_credential_value_is_redacted_whatever_the_name(pod, value):
    pod.env["HF_ACCESS"] = value
    run = pod.run()
    assert value.encode() not in run.stdout
    assert run.facts.environment.variables["HF_ACCESS"] == [REDACTED]


@pytest.mark.parametrize(
    "value,shown",
    [
        ("https://user:pa/ss@hf-mirror.internal/api", "https://***@hf-mirror.internal/api"),
        ("https://user:p%40ss@hf-mirror.internal", "https://***@hf-mirror.internal"),
        ("user:hunter2@hf-mirror.internal:8080", "***@hf-mirror.internal:8080"),
        ("socks5h://me:pw@proxy:1080", "socks5h://***@proxy:1080"),
    ],
)
def test_userinfo_in_a_url_is_cut_with_or_without_a_scheme(pod, value, shown):
    pod.env["HF_ENDPOINT"] = value
    run = pod.run()
    assert run.facts.environment.variables["HF_ENDPOINT"][0].value == shown
    assert b"hunter2" not in run.stdout and b"pa/ss" not in run.stdout


def test_ordinary_values_are_kept(pod):
    pod.env["HF_HOME"] = "/workspace/hf_cache"
    pod.env["PATH"] = "/usr/local/bin:/usr/bin"
    pod.env["HF_ENDPOINT"] = "https://hf-mirror.internal"
    variables = pod.run().facts.environment.variables
    assert variables["HF_HOME"][0].value == "/workspace/hf_cache"
    assert variables["PATH"][0].value == "/usr/local/bin:/usr/bin"
    assert variables["HF_ENDPOINT"][0].value == "https://hf-mirror.internal"
