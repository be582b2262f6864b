"""Between two cron runs one pod breaks and another is fixed: the webhook message and the
node_exporter textfile say exactly that, and the webhook URL appears nowhere."""

from __future__ import annotations

import time

import pytest
from fleet_helpers import SPOTLESS, break_torch, fix_torch, host_entry, started_pods, write_inventory
from prometheus_client.parser import text_string_to_metric_families
from sshfleet import PodSpec
from webhook_server import Answer, WebhookServer

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def pool(ssh_fleet):
    specs = [PodSpec(name, **SPOTLESS) for name in ("alert-steady", "alert-breaks", "alert-heals")]
    with started_pods(ssh_fleet, specs) as pods:
        yield pods


def _samples(text: str) -> dict[tuple, float]:
    """(metric, sorted labels) -> value, through prometheus_client's own parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_webhook_and_textfile_show_the_pod_that_broke_and_the_one_that_was_fixed(
    ssh_fleet, pool, run_cli, tmp_path, monkeypatch
):
    inventory = write_inventory(
        tmp_path / "pool.yaml", ssh_fleet, [host_entry(p) for p in pool.values()], trusted=list(pool.values())
    )
    history, metrics = tmp_path / "history", tmp_path / "computefence.prom"
    cron = (
        "fleet",
        "check",
        "-i",
        str(inventory),
        "--history",
        str(history),
        "--format",
        "prometheus",
        "--output",
        str(metrics),
    )
    with WebhookServer(Answer(204)) as hook:
        monkeypatch.setenv("COMPUTEFENCE_NOTIFY", hook.url)  # a secret belongs in the environment, not argv
        break_torch(pool["alert-heals"])
        first = run_cli(*cron)
        assert first.code == 1 and hook.received == []  # nothing to compare with: no "change" yet
        first_metrics = metrics.read_text()

        break_torch(pool["alert-breaks"])
        fix_torch(pool["alert-heals"])
        try:
            second = run_cli(*cron)
        finally:
            fix_torch(pool["alert-breaks"])
    assert second.code == 1

    (message,) = hook.received
    payload = message.json
    lines = [b["text"]["text"] for b in payload["blocks"][2:]]
    by_label = {}
    for line in lines:
        label, pod = line.split(" *")[0].split(" ", 1)[1], line.split("*")[1]
        by_label.setdefault(label, []).append(pod)
    assert by_label.pop("new blocker") == ["alert-breaks"]
    assert by_label.pop("cleared blocker") == ["alert-heals"]
    assert set(by_label) <= {"version", "new warning", "cleared warning"}
    assert {pod for pods in by_label.values() for pod in pods} <= {"alert-breaks", "alert-heals"}
    assert "python.torch-missing" in lines[0] and "fix: `" in lines[0]

    before, after = _samples(first_metrics), _samples(metrics.read_text())
    for pod, was, now in (("alert-breaks", 0, 1), ("alert-heals", 1, 0), ("alert-steady", 0, 0)):
        assert before[("computefence_blockers", (("host", pod),))] == was
        assert after[("computefence_blockers", (("host", pod),))] == now
        assert after[("computefence_host_ready", (("host", pod),))] == 1 - now
        assert after[("computefence_host_up", (("host", pod), ("status", "ok")))] == 1
    assert after[("computefence_changes", (("kind", "new_blockers"),))] == 1
    assert after[("computefence_changes", (("kind", "vanished"),))] == 0
    assert after[("computefence_hosts", (("state", "blocked"),))] == 1
    assert abs(after[("computefence_last_run_timestamp_seconds", ())] - time.time()) < 120

    # The URL (a credential) is in no output and no file.
    written = [second.stdout, second.stderr, first.stderr, metrics.read_text()]
    written += [p.read_text() for p in history.iterdir() if p.is_file()]
    assert all(WebhookServer.SECRET_PATH not in text and "secret-token" not in text for text in written)


def test_failed_delivery_warns_once_and_keeps_the_exit_status(ssh_fleet, pool, run_cli, tmp_path):
    pod = pool["alert-steady"]
    inventory = write_inventory(tmp_path / "pool.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    with WebhookServer(Answer(404)) as hook:
        result = run_cli(
            "fleet",
            "check",
            "-i",
            str(inventory),
            "--notify",
            hook.url,
            "--notify-on",
            "always",
            "--notify-format",
            "json",
        )
    assert result.code == 0
    assert hook.received[0].json["verdict"] == "pass"
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "HTTP 404" in warnings[0]
    assert "secret-token" not in result.stderr + result.stdout
