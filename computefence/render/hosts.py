"""What `computefence hosts` prints: the machines of a history as a table that fits the
terminal (or JSON), and `hosts avoid`'s list as a `vastai search offers` clause or JSON."""

from __future__ import annotations

import json
import re

from rich.console import RenderableType
from rich.text import Text

from computefence.models import HostLedger, LedgerMachine
from computefence.render.columns import Column, fit_table, records
from computefence.render.console import console_text
from computefence.text import clean, plural

HOSTS_FORMATS = ("rich", "json")
AVOID_FORMATS = ("vast", "json")
_PERF_NAMES = {"gpu.perf-compute": "compute", "gpu.perf-pcie": "PCIe", "gpu.perf-interconnect": "interconnect"}
_COLUMNS = [
    Column("Machine"),
    Column("GPU", breaks=" ", drop=2),
    Column("Runs", justify="right"),
    Column("Blocked", "Blk", justify="right"),
    Column("Blocking checks (runs)", "Checks", breaks=", "),
    Column("Perf / median", "Perf", breaks=", ", drop=3),
    Column("Last seen", "Seen", drop=1),
]
# Vast machine ids are numbers; nothing else goes into a query the vastai CLI parses.
_VAST_ID = re.compile(r"[0-9]{1,20}")


def render_hosts(ledger: HostLedger, fmt: str, *, color: bool = False, width: int = 100, title: str = "") -> str:
    if fmt == "json":
        return json.dumps(ledger.model_dump(mode="json"), indent=2) + "\n"
    return console_text(_rich(ledger, width, title), color=color, width=width)


def _rich(ledger: HostLedger, width: int, title: str) -> list[RenderableType]:
    head = Text("ComputeFence hosts", style="bold")
    head.append(f" · {plural(len(ledger.hosts), 'machine')} in {plural(ledger.runs, 'run')}")
    if title:
        head.append(f" · {clean(title)}", style="dim")
    out: list[RenderableType] = [head]
    if not ledger.hosts:
        return [*out, Text("No provider pod in these runs: the ledger keeps machines of RunPod, Vast.ai and Lambda.")]
    rows = []
    for m in ledger.hosts:
        checks = ", ".join(f"{clean(c)} {n}" for c, n in m.checks.items()) or "-"
        rows.append(
            [
                Text(
                    f"{clean(m.provider)} {clean(m.machine_id)}" + (" avoid" if m.avoid else ""),
                    style="bold red" if m.avoid else "",
                ),
                Text(clean(m.gpu_model or "-")),
                Text(str(m.runs)),
                Text(str(m.blocked_runs), style="bold red" if m.blocked_runs else ""),
                Text(checks),
                Text(perf_cell(m)),
                Text(clean(m.last_seen or "-")),
            ]
        )
    table = fit_table(_COLUMNS, rows, width, noun="machine")
    out += table if table is not None else records(_COLUMNS, rows, width)
    notes = [(m, note) for m in ledger.hosts for note in machine_notes(m)]
    for m, note in notes:
        out.append(Text(f"{clean(m.provider)} {clean(m.machine_id)}: {clean(note)}", style="dim"))
    out.append(Text())
    out.append(
        Text(
            f"avoid: blocked by a check whose remedy is replace in at least {ledger.min_runs} "
            f"run{'s' if ledger.min_runs != 1 else ''} (--min-runs); `computefence hosts avoid --format vast` "
            "prints the vastai search offers clause that leaves them out"
        )
    )
    return out


def perf_cell(machine: LedgerMachine) -> str:
    """Each perf figure as a share of its fleet median: 'compute 50%, PCIe 98%'."""
    parts = [
        f"{_PERF_NAMES.get(check, check)} {figure.share:.0%}"
        for check, figure in machine.perf.items()
        if figure.share is not None
    ]
    return ", ".join(parts) or "-"


def machine_notes(machine: LedgerMachine) -> list[str]:
    """The last Xid, and how often it did not answer."""
    notes = []
    if machine.last_xid:
        notes.append(f"last {machine.last_xid}")
    if machine.unanswered_runs:
        notes.append(f"did not answer in {machine.unanswered_runs} of {machine.runs} runs")
    return notes


def vast_ids(machines: list[LedgerMachine]) -> tuple[list[str], list[str]]:
    """(Vast machine ids to exclude, ids that are not numbers and were left out)."""
    ids: list[str] = []
    odd: list[str] = []
    for m in machines:
        if m.provider == "vast":
            (ids if _VAST_ID.fullmatch(m.machine_id) else odd).append(m.machine_id)
    return sorted(set(ids), key=int), odd


def vast_clause(ids: list[str]) -> str:
    """The `vastai search offers` query clause that excludes `ids`; "" for none (an empty
    list is not valid in vastai's grammar, and nothing to exclude needs no clause).

    The vastai CLI's parse_query (vastai/api/query.py) reads `field notin [a,b]` as a list
    (`not in` and `nin` are its synonyms); a repeated `machine_id != N` would keep only the
    last, since each field holds one value per operator."""
    return f"machine_id notin [{','.join(ids)}]" if ids else ""


def render_avoid(machines: list[LedgerMachine], fmt: str) -> str:
    if fmt == "json":
        rows = [
            {
                "provider": m.provider,
                "machine_id": m.machine_id,
                "host_id": m.host_id,
                "replace_runs": m.replace_runs,
                "checks": m.replace_checks,
            }
            for m in machines
        ]
        return json.dumps(rows, indent=2) + "\n"
    clause = vast_clause(vast_ids(machines)[0])
    return clause + "\n" if clause else ""
