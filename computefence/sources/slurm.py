"""The nodes of a Slurm cluster as targets (`fleet check --slurm`).

The cluster is the one the environment names (SLURM_CONF, else Slurm's own default). Nodes
are read as Slurm prints them for programs: `sinfo --json` (22.05 and later), else the
`sinfo -N -o` fields. Each node is one target named by its node name, with its partitions
as tags; its Slurm state, reason and GRES GPU count ride in `provider` (provider "slurm").
A node that cannot take a job step (down, drained, failed, in maintenance...) is a target
that is not checked, with its state and reason: a fact about the cluster, not a run error.

Hostlists (`n[1-4,7]`, `gpu[01-10]`, `a[1-2]b[3-4]`, comma lists) are expanded as Slurm's
hostlist.c expands them (`scontrol show hostnames`), and refused where it refuses them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from computefence.errors import ConfigError, SourceError
from computefence.models import Fix, FixStep, ProviderInfo, Target
from computefence.sources.tools import ToolOverflow, ToolTimeout, run_tool
from computefence.text import one_line

# Slurm's own bound on one range (hostlist.c MAX_RANGE); also ours on a whole list.
MAX_HOSTS = 65536
SINFO_TIMEOUT_S = 30.0
# A listing of 100,000 nodes in sinfo's JSON is some 300 MB: more is not a cluster's answer.
MAX_LISTING_BYTES = 512 * 1024 * 1024
# States in which slurmd takes no new job step. Slurm prints them lowercase (`%T`) or upper
# case (JSON, 23.02+ as a list); flags such as DRAIN come apart from the base state in JSON.
UNUSABLE = frozenset(
    {
        "down",
        "drain",
        "drained",
        "draining",
        "fail",
        "failing",
        "future",
        "maint",
        "reboot_requested",
        "reboot_issued",
        "power_down",
        "powered_down",
        "powering_down",
        "powering_up",
        "not_responding",
        "unknown",
        "inval",
        "invalid",
        "invalid_reg",
    }
)
# `sinfo -N -o` fields, one node and partition a line; `|` never appears in a node name.
_SINFO_FORMAT = "%N|%T|%P|%c|%G|%E"
_RANGE = re.compile(r"(\d+)(?:-(\d*))?")
_DELIMITERS = " \t\n,"


def expand_hostlist(expression: str) -> list[str]:
    """The host names of a Slurm hostlist, in Slurm's order, duplicates kept.

    ConfigError, naming the list, for what `scontrol show hostnames` refuses: an unclosed or
    nested bracket, a range that is empty, reversed or not numeric, text after a bracket that
    is not another bracket, more than MAX_HOSTS names."""
    names: list[str] = []
    for item in _split_top_level(expression):
        for name in _expand_item(item, expression):
            names.append(name)
            if len(names) > MAX_HOSTS:
                raise ConfigError(f"hostlist {_shown(expression)}: more than {MAX_HOSTS} hosts")
    return names


def _shown(expression: str) -> str:
    return repr(one_line(expression, 80))


def _split_top_level(expression: str) -> list[str]:
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in expression:
        if char == "[":
            depth += 1
            if depth > 1:
                raise ConfigError(f"hostlist {_shown(expression)}: nested '['")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ConfigError(f"hostlist {_shown(expression)}: ']' without '['")
        if depth == 0 and char in _DELIMITERS:
            if current:
                items.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise ConfigError(f"hostlist {_shown(expression)}: '[' without ']'")
    if current:
        items.append("".join(current))
    return items


def _expand_item(item: str, expression: str) -> list[str]:
    """`prefix[ranges]` followed by nothing or by more `text[ranges]` groups."""
    opening = item.find("[")
    if opening < 0:
        return [item]
    closing = item.index("]", opening)
    prefix, ranges, rest = item[:opening], item[opening + 1 : closing], item[closing + 1 :]
    if rest and "[" not in rest:
        raise ConfigError(f"hostlist {_shown(expression)}: text after ']' must be another [range] group")
    heads = [prefix + number for number in _expand_ranges(ranges, expression)]
    tails = _expand_item(rest, expression) if rest else [""]
    if len(heads) * len(tails) > MAX_HOSTS:
        raise ConfigError(f"hostlist {_shown(expression)}: more than {MAX_HOSTS} hosts")
    return [head + tail for head in heads for tail in tails]


def _expand_ranges(ranges: str, expression: str) -> list[str]:
    numbers: list[str] = []
    for part in ranges.split(","):
        found = _RANGE.fullmatch(part)
        if found is None:
            raise ConfigError(f"hostlist {_shown(expression)}: invalid range {part!r}")
        low_text, high_text = found.group(1), found.group(2)
        low = int(low_text)
        # Slurm: `n[1-]` is n1; the width (zero padding) is the lower bound's.
        high = int(high_text) if high_text else low
        if high < low:
            raise ConfigError(f"hostlist {_shown(expression)}: invalid range {part!r} (high end below low end)")
        if high - low >= MAX_HOSTS:
            raise ConfigError(f"hostlist {_shown(expression)}: too many hosts in range {part!r}")
        width = len(low_text)
        numbers.extend(str(n).zfill(width) for n in range(low, high + 1))
    return numbers


@dataclass(frozen=True)
class SlurmNode:
    """One node as Slurm lists it."""

    name: str
    # The base state and its flags, lowercase ("idle", ["drain"]).
    state: str
    flags: tuple[str, ...] = ()
    reason: str = ""
    partitions: tuple[str, ...] = ()
    cpus: int | None = None
    # GPUs of its GRES (gpu:4, gpu:h100:8(S:0-1) ...): what the driver must show.
    gres_gpus: int = 0

    @property
    def state_text(self) -> str:
        """As `sinfo -o %T` prints it (idle, drained, mixed+drain...)."""
        return "+".join([self.state, *self.flags])

    @property
    def unusable(self) -> bool:
        return self.state in UNUSABLE or any(flag in UNUSABLE for flag in self.flags)


def gres_gpu_count(gres: str) -> int:
    """GPUs in a GRES string: `gpu:4`, `gpu:a100:2(S:0-1)`, `gpu:2,nic:1`; 0 for none."""
    total = 0
    for entry in re.split(r",(?![^()]*\))", gres or ""):
        parts = entry.split("(")[0].split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        count = parts[-1]
        if count.isdigit():
            total += int(count)
        elif len(parts) == 2:  # gpu:h100 without a count is one
            total += 1
    return total


@dataclass
class SlurmSource:
    """The cluster's nodes, narrowed by partitions and a hostlist."""

    partitions: Sequence[str] = ()
    nodelist: str | None = None
    env: Mapping[str, str] | None = None
    # Seconds each sinfo call may take.
    timeout: float = SINFO_TIMEOUT_S
    name: str = "slurm"
    resolver: str | None = None
    warnings: list[str] = field(default_factory=list)

    def targets(self) -> list[Target]:
        wanted = expand_hostlist(self.nodelist) if self.nodelist is not None else None
        nodes = self.nodes()
        if self.partitions:
            asked = set(self.partitions)
            known = {p for node in nodes for p in node.partitions}
            missing = sorted(asked - known)
            if missing:
                raise ConfigError(f"--partition {', '.join(missing)}: no such partition on this cluster")
            nodes = [node for node in nodes if asked & set(node.partitions)]
        if wanted is not None:
            by_name = {node.name: node for node in nodes}
            unknown = [name for name in dict.fromkeys(wanted) if name not in by_name]
            if unknown:
                where = " in the partitions asked for" if self.partitions else ""
                shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
                raise ConfigError(f"--nodelist: no node {shown}{where} on this cluster")
            nodes = [by_name[name] for name in dict.fromkeys(wanted)]
        return [node_target(node) for node in nodes]

    def nodes(self, names: Sequence[str] = ()) -> list[SlurmNode]:
        """Every node of the cluster (or only those named, asked of sinfo so a large cluster's
        controller is not asked for all), once each, partitions joined."""
        only = [f"--nodes={','.join(names)}"] if names else []
        document, found = self._from_json(["sinfo", "--json", *only], "sinfo --json")
        if found is not None:
            return found
        if document is not None:
            if not (isinstance(document, dict) and "sinfo" in document):
                raise SourceError("sinfo --json printed no node list")
            # 23.02+: sinfo --json groups nodes; scontrol's JSON has one entry a node.
            argv = ["scontrol", "show", "nodes", "--json", *([",".join(names)] if names else [])]
            _, found = self._from_json(argv, "scontrol show nodes --json")
            if found is not None:
                return found
        text = self._sinfo(["sinfo", "--noheader", "--Node", "--format", _SINFO_FORMAT, *only], required=True)
        self.resolver = "sinfo -N -o"
        return nodes_from_format(text or "")

    def _from_json(self, argv: list[str], what: str) -> tuple[Any, list[SlurmNode] | None]:
        """What `argv` printed as JSON (None when it could not run), and the nodes it lists
        one an entry (None when it lists none so)."""
        listing = self._sinfo(argv)
        if listing is None:
            return None, None
        try:
            document = json.loads(listing)
        except ValueError:
            raise SourceError(f"{what} printed something that is not JSON") from None
        if isinstance(document, dict) and isinstance(document.get("nodes"), list):
            self.resolver = what
            return document, nodes_from_json(document["nodes"])
        return document, None

    def _sinfo(self, argv: list[str], required: bool = False) -> str | None:
        """The tool's stdout; None where this Slurm lacks the option (JSON support)."""
        try:
            status, stdout, stderr = run_tool(
                argv, self.timeout, MAX_LISTING_BYTES, env=dict(self.env) if self.env else None
            )
        except FileNotFoundError:
            raise ConfigError(
                f"--slurm: `{argv[0]}` is not on PATH; run on a login node of the cluster (slurm-client installed)"
            ) from None
        except OSError as exc:
            raise SourceError(f"{argv[0]} could not start: {exc.strerror or exc}") from None
        except ToolTimeout:
            raise SourceError(f"{' '.join(argv)} gave no answer within {self.timeout:g}s") from None
        except ToolOverflow:
            raise SourceError(f"{' '.join(argv)} printed over {MAX_LISTING_BYTES} bytes") from None
        detail = one_line(stderr.decode("utf-8", "replace").strip().splitlines()[-1], 200) if stderr.strip() else ""
        if status != 0:
            if not required and ("unrecognized option" in detail or "json" in detail.lower()):
                return None
            raise SourceError(f"{' '.join(argv)} failed (exit status {status}){': ' + detail if detail else ''}")
        return stdout.decode("utf-8", "replace")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    if isinstance(value, dict):  # 23.02+: {"set": true, "number": 8}
        value = value.get("number") if value.get("set", True) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def valid_node_name(name: str) -> bool:
    """A single Slurm node name: no hostlist syntax, nothing an option parser would take."""
    return (
        bool(name)
        and not name.startswith("-")
        and len(name) <= 255
        and not any(c.isspace() or c in "[],|/=\"'" for c in name)
    )


