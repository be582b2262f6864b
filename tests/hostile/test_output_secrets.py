"""No output carries a secret, whatever brought it: a fix step's output, a custom check's, a
training log's tail, a provider's answer. Credentials in URLs, `*_TOKEN`/`*_KEY`/`*_SECRET`/
`PASSWORD` assignments, bearer headers and the key shapes of Hugging Face, GitHub, AWS, RunPod
and Vast.ai come out as `***` in every format (terminal, JSON, Markdown, HTML, JUnit), in fix
transcripts and in the action log. On real sshd pods and a fake provider API on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))
from fake_api import FakeProviderApi, Fault, vast_instance
from fleet_helpers import HEALTHY, host_entry, write_inventory
from sshfleet import PodSpec

from computefence import redaction
from computefence.models import Finding, HostReport, HostStatus, Remedy, Report, Severity
from computefence.redaction import redact
from computefence.sources.vast import VastSource

# Each secret as a pod, a tool or a provider prints it, and the part that must never show.
PRINTED = {
    "url credentials": ("Looking in indexes: https://alice:Pa55-w0rd-xyz@pypi.corp.example/simple", "Pa55-w0rd-xyz"),
    "bare credentials": ("proxy alice:Pa55:w0rd@xyz@proxy.corp.example:3128 refused", "w0rd@xyz"),
    "token assignment": ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123", "AbCdEfGhIjKlMnOpQrSt"),
    "secret assignment": ('export AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz"', "wJalrXUtnFEMI"),
    "password": ("DB_PASSWORD: correct-horse-battery", "correct-horse-battery"),
    "json key": ('{"api_key": "plain-words-api-key-value"}', "plain-words-api-key-value"),
    "bearer header": ("Authorization: Bearer opaqueBearerValue77", "opaqueBearerValue77"),
    "github token": ("pushed with ghp_0123456789abcdefghijABCDEFGHIJ0123", "0123456789abcdefghij"),
    "aws key id": ("key id AKIAIOSFODNN7EXAMPL2 rejected", "IOSFODNN7EXAMPL2"),
    "runpod key": ("runpod rpa_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345 expired", "ABCDEFGHIJKLMNOPQRST"),
    "vast key": ("vast key " + "0123456789abcdef" * 4 + " invalid", "0123456789abcdef" * 4),
}
LINES = "\n".join(line for line, _ in PRINTED.values())
SECRETS = [secret for _, secret in PRINTED.values()]


def _leaks(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.mark.parametrize("kind", sorted(PRINTED))
def test_each_secret_shape_is_masked_and_the_words_around_it_kept(kind):
    line, secret = PRINTED[kind]
    masked = redact(f"before {line} after")
    assert secret not in masked and "***" in masked
    assert masked.startswith("before ") and masked.endswith(" after")


@pytest.mark.parametrize(
    "text",
    ["PWD=/root", "sha256:" + "ab" * 32, "num_processes: 4", "ssh root@10.0.0.7 -p 22", "https://pypi.org/simple"],
)
def test_what_only_looks_like_a_secret_is_kept(text):
    assert redact(text) == text


def test_a_text_seen_again_is_masked_again_and_the_memo_stays_bounded():
    # A pool's pods repeat their words, so short texts are redacted once per run (an lru_cache).
    line = PRINTED["token assignment"][0]
    assert redact(line) == redact(line) == "HF_TOKEN=***"
    long_line = "x" * 300 + " " + line
    assert redact(long_line) == "x" * 300 + " HF_TOKEN=***"
    memo = redaction._redact_short
    for n in range(3 * memo.cache_info().maxsize):
        assert redact(f"pod-{n} HF_TOKEN=hf_{n:030d}") == f"pod-{n} HF_TOKEN=***"
    assert 0 < memo.cache_info().currsize <= memo.cache_info().maxsize
    assert memo.cache_info().hits >= 1
    memo.cache_clear()
    redact(long_line)
    assert memo.cache_info().currsize == 0


# ---------------------------------------------------------------- on pods

STDLIB = subprocess.check_output(
    ["/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"], text=True
).strip()
# The pod's pip (ahead of the real one on sys.path) prints what pip prints of a private index and fails.
LEAKY_PIP = f"import sys\nprint({LINES!r})\nsys.exit(1)\n"
READY = dict(HEALTHY, shm_size="16g")


@pytest.mark.sshd
def test_a_failing_steps_output_is_masked_in_the_report_and_the_transcript(ssh_fleet, start_pods, cli, tmp_path):
    files = {f"{STDLIB}/pip/__init__.py": "", f"{STDLIB}/pip/__main__.py": LEAKY_PIP}
    spec = PodSpec("leaky-pip", **{k: v for k, v in READY.items() if k != "torch"}, files=files)
    (pod,) = start_pods(spec)
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    fix = ("fleet", "fix", "-i", str(inventory), "--no-policy", "--only", "python.torch-missing", "--apply", "--yes")

    code, out, err = cli(*fix, "--log", str(tmp_path / "logs"), "-f", "json")

    [step] = json.loads(out)["hosts"][0]["steps"]
    assert code == 1 and step["status"] == "failed" and "pypi.corp.example" in step["output_tail"]
    [transcript] = (tmp_path / "logs").iterdir()
    assert "pypi.corp.example" in transcript.read_text()
    _, terminal, terminal_err = cli(*fix)
    assert "***" in terminal
    assert _leaks(out + err + transcript.read_text() + terminal + terminal_err) == []


def _check_in_every_format(cli, *argv: str) -> dict[str, str]:
    outputs = {}
    for fmt in ("rich", "json", "markdown", "html", "junit"):
        _, out, err = cli(*argv, "--format", fmt)
        outputs[fmt] = out + err
    return outputs


@pytest.mark.sshd
def test_a_custom_checks_output_is_masked_in_every_format(ssh_fleet, start_pods, cli, tmp_path):
    (pod,) = start_pods(PodSpec("leaky-custom", **READY, files={"/etc/app.env": LINES + "\n"}))
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    policy = tmp_path / "computefence.yaml"
    policy.write_text('custom:\n  - {id: app-env, run: "cat /etc/app.env >&2; exit 3"}\n')

    outputs = _check_in_every_format(cli, "fleet", "check", "-i", str(inventory), "--policy", str(policy))

    assert "exited 3" in outputs["rich"] and "corp.example" in outputs["json"]
    assert {fmt: _leaks(text) for fmt, text in outputs.items()} == {key: [] for key in outputs}


@pytest.mark.sshd
def test_a_training_logs_tail_is_masked_in_every_format(ssh_fleet, start_pods, cli, tmp_path):
    log = "step 10 loss=0.7\n" + "".join(f"Error: {line}\n" for line in LINES.splitlines())
    (pod,) = start_pods(PodSpec("leaky-log", **READY, files={"/opt/job/train.log": log}))
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks={})
    policy = tmp_path / "computefence.yaml"
    policy.write_text("job:\n  log: /opt/job/train.log\n")

    outputs = _check_in_every_format(cli, "fleet", "watch", "--once", "-i", str(inventory), "--policy", str(policy))

    assert "Error: vast key ***" in outputs["json"]
    assert {fmt: _leaks(text) for fmt, text in outputs.items()} == {key: [] for key in outputs}


# ---------------------------------------------------------------- provider answers


def test_a_providers_answer_is_masked_in_the_result_and_the_action_log(cli, tmp_path, monkeypatch):
    with FakeProviderApi() as api:
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.setenv("VAST_API_KEY", api.keys["vast"])
        monkeypatch.setenv("VAST_URL", api.base_url("vast"))
        api.vast_instances = [vast_instance(4242, "vast-ecc", machine_id=31337)]
        [target] = VastSource().targets()
        ecc = Finding(check="gpu.ecc", severity=Severity.BLOCK, message="2 ECC errors", remedy=Remedy.REPLACE)
        when = (datetime.now(timezone.utc) - timedelta(minutes=5)).isoformat(timespec="seconds")
        host = HostReport(
            name="vast-ecc", status=HostStatus.OK, host=target.host, port=target.port, provider=target.provider,
            findings=[ecc],
        )  # fmt: skip
        report = tmp_path / "report.json"
        report.write_text(Report(tool_version="t", kind="fleet", generated_at=when, hosts=[host]).model_dump_json())
        listing = {"success": True, "instances": api.vast_instances, "next_token": None}
        api.fail("vast", Fault(200, json.dumps(listing).encode()))
        api.fail("vast", Fault(200, json.dumps({"success": False, "msg": LINES.replace("\n", "; ")}).encode()))
        log = tmp_path / "actions.jsonl"

        code, out, err = cli("fleet", "release", "--from", str(report), "--yes", "-f", "json", "--log", str(log))

    [pod] = json.loads(out)["pods"]
    assert code == 1 and pod["outcome"] == "failed" and "pypi.corp.example" in pod["detail"]
    assert _leaks(out + err + log.read_text()) == []
