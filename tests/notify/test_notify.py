"""Webhook alerts against a receiver on loopback: payload shape, retries, 429, 500, timeout,
redirect, limits, and the URL (a secret) in no message."""

from __future__ import annotations

import pytest
from sshfleet import closed_port
from webhook_server import Answer, WebhookServer

from computefence.errors import ConfigError
from computefence.evaluate import build_report
from computefence.evaluate.changes import compare_reports
from computefence.models import Finding, HostReport, HostStatus, Severity
from computefence.operations.notify import alert_settings, notify, wanted, webhooks
from computefence.policy import NotifySettings
from computefence.render.webhook import HEADER_LIMIT, MAX_BLOCKS, PAYLOADS, SECTION_LIMIT, TEXT_LIMIT

FIX = "python3 -m pip install torch==2.4.1"
TORCH = Finding(
    check="python.torch-missing", severity=Severity.BLOCK, message="torch is not importable", fix=FIX, subject="python3"
)


def _changed_run(pods: int = 2, name: str = "pod"):
    """Pod 0 broke, pod 1 was fixed (and more pods broke, when asked for more)."""
    old = build_report(
        [HostReport(name=f"{name}-{i}", status=HostStatus.OK, findings=[TORCH] if i == 1 else []) for i in range(pods)],
        kind="fleet",
    )
    new = build_report(
        [HostReport(name=f"{name}-{i}", status=HostStatus.OK, findings=[] if i == 1 else [TORCH]) for i in range(pods)],
        kind="fleet",
    )
    return new.model_copy(update={"changes": compare_reports(old, new)})


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _send(server: WebhookServer, report=None, fmt="slack", **kw) -> tuple[list[str], Sleeps]:
    sleeps = Sleeps()
    warnings = notify(report or _changed_run(), webhooks([server.url]), PAYLOADS[fmt], sleep=sleeps, **kw)
    return warnings, sleeps


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert WebhookServer.SECRET_PATH not in text and "secret-token" not in text


def test_slack_payload_has_text_and_blocks_with_the_changed_pods_and_fixes():
    with WebhookServer() as server:
        warnings, sleeps = _send(server)
    assert warnings == [] and sleeps == []
    (request,) = server.received
    assert request.path == WebhookServer.SECRET_PATH
    assert request.headers["Content-Type"] == "application/json"
    payload = request.json
    assert set(payload) == {"text", "blocks"}
    assert "BLOCKED" in payload["text"] and "new blocker *pod-0*" in payload["text"] and FIX in payload["text"]
    assert "cleared blocker *pod-1*" in payload["text"]
    header, summary, *lines = payload["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": "ComputeFence fleet check: BLOCKED"}}
    assert summary["type"] == "section" and "1 new blocker, 1 cleared" in summary["text"]["text"]
    assert [b["text"]["text"].split("*")[1] for b in lines] == ["pod-0", "pod-1"]
    assert f"fix: `{FIX}`" in lines[0]["text"]["text"]


def test_json_payload_is_the_summary_and_the_changes():
    report = _changed_run()
    with WebhookServer() as server:
        _send(server, report, fmt="json")
    payload = server.received[0].json
    assert payload["verdict"] == "block" and payload["summary"]["hosts_blocked"] == 1
    assert payload["changes"] == report.changes.model_dump(mode="json")
    assert "hosts" not in payload  # no facts in an alert


def test_500s_are_retried_with_backoff_until_delivered():
    with WebhookServer(Answer(500), Answer(502), Answer(200)) as server:
        warnings, sleeps = _send(server)
    assert warnings == [] and len(server.received) == 3 and sleeps == [1.0, 2.0]


def test_a_webhook_that_keeps_failing_is_one_warning_naming_only_its_host():
    with WebhookServer(Answer(500)) as server:
        warnings, sleeps = _send(server)
    assert len(server.received) == 4 and sleeps == [1.0, 2.0, 4.0]  # 3 retries
    (warning,) = warnings
    assert warning.startswith("computefence: warning:") and "\n" not in warning
    assert "127.0.0.1" in warning and "HTTP 500" in warning
    _no_secret(warning)


def test_429_waits_as_long_as_retry_after_says():
    with WebhookServer(Answer(429, {"Retry-After": "7"}), Answer(200)) as server:
        warnings, sleeps = _send(server)
    assert warnings == [] and sleeps == [7.0] and len(server.received) == 2


def test_429_asking_for_too_long_a_wait_gives_up():
    with WebhookServer(Answer(429, {"Retry-After": "3600"})) as server:
        (warning,), sleeps = _send(server)
    assert sleeps == [] and len(server.received) == 1 and "3600 s" in warning
    _no_secret(warning)


def test_a_webhook_that_does_not_answer_times_out_on_each_try():
    with WebhookServer(Answer(200, delay_s=1.5)) as server:
        (warning,), sleeps = _send(server, timeout_s=0.3)
    assert len(sleeps) == 3 and "did not answer within 0.3 s" in warning
    _no_secret(warning)