def _node_name(value: Any) -> str:
    name = _text(value)
    if not valid_node_name(name):
        raise SourceError(f"sinfo listed a node named {one_line(repr(value), 60)}, which is no Slurm node name")
    return name


def nodes_from_json(entries: list[Any]) -> list[SlurmNode]:
    """Nodes from `sinfo --json` (22.05: state a string, flags apart) or `scontrol show nodes
    --json` (23.02+: state a list of upper-case words)."""
    nodes: dict[str, SlurmNode] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise SourceError("sinfo --json listed a node that is not an object")
        name = _node_name(entry.get("name"))
        state = entry.get("state")
        words = [w for w in (state if isinstance(state, list) else [state]) if isinstance(w, str)]
        words += [f for f in entry.get("state_flags") or [] if isinstance(f, str)]
        words = [w.lower() for w in words]
        base, flags = (words[0], tuple(dict.fromkeys(words[1:]))) if words else ("unknown", ())
        partitions = entry.get("partitions")
        node = SlurmNode(
            name=name,
            state=base,
            flags=flags,
            reason=one_line(_text(entry.get("reason")), 200),
            partitions=tuple(p for p in partitions if isinstance(p, str)) if isinstance(partitions, list) else (),
            cpus=_int(entry.get("cpus")),
            gres_gpus=gres_gpu_count(_text(entry.get("gres"))),
        )
        nodes.setdefault(name, node)
    return list(nodes.values())


