"""`computefence policy init|show`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import typer
import yaml

from computefence import evaluate
from computefence.cli.app import command_group
from computefence.cli.output import write_stdout
from computefence.cli.policy_options import PolicyOpt
from computefence.cli.targets import gather_targets, source_options, target_options
from computefence.errors import ConfigError
from computefence.evaluate.fingerprint import smallest_gpu_memory, whole_gb
from computefence.files import write_output
from computefence.models import CheckOptions, Facts, Target
from computefence.policy import (
    POLICY_FILE,
    SPECIAL_REQUIREMENTS,
    EffectivePolicy,
    parse_policy_text,
    resolve_policy,
)
from computefence.saved_files import load_report
from computefence.sources import TargetSelection

policy_app = command_group("policy", f"Write or inspect the job's policy ({POLICY_FILE}).")


# ---------------------------------------------------------------- policy show


def _spec_text(value: Any) -> Any:
    return value.text if hasattr(value, "text") and hasattr(value, "clauses") else value


def effective_document(policy: EffectivePolicy) -> dict[str, Any]:
    """The effective policy as a user would write it (only what is set)."""
    data = policy.model_dump(exclude_defaults=True, exclude={"hardware", "custom", "job"})
    hardware = {
        k: _spec_text(getattr(policy.hardware, k))
        for k in type(policy.hardware).model_fields
        if getattr(policy.hardware, k) is not None
    }
    if hardware:
        data["hardware"] = hardware
    if policy.checks.model_dump(exclude_defaults=True):
        data["checks"] = policy.checks.model_dump(exclude_defaults=True)
    elif "checks" in data:
        del data["checks"]
    if policy.job is not None:
        data["job"] = policy.job.model_dump(by_alias=True, exclude_none=True)
    if policy.custom:
        data["custom"] = [c.model_dump(exclude_defaults=True) | {"id": c.id, "run": c.run} for c in policy.custom]
    return data


def _derived(policy: EffectivePolicy) -> dict[str, Any]:
    """The job's figures the policy alone implies (bytes per parameter, checkpoints kept)."""
    if policy.job is None:
        return {}
    from computefence.evaluate.checks.job import derived_figures

    return {"job_derived": derived_figures(policy.job)}


@policy_app.command("show")
@target_options
def show(
    policy: PolicyOpt = None,
    selection: TargetSelection = TargetSelection(),
    fmt: str = typer.Option("yaml", "--format", "-f", metavar="yaml|json", help="yaml or json."),
) -> int:
    """Print the effective policy for each target, after its overrides are merged.

    Without target options (and no inventory/ folder here) it prints the policy as it
    applies to a target that no override matches.
    """
    if fmt not in ("yaml", "json"):
        raise ConfigError(f"--format {fmt}: use yaml or json")
    loaded = resolve_policy(policy, no_policy=False, checks=evaluate.CHECKS)
    if loaded is None:
        raise ConfigError(f"no {POLICY_FILE} here or in a parent folder (write one with `computefence policy init`)")
    selected = bool(source_options(selection)) or Path("inventory").is_dir()
    targets: list[Target] = []
    if selected:
        targets, _ = gather_targets(selection)
    entries = (
        [("(any target)", [], loaded.policy.for_target("", []))]
        if not targets
        else [(t.name, t.tags, loaded.policy.for_target(t.name, t.tags)) for t in targets]
    )
    if fmt == "json":
        document = {
            "policy": loaded.path,
            "sha256": loaded.sha256,
            "targets": [
                {"name": n, "tags": tags, "policy": effective_document(p)} | _derived(p) for n, tags, p in entries
            ],
        }
        write_stdout(json.dumps(document, indent=2) + "\n")
        return 0
    lines = [f"# policy {loaded.path} (sha256 {loaded.sha256[:12]})"]
    for name, tags, effective in entries:
        tag_text = f" (tags: {', '.join(tags)})" if tags else ""
        lines += [
            "",
            f"# --- {name}{tag_text}",
            yaml.safe_dump(effective_document(effective), sort_keys=False, allow_unicode=True).rstrip(),
        ]
        for key, value in _derived(effective).get("job_derived", {}).items():
            lines.append(f"# job {key}: {value}")
    write_stdout("\n".join(lines) + "\n")
    return 0


# ---------------------------------------------------------------- policy init


def _q(value: str) -> str:
    """A YAML scalar that reads back as exactly this string (values come from a pod)."""
    return json.dumps(value, ensure_ascii=False)


