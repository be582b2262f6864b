"""`hosts`, `hosts avoid` and `report history` read one --history folder alike: the same
machines (by the provider's machine id), the same refusal of a folder without a run, and a
word about the machines a vastai query cannot carry."""

from __future__ import annotations

import json

import pytest

from computefence.cli import main
from computefence.models import Finding, HostReport, HostStatus, ProviderInfo, Remedy, Report, Severity
from computefence.operations.history import History

ECC = Finding(check="gpu.ecc", severity=Severity.BLOCK, message="2 uncorrectable ECC errors", remedy=Remedy.REPLACE)


def _pod(name: str, provider: str, machine: str | None) -> HostReport:
    info = ProviderInfo(provider=provider, pod_id=f"{name}-id", machine_id=machine)
    return HostReport(name=name, status=HostStatus.OK, provider=info, findings=[ECC])


@pytest.fixture
def history(tmp_path):
    directory = tmp_path / "runs"
    directory.mkdir()
    store = History(directory, keep=10)
    pods = [_pod("vast-pod", "vast", "1001"), _pod("runpod-pod", "runpod", "rp-7"), _pod("no-id", "runpod", None)]
    for minute in range(2):
        store.save(
            Report(tool_version="test", kind="fleet", generated_at=f"2026-12-01T20:0{minute}:00+00:00", hosts=pods)
        )
    return directory


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_hosts_and_report_history_list_the_same_machines(history, capsys):
    _, out, _ = _cli(capsys, "hosts", "--history", str(history), "--format", "json")
    ledger = {(row["provider"], row["machine_id"]) for row in json.loads(out)["hosts"]}
    _, page, _ = _cli(capsys, "report", "history", str(history))

    # A pod without a machine id stands for its own machine, in both views.
    assert ledger == {("vast", "1001"), ("runpod", "rp-7"), ("runpod", "no-id-id")}
    machines = page[page.index('id="machines-title"') :].split("</section>", 1)[0]
    assert "runpod <code>rp-7</code>" in machines and "vast <code>1001</code>" in machines
    assert "runpod <code>no-id-id</code>" in machines


def test_hosts_avoid_says_where_a_runpod_machine_went(history, capsys):
    code, out, err = _cli(capsys, "hosts", "avoid", "--history", str(history), "--min-runs", "2")

    assert code == 0 and out == "machine_id notin [1001]\n"
    assert "2 machines of runpod to avoid, not in a vastai query: --format json lists them" in err


@pytest.mark.parametrize("argv", [["hosts", "--history"], ["hosts", "avoid", "--history"], ["report", "history"]])
def test_an_empty_history_folder_is_refused_alike(tmp_path, capsys, argv):
    code, out, err = _cli(capsys, *argv, str(tmp_path))

    assert (code, out) == (2, "")
    assert f"{tmp_path} holds no readable computefence run" in err
