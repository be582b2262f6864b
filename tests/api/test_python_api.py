"""The Python API (computefence.check and its steps in computefence.run): the README's
example as written, and the steps a command composes, against the replay connector."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import computefence
from computefence import run
from computefence.cli import main
from computefence.connectors.registry import ConnectSettings, ReplaySettings, open_connector
from computefence.connectors.replay import ReplayConnector, load_recordings
from computefence.demo import DEMO_RECORDING
from computefence.errors import ConfigError
from computefence.models import HostReport, HostStatus, Report, Target

ROOT = Path(__file__).resolve().parents[2]


def _readme_example() -> str:
    page = (ROOT / "docs" / "python.md").read_text()
    block = re.findall(r"```python\n(.*?)```", page, flags=re.S)[0]
    return block


def test_the_readme_example_runs_as_written_and_prints_what_it_says():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _readme_example()], cwd="/", env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "block"
    assert "pod-cpu-torch ok gpu.torch-cpu-build" in lines
    assert "pod-unreachable unreachable" in lines
    assert "pod-healthy ok" in lines


def test_check_gives_the_report_fleet_check_prints(capsys):
    # Same pods, same options: the library and the CLI judge alike (generated_at aside).
    code = main(["fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "json", "--skip", "storage.*"])
    from_cli = Report.model_validate_json(capsys.readouterr().out)
    from_api = computefence.check(
        connector="replay", settings=ConnectSettings(own=(ReplaySettings(DEMO_RECORDING),)), skip=["storage.*"]
    )
    assert code == 1 and from_api.summary.verdict.value == "block"
    assert from_api.model_dump(exclude={"generated_at"}, mode="json") == from_cli.model_dump(
        exclude={"generated_at"}, mode="json"
    )


def test_the_steps_rejudge_a_reprobed_subset_with_the_whole_plan():
    # What `fleet fix` does: probe a few pods again and judge them under the same plan.
    async def steps() -> tuple[run.Plan, list, list]:
        with open_connector("replay", ConnectSettings(own=(ReplaySettings(DEMO_RECORDING),))) as session:
            assert session.targets is not None and not session.live
            plan = run.plan(session.targets, run.rules(only=["gpu.*"]), sources=session.sources)
            connector = session.connect(plan.targets)
            everyone = await run.probe_targets(plan, connector)
            again = await run.probe_targets(plan.subset({"pod-old-driver"}), connector)
        return plan, everyone, again

    plan, everyone, again = asyncio.run(steps())
    assert [h.name for h in again] == ["pod-old-driver"]
    [judged] = run.evaluate_hosts(plan, again)
    assert {f.check for f in judged.blocking_findings} == {"gpu.driver-too-old"}
    assert all(f.check.startswith("gpu.") for f in judged.findings)
    report = run.report_for(plan, run.evaluate_hosts(plan, everyone))
    assert report.summary.hosts == 6 and [s.name for s in report.sources] == ["replay"]


class _OnePodAnswers:
    """A Connector of one's own: pod-healthy answers from the recording, the rest hang."""

    def __init__(self) -> None:
        self.replay = ReplayConnector(load_recordings(DEMO_RECORDING))

    async def check(self, target: Target, params: dict) -> HostReport:
        if target.name != "pod-healthy":
            await asyncio.sleep(60)
        return await self.replay.check(target, params)


def test_progress_reaches_the_caller_and_stop_cancels_what_is_in_flight():
    targets = [r.target for r in load_recordings(DEMO_RECORDING)]
    seen: list[str] = []

    async def stop_after_the_first() -> Report:
        stop = asyncio.Event()

        def progress(host: HostReport) -> None:
            seen.append(host.name)
            stop.set()

        return await computefence.check_async(targets, _OnePodAnswers(), on_progress=progress, stop=stop)

    report = asyncio.run(asyncio.wait_for(stop_after_the_first(), 30))
    assert seen == ["pod-healthy"]
    statuses = {h.name: h.status for h in report.hosts}
    assert statuses.pop("pod-healthy") is HostStatus.OK
    assert set(statuses.values()) == {HostStatus.CANCELLED} and len(statuses) == 5


def test_a_typo_in_only_or_a_connector_without_pods_is_a_config_error_before_probing():
    with pytest.raises(ConfigError, match="names no check"):
        computefence.check(
            connector="replay", settings=ConnectSettings(own=(ReplaySettings(DEMO_RECORDING),)), only=["gpu.nope"]
        )
    with pytest.raises(ConfigError, match="no pods of its own"):
        computefence.check(connector="ssh")
    with pytest.raises(ConfigError, match="unknown connector 'telnet'"):
        computefence.check([], connector="telnet")


def test_import_computefence_does_not_load_the_run():
    code = (
        "import sys, computefence; assert 'computefence.run' not in sys.modules; print(computefence.check.__module__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "computefence.session"