def test_redirects_are_not_followed():
    with WebhookServer() as elsewhere, WebhookServer(Answer(301, {"Location": elsewhere.url})) as server:
        (warning,), _ = _send(server)
    assert len(server.received) == 1 and elsewhere.received == []
    assert "redirect (HTTP 301)" in warning
    _no_secret(warning)


def test_a_refused_message_is_not_retried():
    with WebhookServer(Answer(404)) as server:
        (warning,), sleeps = _send(server)
    assert len(server.received) == 1 and sleeps == [] and "HTTP 404" in warning


def test_nothing_listening_is_a_warning_too():
    url = f"http://127.0.0.1:{closed_port()}{WebhookServer.SECRET_PATH}"
    sleeps = Sleeps()
    (warning,) = notify(_changed_run(), webhooks([url]), PAYLOADS["slack"], sleep=sleeps)
    assert "cannot reach webhook at 127.0.0.1" in warning and len(sleeps) == 3
    _no_secret(warning)


def test_a_large_change_set_is_cut_to_slack_limits_and_pod_text_cannot_mention_anyone():
    report = _changed_run(pods=400, name="<!channel>" + "x" * 200)
    with WebhookServer() as server:
        _send(server, report)
    payload = server.received[0].json
    assert len(payload["text"]) <= TEXT_LIMIT and len(payload["blocks"]) <= MAX_BLOCKS
    assert payload["blocks"][0]["text"]["text"] and len(payload["blocks"][0]["text"]["text"]) <= HEADER_LIMIT
    assert all(len(b["text"]["text"]) <= SECTION_LIMIT for b in payload["blocks"] if b["type"] == "section")
    assert "and 353 more" in payload["blocks"][-1]["elements"][0]["text"]
    assert "<!channel>" not in server.received[0].body.decode() and "&lt;!channel&gt;" in payload["text"]


def test_when_to_notify():
    changed = _changed_run()
    unchanged = changed.model_copy(update={"changes": compare_reports(changed, changed)})
    assert wanted(changed, "change") and not wanted(unchanged, "change")
    assert wanted(unchanged, "block") and wanted(unchanged, "always")
    clean = build_report([HostReport(name="a", status=HostStatus.OK)], kind="fleet")
    assert not wanted(clean, "block") and not wanted(clean, "change") and wanted(clean, "always")


def test_settings_check_urls_without_showing_them_and_need_history_for_change():
    with pytest.raises(ConfigError) as bad:
        alert_settings(["ftp://hooks.example/secret-token-do-not-print"], None, None, None, history=True)
    assert "URL #1" in str(bad.value)
    _no_secret(str(bad.value))
    with pytest.raises(ConfigError, match="--notify-on change compares with the last run"):
        alert_settings(["https://hooks.example/x"], "change", None, None, history=False)
    assert alert_settings(["https://hooks.example/x"], None, None, None, history=False).on == "block"
    assert alert_settings(["https://hooks.example/x"], None, None, None, history=True).on == "change"
    assert alert_settings([], None, None, None, history=True) is None
    from_policy = alert_settings(
        [], None, None, NotifySettings(url="https://hooks.example/p", when="always", format="json"), history=False
    )
    assert (from_policy.on, from_policy.fmt, [h.host for h in from_policy.hooks]) == (
        "always",
        "json",
        ["hooks.example"],
    )
    assert "hooks.example/p" not in repr(from_policy)


def test_policy_file_notify_is_read_and_policy_show_leaves_the_url_out(tmp_path, monkeypatch, capsys):
    from computefence.cli import main
    from computefence.policy import parse_policy_text

    text = "notify:\n  url: https://hooks.example/secret-token-do-not-print\n  when: block\n  format: json\n"
    policy = parse_policy_text(text, "computefence.yaml")
    assert policy.notify == NotifySettings(
        url=["https://hooks.example/secret-token-do-not-print"], when="block", format="json"
    )
    (tmp_path / "computefence.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "show"]) == 0
    _no_secret(capsys.readouterr().out)
    with pytest.raises(ConfigError, match="computefence.yaml:2: .*when"):
        parse_policy_text("notify:\n  when: sometimes\n", "computefence.yaml")


def test_without_history_the_message_lists_blocked_and_unchecked_pods_with_fix_and_advice():
    from computefence.models import Fix
    from computefence.render.webhook import slack

    moved = Finding(
        check="storage.output-dir",
        severity=Severity.BLOCK,
        message="on the overlay",
        fix=Fix(commands=["mkdir -p /workspace/out"], advice="Point --output-dir at the volume."),
    )
    report = build_report(
        [
            HostReport(name="a", status=HostStatus.OK, findings=[moved]),
            HostReport(name="b", status=HostStatus.OK),
            HostReport(name="c", status=HostStatus.UNREACHABLE, reason="connection refused"),
        ],
        kind="fleet",
    )
    lines = [b["text"]["text"] for b in slack(report)["blocks"][2:]]
    assert lines == [
        ":red_circle: *a*: storage.output-dir\nfix: `mkdir -p /workspace/out`\nnote: Point --output-dir at the volume.",
        ":red_circle: *c*: unreachable: connection refused",
    ]