def starter_policy(facts: Facts, source: str) -> str:
    """A commented policy whose requirements and hardware are true of `facts`."""
    torch, gpu, identity = facts.torch, facts.gpu, facts.identity
    requirements: list[tuple[str, str, str]] = []
    python = torch.python_version or identity.python_version
    if python:
        requirements.append(("python", ">=" + ".".join(python.split(".")[:2]), "the training interpreter"))
    if torch.importable and torch.version:
        requirements.append(("torch", ">=" + torch.version.split("+")[0], ""))
        if torch.cuda_build:
            requirements.append(("torch-cuda", ">=" + torch.cuda_build, "torch's CUDA build"))
    if gpu.driver_version:
        requirements.append(("nvidia-driver", ">=" + gpu.driver_version.split(".")[0], ""))
    if identity.glibc:
        requirements.append(("glibc", ">=" + identity.glibc, ""))
    for name, version in sorted(facts.packages.versions.items()):
        if version and name != "torch" and name not in SPECIAL_REQUIREMENTS:
            requirements.append((name, ">=" + version.split("+")[0], ""))
    requirements = [r for r in requirements if _valid_requirement(*r[:2])]
    lines = [
        "# computefence.yaml: what this job needs from a machine. Written by `computefence policy init`",
        f"# from {source}; every requirement below is true there. Tighten or delete lines as the job needs.",
        "# Checked by `computefence doctor` and `computefence fleet check`; `computefence policy show` prints",
        "# what applies to each pod.",
        "",
        'requirements:            # PEP 440 specifiers; "*" means installed, any version',
    ]
    for name, spec, note in requirements:
        lines.append(f"  {_q(name)}: {_q(spec)}" + (f"  # {note}" if note else ""))
    if not requirements:
        lines[-1] = 'requirements: {}         # e.g. transformers: ">=4.48"'
    lines += ["", "hardware:"]
    hardware = []
    if gpu.gpus:
        names = sorted({g.name for g in gpu.gpus})
        if len(names) == 1:
            hardware.append(f'  gpu_model: {_q(names[0])}    # a glob on nvidia-smi\'s name, e.g. "*H100*"')
        hardware.append(f'  gpu_count: {len(gpu.gpus)}              # or ">=2"')
    memory = smallest_gpu_memory(facts)
    if memory is not None:
        n_bytes, mib = memory
        source_figure = f"nvidia-smi's {mib} MiB" if mib is not None else f"{n_bytes} bytes"
        hardware.append(
            f"  gpu_memory_gb: {_q('>=' + str(whole_gb(n_bytes)))}  # smallest GPU, whole GB of 10^9 bytes ({source_figure})"
        )
    lines += hardware or ["  {}                      # gpu_model, gpu_count, gpu_memory_gb, disk_free_gb, shm_gb"]
    lines += [
        "  # disk_free_gb: 100      # GB of 10^9 bytes free where checkpoints go (checks.output_dir)",
        "  # shm_gb: 8",
        "",
        "# thresholds: {disk_warn_gb: 20, disk_block_gb: 5, shm_min_gb: 1}",
        "# severity: {storage.no-volume: block, gpu.memory-in-use: ignore}   # block, warn or ignore",
        "# skip: [dataset.label-skew]",
        "# checks: {output_dir: /workspace/ckpt}",
        "# job:                    # sizes the disk and GPU memory from the run (storage.budget, gpu.memory-budget)",
        "#   model: meta-llama/Llama-3.1-8B   # a Hub repo id in the pod's HF cache, or a path on the pod",
        "#   method: full          # full | lora | qlora",
        "#   sharding: none        # none | zero1 | zero2 | zero3 | fsdp",
        "#   save_total_limit: 3",
        "#   max_steps: 6000",
        "# custom:                 # your own pre-flight commands, run with `sh -c` on each pod",
        "#   - id: wandb-login",
        '#     run: "wandb status"',
        '#     expect: {exit: 0, stdout_matches: "Logged in"}',
        "#     severity: block",
        '#     fix: "wandb login"',
        "#     timeout: 10",
        "# overrides:              # per tag or name pattern, merged over the above",
        "#   - match: {tag: train-8x}",
        "#     hardware: {gpu_count: 8}",
        "# baseline: computefence.lock.json   # from `computefence fleet snapshot`",
        "",
    ]
    return "\n".join(lines)


def _valid_requirement(name: str, spec: str) -> bool:
    # A version or name from a pod that no specifier can hold is left out, not written broken.
    try:
        parse_policy_text(f"requirements: {{{_q(name)}: {_q(spec)}}}", "-", evaluate.CHECKS)
    except ConfigError:
        return False
    return True


def _report_facts(path: Path, pod: str | None) -> tuple[Facts, str]:
    report = load_report(path)
    checked = [h for h in report.hosts if h.facts is not None]
    if pod is not None:
        checked = [h for h in checked if h.name == pod]
        if not checked:
            raise ConfigError(f"--pod {pod}: no checked pod of that name in {path}")
    if not checked:
        raise ConfigError(f"{path}: no pod in this report was checked; nothing to start a policy from")
    facts = checked[0].facts
    assert facts is not None  # kept above for having facts
    return facts, f"pod {checked[0].name} in {path.name}"


@policy_app.command("init")
def init(
    from_report: Path | None = typer.Option(
        None,
        "--from",
        metavar="REPORT.json",
        help="Start from a saved report (`--format json`) instead of this machine.",
    ),
    pod: str | None = typer.Option(
        None, "--pod", metavar="NAME", help="With --from: the pod to start from (default: the first checked)."
    ),
    python: str = typer.Option("python3", "--python", metavar="PATH", help="The training interpreter on this machine."),
    output: Path = typer.Option(
        Path(POLICY_FILE), "--output", "-o", metavar="FILE", help="Where to write it ('-' for stdout)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing file."),
) -> int:
    """Write a commented starter policy whose requirements are true of this machine (or a saved report's pod).

    Sizes (gpu_memory_gb, disk_free_gb, shm_gb) are GB of 10^9 bytes; GPU memory is the smallest
    GPU's, in whole GB, the figure `fleet snapshot` records in the lock."""
    if str(output) != "-" and output.exists() and not force:
        raise ConfigError(f"{output} exists; use --force to replace it, or -o another file")
    if from_report is not None:
        facts, source = _report_facts(from_report, pod)
    else:
        if pod is not None:
            raise ConfigError("--pod needs --from REPORT.json")
        from computefence.connectors.local import probe_local
        from computefence.connectors.payload import probe_params

        facts = asyncio.run(probe_local(probe_params(CheckOptions(), python=python, deadline_s=30.0), 40.0))
        source = f"this machine ({facts.identity.hostname or 'localhost'})"
    text = starter_policy(facts, source)
    parse_policy_text(text, str(output), evaluate.CHECKS)  # what it writes must load
    write_output(text, output)
    if str(output) != "-":
        print(f"computefence: wrote {output}; `computefence policy show` prints what applies", file=sys.stderr)
    return 0
