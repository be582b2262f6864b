"""`computefence fleet check --demo`: the README's first command, whole flow, no pods needed."""

from __future__ import annotations

from computefence.demo.fleet import DEMO_PODS


def test_demo_checks_its_simulated_fleet(run_cli):
    result = run_cli("fleet", "check", "--demo", "--format", "json")

    assert result.code == 1
    statuses = {h.name: h.status.value for h in result.report.hosts}
    assert set(statuses) == {pod.name for pod in DEMO_PODS}
    assert statuses.pop("pod-unreachable") == "unreachable"
    assert set(statuses.values()) == {"ok"}
    # Plain progress lines on a non-terminal stderr, one per pod.
    assert result.stderr.count("computefence: [") == len(DEMO_PODS)
    assert f"[{len(DEMO_PODS)}/{len(DEMO_PODS)}]" in result.stderr


def test_demo_takes_limit_but_not_other_sources(run_cli, tmp_path):
    limited = run_cli("fleet", "check", "--demo", "--limit", "pod-healthy", "--format", "json")
    assert [h.name for h in limited.report.hosts] == ["pod-healthy"]

    mixed = run_cli("fleet", "check", "--demo", "-i", str(tmp_path / "pods.yaml"))
    assert mixed.code == 2
    assert "--demo checks its own simulated pods; drop --inventory" in mixed.stderr
