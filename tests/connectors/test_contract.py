"""The connector contract: every registered connector, opened through its registry row, answers
the same cases alike. A probe answers; a command past its limit is stopped; a host that is not
there is a status with the evaluator's fix, never an exception; output past the cap is cut,
never held whole.

A new connector gets a subject here (how to reach one answering target, one missing target)
and then passes or fails the same cases as the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from slurmcluster import NodeSpec
from sshfleet import PodSpec, closed_port

from computefence import run
from computefence.connectors.interface import Connector, ConnectSettings, Outcome
from computefence.connectors.payload import MAX_OUTPUT_BYTES
from computefence.connectors.registry import CONNECTORS, ReplaySettings, SlurmSettings, SshSettings, open_connector
from computefence.connectors.shell import MAX_STEP_OUTPUT
from computefence.demo import DEMO_RECORDING
from computefence.models import HostStatus, Target
from computefence.sources.slurm import SlurmSource


@dataclass
class Subject:
    connector: Connector
    answering: Target
    # A target the connector cannot reach; None where there is none to miss (this machine).
    missing: Target | None
    # A target whose probe answer is over the cap, where the connector has no command to
    # make one (replay, slurm); None: a command's output is made too large instead.
    too_large: Target | None = None


def _ssh_subject(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    ssh_fleet = request.getfixturevalue("ssh_fleet")
    [pod] = ssh_fleet.start([PodSpec("contract-pod")])
    known = tmp_path / "known_hosts"
    known.write_text(pod.known_hosts_line())
    reach = {"user": "root", "identity_files": [str(ssh_fleet.identity_file)], "known_hosts": [str(known)]}
    answering = Target(name="contract-pod", host=pod.host, port=pod.port, **reach)
    missing = Target(name="gone-pod", host="127.0.0.1", port=closed_port(), **reach)
    settings = ConnectSettings(deadline=30.0, own=(SshSettings(known_hosts=(str(known),)),))
    try:
        with open_connector("ssh", settings) as session:
            yield Subject(session.connect([answering, missing]), answering, missing)
    finally:
        ssh_fleet.stop(pod)


def _demo_subject(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    with open_connector("demo", ConnectSettings()) as session:
        assert session.targets is not None
        pods = {t.name: t for t in session.targets}
        yield Subject(session.connect(session.targets), pods["pod-healthy"], pods["pod-unreachable"])


def _local_subject(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    with open_connector("local", ConnectSettings(deadline=60.0)) as session:
        this_machine = Target(name="this-machine", host="localhost")
        yield Subject(session.connect([this_machine]), this_machine, None)


def _replay_subject(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    folder = tmp_path / "recording"
    folder.mkdir()
    for source in DEMO_RECORDING.iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    huge = Target(name="pod-chatty", host="10.9.9.9")
    document = {
        "recording": 1,
        "target": huge.model_dump(mode="json", exclude_defaults=True),
        "status": "ok",
        "reason": "",
        "detail": None,
        "duration_s": 1.0,
        "probe_output": " " * (MAX_OUTPUT_BYTES + 1),
    }
    (folder / "7-pod-chatty.json").write_text(json.dumps(document))
    with open_connector("replay", ConnectSettings(own=(ReplaySettings(folder),))) as session:
        assert session.targets is not None
        pods = {t.name: t for t in session.targets}
        yield Subject(
            session.connect(session.targets), pods["pod-healthy"], pods["pod-unreachable"], pods["pod-chatty"]
        )


# A node's python3 that answers the probe with more than the cap.
CHATTY = "#!/bin/sh\nhead -c 9000000 /dev/zero | tr '\\0' ' '\n"


@pytest.fixture(scope="module")
def contract_cluster(start_slurm):
    cluster = start_slurm([NodeSpec("c1"), NodeSpec("c2"), NodeSpec("c3", bin={"python3": CHATTY})])
    cluster.kill_node("c2")
    return cluster


def _slurm_subject(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    cluster = request.getfixturevalue("contract_cluster")
    monkeypatch = request.getfixturevalue("monkeypatch")
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    nodes = {t.name: t for t in SlurmSource(env=cluster.env).targets()}
    settings = ConnectSettings(deadline=25.0, own=(SlurmSettings(immediate=3),))
    with open_connector("slurm", settings) as session:
        yield Subject(session.connect(list(nodes.values())), nodes["c1"], nodes["c2"], nodes["c3"])


SUBJECTS: dict[str, Callable[[Path, pytest.FixtureRequest], Iterator[Subject]]] = {
    "ssh": _ssh_subject,
    "slurm": _slurm_subject,
    "demo": _demo_subject,
    "local": _local_subject,
    "replay": _replay_subject,
}


def test_every_registered_connector_is_held_to_the_contract():
    assert set(SUBJECTS) == set(CONNECTORS)


@pytest.fixture(params=sorted(SUBJECTS))
def subject(request, tmp_path) -> Iterator[Subject]:
    # ssh needs real sshd pods and slurm a real Slurm (root, or they skip); the others run anywhere.
    yield from SUBJECTS[request.param](tmp_path, request)


def _probe(subject: Subject, target: Target):
    # Every subject's deadline is under a minute; past that the connector itself hangs.
    [host] = asyncio.run(asyncio.wait_for(run.probe_targets([target], subject.connector), 60))
    return host


@contextlib.asynccontextmanager
async def _shell(subject: Subject):
    opened = await subject.connector.open_shell(subject.answering)
    try:
        yield opened
    finally:
        if not isinstance(opened, Outcome):
            await opened.close()


def test_a_probe_answers_with_facts(subject):
    host = _probe(subject, subject.answering)
    assert host.status is HostStatus.OK, host.reason
    assert host.facts is not None and host.facts.identity.python_version
    assert host.fix is None and host.duration_s is not None and host.duration_s >= 0


def test_a_command_past_its_limit_is_stopped_or_refused_in_one_line(subject):
    async def attempt() -> object:
        async with _shell(subject) as shell:
            if isinstance(shell, Outcome):
                return shell
            return await shell.run("sleep 30", 1.0, asyncio.Event())

    result = asyncio.run(asyncio.wait_for(attempt(), 30))
    if isinstance(result, Outcome):
        # A connector that runs no commands on its targets (replay, slurm) says so instead.
        assert result.status is HostStatus.NOT_CHECKABLE and "\n" not in result.reason and result.reason
    else:
        assert result.timed_out and result.exit != 0 and result.duration_s < 15, result


def test_a_host_that_is_not_there_is_a_status_with_a_fix(subject):
    if subject.missing is None:
        pytest.skip("this machine is always there")
    host = _probe(subject, subject.missing)
    assert host.status is HostStatus.UNREACHABLE, host.reason
    assert host.reason and "\n" not in host.reason
    # The evaluator words the fix from the outcome; the connector only reports it.
    assert host.fix is not None and host.fix.commands


def test_output_past_the_cap_is_cut_not_held_whole(subject):
    if subject.too_large is not None:
        host = _probe(subject, subject.too_large)
        assert host.status is HostStatus.PROBE_FAILED and host.reason and "\n" not in host.reason
        assert "cap" in host.reason or "MiB" in host.reason, host.reason
        return

    async def chatty() -> object:
        async with _shell(subject) as shell:
            assert not isinstance(shell, Outcome), shell
            return await shell.run("head -c 1000000 /dev/zero | tr '\\0' x; echo END", 30.0, asyncio.Event())

    result = asyncio.run(asyncio.wait_for(chatty(), 60))
    assert result.exit == 0 and len(result.output) == MAX_STEP_OUTPUT
    assert result.output.endswith(b"xxxxEND\n")
