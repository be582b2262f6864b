"""Every table in the CLI at 80 and 40 columns (and between): a column too wide for the
terminal is never dropped silently. Its values stay in the table (wrapped), are said once
above it when every row holds the same one, or each row becomes a record: every column's
header and every value is on the screen at any width."""

from __future__ import annotations

import pytest

from computefence.cli import main
from computefence.evaluate import build_report
from computefence.evaluate.ledger import build_ledger
from computefence.models import (
    Facts,
    Finding,
    GpuFacts,
    GpuPerf,
    HostReport,
    HostStatus,
    PerfFacts,
    ProviderInfo,
    Remedy,
    Report,
    Severity,
    WatchFacts,
)
from computefence.render import render, views
from computefence.render.hosts import perf_cell, render_hosts

WIDTHS = (40, 60, 70, 80, 100, 140)
INVENTORY = """\
defaults: {user: root, identity_file: ~/.ssh/id_ed25519}
hosts:
  - {name: pod-a, host: 203.0.113.10, port: 22022, tags: [sweep-7]}
  - {name: pod-b, host: 203.0.113.11, python: /opt/conda/bin/python, tags: [sweep-7, a100]}
  - {name: pod-c, host: 10.0.0.3, proxy_jump: bastion.example.org, tags: [sweep-7]}
"""


def _shown(out: str, *values: str) -> list[str]:
    """The values (and headers) whose words are not all on the screen."""
    words = set(out.split())
    return [value for value in values if not set(value.split()) <= words]


def _header_shown(out: str, header: str, short: str | None = None) -> bool:
    return any(set(h.split()) <= set(out.replace(":", " ").split()) for h in (header, short) if h)


@pytest.mark.parametrize("width", WIDTHS)
def test_inventory_list_shows_every_column_at_any_width(width, tmp_path, capsys, monkeypatch):
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    assert main(["inventory", "list", "-i", "inv.yaml"]) == 0
    out = capsys.readouterr().out
    values = ["pod-a", "pod-b", "pod-c", "root@203.0.113.10:22022", "root@203.0.113.11:22", "root@10.0.0.3:22"]
    values += ["bastion.example.org", "~/.ssh/id_ed25519", "/opt/conda/bin/python", "sweep-7", "a100"]
    values += ["inv.yaml:3", "inv.yaml:4", "inv.yaml:5"]
    assert _shown(out, *values) == [], out
    for header, short in [("reached as", None), ("via", None), ("identity", "key"), ("python", None)]:
        assert _header_shown(out, header, short), (header, out)
    for header in ("tags", "source"):
        assert _header_shown(out, header), (header, out)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Report:
    saved = tmp_path_factory.mktemp("demo") / "r.json"
    assert main(["fleet", "check", "--demo", "--format", "json", "-o", str(saved)]) == 1
    return Report.model_validate_json(saved.read_text())


@pytest.mark.parametrize("width", WIDTHS)
def test_the_pod_table_shows_each_pods_provider_gpus_and_torch(width, demo):
    out = render(demo, "rich", width=width)
    cells = [cell(h) for h in demo.hosts for cell in (views.provider_cell, views.gpu_cell, views.torch_cell)]
    assert _shown(out, *(cell for cell in cells if cell != "-")) == []
    table = out.split("\n\n")[0]
    # As a table, every header (or its short form) is there; stacked, each pod names its state.
    if "────" in table:
        for header, short in [("Provider", "Prov."), ("GPUs", None), ("torch / CUDA", "torch"), ("Status", None)]:
            assert _header_shown(table, header, short), (header, table)


def _watched(step: int, seconds_per_step: float, checkpoint: str) -> Facts:
    return Facts(
        watch=WatchFacts.model_validate(
            {
                "gpu": {"nvidia_smi_found": True, "samples": [{"gpus": [{"index": 0, "utilization_pct": 93.0}]}]},
                "processes": {"processes": [{"pid": 7, "argv": ["torchrun", "train.py"]}]},
                "outputs": {
                    "now": 1_800_000_000.0,
                    "dirs": [
                        {
                            "path": "/workspace/out",
                            "checkpoints": [
                                {"path": f"/workspace/out/{checkpoint}", "name": checkpoint, "mtime": 1_799_999_000.0}
                            ],
                        }
                    ],
                },
                "log": {
                    "path": "/workspace/train.log",
                    "losses": [1.2, 0.7],
                    "progress": {"step": step, "total": 12000, "seconds_per_step": seconds_per_step},
                },
            }
        )
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_watch_table_shows_pace_and_checkpoint_at_any_width(width):
    hosts = [
        HostReport(name="pod-a", status=HostStatus.OK, facts=_watched(3400, 0.42, "checkpoint-3000")),
        HostReport(name="pod-b", status=HostStatus.OK, facts=_watched(800, 1.7, "checkpoint-500")),
    ]
    report = build_report(hosts, kind="watch")
    out = render(report, "rich", width=width)
    cells = [cell for host in hosts for cell in views.watch_cells(host)]
    assert _shown(out, *cells) == [], out
    for header, short in [("Pace", None), ("Newest checkpoint", "Checkpoint"), ("Step", None), ("Loss", None)]:
        assert _header_shown(out, header, short), (header, out)


def _machine_run(when: str, machine: str, tflops: float, blocked: bool) -> Report:
    ecc = Finding(check="gpu.ecc", severity=Severity.BLOCK, message="2 uncorrectable ECC errors", remedy=Remedy.REPLACE)
    facts = Facts(gpu=GpuFacts(), perf=PerfFacts(ran=True, gpus=[GpuPerf(index=0, name="H100", matmul_tflops=tflops)]))
    hosts = [
        HostReport(
            name=f"pod-{machine}",
            status=HostStatus.OK,
            facts=facts,
            findings=[ecc] if blocked else [],
            provider=ProviderInfo(provider="vast", pod_id=machine, machine_id=machine, gpu_type="H100 SXM"),
        )
    ]
    return Report(tool_version="test", kind="fleet", generated_at=when, hosts=hosts)


@pytest.mark.parametrize("width", WIDTHS)
def test_hosts_list_shows_gpu_perf_and_last_seen_at_any_width(width):
    runs = [
        _machine_run("2026-12-01T20:00:00+00:00", "1001", 350.0, True),
        _machine_run("2026-12-01T20:01:00+00:00", "2002", 700.0, False),
        _machine_run("2026-12-01T20:02:00+00:00", "3003", 690.0, False),
    ]
    ledger = build_ledger(runs)
    out = render_hosts(ledger, "rich", width=width)
    values = [f"vast {m.machine_id}" for m in ledger.hosts] + [m.gpu_model or "" for m in ledger.hosts]
    values += [perf_cell(m) for m in ledger.hosts] + [m.last_seen or "" for m in ledger.hosts]
    assert _shown(out, *values) == [], out
    for header, short in [("GPU", None), ("Perf / median", "Perf"), ("Last seen", "Seen")]:
        assert _header_shown(out, header, short), (header, out)


def test_a_column_that_holds_one_value_is_said_once_not_dropped(demo):
    # The demo's pods are all on RunPod: at 80 columns the table keeps its other columns.
    out = render(demo, "rich", width=80)
    assert "Provider of every pod: runpod" in out.splitlines()