def nodes_from_format(text: str) -> list[SlurmNode]:
    """Nodes from `sinfo -N -o '%N|%T|%P|%c|%G|%E'`: a node in two partitions is two lines."""
    nodes: dict[str, SlurmNode] = {}
    partitions: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|", 5)
        if len(fields) != 6:
            raise SourceError(f"sinfo line {number} does not have the 6 fields asked for")
        name, state_text, partition, cpus, gres, reason = fields
        name = _node_name(name)
        # %T: "idle", "drained", "mixed+drain", "down*" (* = not responding).
        words = [w for w in state_text.strip().lower().split("+") if w]
        not_responding = any(w.endswith("*") for w in words)
        words = [w.rstrip("*$~#!%@^-") for w in words]
        if not_responding:
            words.append("not_responding")
        base, flags = (words[0], tuple(words[1:])) if words else ("unknown", ())
        partitions.setdefault(name, [])
        if partition.strip():
            partitions[name].append(partition.strip().rstrip("*"))
        nodes.setdefault(
            name,
            SlurmNode(
                name=name,
                state=base,
                flags=flags,
                reason="" if reason.strip() == "none" else one_line(reason, 200),
                cpus=int(cpus) if cpus.strip().isdigit() else None,
                gres_gpus=gres_gpu_count(gres.strip()),
            ),
        )
    return [
        SlurmNode(**{**node.__dict__, "partitions": tuple(dict.fromkeys(partitions[name]))})
        for name, node in nodes.items()
    ]


def node_target(node: SlurmNode) -> Target:
    """One node as a target; one Slurm will not run a step on is not checked, with why."""
    target = Target(
        name=node.name,
        host=node.name,
        port=0,
        tags=list(node.partitions),
        source="slurm",
        provider=ProviderInfo(
            provider="slurm",
            pod_id=node.name,
            name=node.name,
            state=node.state_text,
            gpu_count=node.gres_gpus or None,
        ),
    )
    if node.unusable:
        why = f"Slurm has it {node.state_text}" + (f" ({node.reason})" if node.reason else "")
        target.unreachable_reason = why
        target.unreachable_fix = Fix(
            steps=[FixStep.local(f"sinfo -R --nodes {shlex.quote(node.name)}")],
            advice="shows who set the state and when; the node is checked again once Slurm has it back in service",
        )
    return target
