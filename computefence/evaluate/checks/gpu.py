"""GPU checks: the driver, torch's CUDA build against it, and what torch can see.

On a machine with no sign of an NVIDIA GPU (no nvidia-smi, no /dev/nvidia*) and none
expected, gpu.driver reports skip with that reason and the other GPU checks stay silent. A check whose
precondition failed elsewhere (the driver is broken, torch does not import) stays silent
too: the failing check already names the cause and its fix.
"""

from __future__ import annotations

from collections import Counter

from computefence.evaluate import cuda_errors
from computefence.evaluate.context import (
    Context,
    block,
    collector_error,
    env_by_source,
    passed,
    q,
    skipped,
    sudo,
    training_python,
    warn,
)
from computefence.evaluate.cuda_errors import CudaError, read_cuda_error
from computefence.evaluate.file_edits import refuse_link
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.evaluate.torch_builds import (
    ARCH_MIN_CUDA,
    build_fix,
    capability,
    choose_build,
    cuda_text,
    driver_runs,
    min_cuda_for_gpus,
    parse_capability,
    parse_cuda,
)
from computefence.models import CheckOptions, Facts, Finding, Fix, FixStep, StepKind, TorchFacts
from computefence.text import one_line, plural

CHECKS: dict[str, CheckSpec] = {
    "gpu.driver": CheckSpec("nvidia-smi answers and lists the GPUs", Remedy.FIX),
    "gpu.cuda-unavailable": CheckSpec("torch can use CUDA where the driver sees GPUs", Remedy.FIX),
    "gpu.torch-cpu-build": CheckSpec("torch is a CUDA build on a GPU machine", Remedy.FIX),
    "gpu.driver-too-old": CheckSpec("the driver's CUDA version runs torch's CUDA build", Remedy.FIX),
    "gpu.arch-unsupported": CheckSpec("torch has kernels for every GPU's compute capability", Remedy.FIX),
    "gpu.memory-in-use": CheckSpec("no GPU memory is already held by other processes", Remedy.FIX),
    "gpu.count-mismatch": CheckSpec("torch sees as many GPUs as the driver", Remedy.FIX),
}

NO_GPU = "no NVIDIA GPU on this machine; GPU checks skipped"
# More than this in use on an idle GPU means another process holds it.
BUSY_MIB = 1024


def _torch_ok(torch: TorchFacts) -> bool:
    return torch.importable and not torch.timed_out


def _odd(text: str) -> str:
    """A version text from the pod that is not one, shown short and quoted."""
    return repr(one_line(text, 40))


def _torch_name(torch: TorchFacts) -> str:
    return f"torch {torch.version or '(unknown version)'}"


def _visible_devices(facts: Facts) -> str | None:
    return env_by_source(facts, "CUDA_VISIBLE_DEVICES").get("process")


def _dmesg(facts: Facts) -> str:
    return f"{sudo(facts)}dmesg | grep -iE 'nvrm|xid' | tail -n 20"


def _restart_note(ctx: Context) -> str:
    if ctx.on_provider:
        how = f" (`{ctx.restart_command()}`)" if ctx.restart_command() else ""
        return f"restart the {ctx.profile.title} machine{how}; if it recurs, the host is faulty: move to another one"
    return "reboot the machine"


def _wedged_fix(facts: Facts, ctx: Context, first: list[str]) -> Fix:
    """Restart where the provider has a command for it; else look at the kernel log first."""
    restart = ctx.restart_command()
    if restart:
        return Fix(
            steps=[FixStep.local(restart, StepKind.DISRUPTIVE)],
            advice=f"the driver is wedged; if it recurs after a restart, the "
            f"{ctx.profile.title} host is faulty: move to another machine",
        )
    return Fix(commands=first, advice=_restart_note(ctx))


def _install_fix(
    facts: Facts, replace: bool, min_cuda: tuple[int, int] | None = None, advice: str | None = None
) -> Fix:
    """Reinstall torch as the CUDA build this driver runs; `advice` goes with the command."""
    torch = facts.torch
    return build_fix(
        training_python(facts),
        facts.gpu.cuda_version,
        torch.version,
        min_cuda or min_cuda_for_gpus(facts),
        replace=replace,
        advice=advice,
    )


# ---------------------------------------------------------------- gpu.driver


def check_driver(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.driver"
    gpu = facts.gpu
    failure = collector_error(facts, "gpu")
    if failure is not None and not gpu.nvidia_smi_found:
        return [
            block(
                cid,
                f"GPU facts could not be collected ({one_line(failure, 240)}): nvidia-smi or the driver is hung",
                _wedged_fix(facts, ctx, ["timeout 20 nvidia-smi", _dmesg(facts)]),
            )
        ]
    if gpu.timed_out:
        # The probe's words carry the limit ("nvidia-smi did not answer within 14.5s").
        said = one_line(gpu.error_output, 120) if gpu.error_output and "within" in gpu.error_output else None
        return [
            block(
                cid,
                f"{said or 'nvidia-smi did not answer in time'}: the driver or a GPU is wedged",
                _wedged_fix(facts, ctx, [_dmesg(facts)]),
            )
        ]
    if gpu.nvidia_smi_found and gpu.exit_code not in (0, None):
        output = one_line(gpu.error_output, 240) or "no output"
        return [block(cid, f"nvidia-smi failed (exit {gpu.exit_code}): {output}", _driver_fix(facts, ctx))]
    if gpu.gpus:
        names = Counter(g.name for g in gpu.gpus)
        listed = ", ".join(f"{n}x {name}" if n > 1 else name for name, n in names.items())
        count = len(gpu.gpus)
        sees = f"sees {count} GPU{'s' if count > 1 else ''}: {listed}"
        if gpu.cuda_version and parse_cuda(gpu.cuda_version) is None:
            return [
                warn(
                    cid,
                    f"driver {gpu.driver_version or '?'} {sees}, but its CUDA version {_odd(gpu.cuda_version)} "
                    "is not a CUDA version: whether it runs torch's CUDA build is unknown",
                    Fix(commands=["nvidia-smi | head -n 4"], advice="nvidia-smi's header names the CUDA version"),
                )
            ]
        cuda = f" (CUDA {gpu.cuda_version})" if gpu.cuda_version else ""
        return [passed(cid, f"driver {gpu.driver_version or '?'}{cuda} {sees}")]
    if gpu.nvidia_smi_found:
        if ctx.gpu_expected or gpu.device_nodes:
            return [block(cid, f"nvidia-smi lists no GPUs{_expected_reason(checks, ctx)}", _no_gpu_fix(ctx))]
        return [skipped(cid, "nvidia-smi is installed but lists no GPU; GPU checks skipped")]
    if gpu.device_nodes:
        nodes = ", ".join(gpu.device_nodes[:3])
        fix = Fix(
            commands=["cat /proc/driver/nvidia/version"],
            advice=f"install the utilities of that driver version ({sudo(facts)}apt-get install -y nvidia-utils-<major>); "
            "in a container, start it with NVIDIA_DRIVER_CAPABILITIES=compute,utility so the runtime mounts nvidia-smi",
        )
        if facts.torch.cuda_available:
            # torch works; only the tooling is missing, which hides the driver facts.
            return [
                warn(
                    cid,
                    f"GPU device nodes ({nodes}) are present and torch uses CUDA, but nvidia-smi is not "
                    "on PATH: driver version and GPU memory could not be checked",
                    fix,
                )
            ]
        return [block(cid, f"GPU device nodes ({nodes}) are present but nvidia-smi is not on PATH", fix)]
    if ctx.gpu_expected:
        return [
            block(
                cid,
                f"no NVIDIA GPU visible: no nvidia-smi and no /dev/nvidia* devices{_expected_reason(checks, ctx)}",
                _no_gpu_fix(ctx),
            )
        ]
    return [skipped(cid, NO_GPU)]


def _all_gpus(n: int) -> str:
    return "the GPU" if n == 1 else f"all {n} GPUs"


def _expected_reason(checks: CheckOptions, ctx: Context) -> str:
    if ctx.provider is not None and ctx.provider.gpu_count:
        return f", but {ctx.profile.title} lists {plural(ctx.provider.gpu_count, 'GPU')} for this pod"
    return ", but --expect-gpu says this machine should have one" if checks.expect_gpu else ""


def _driver_fix(facts: Facts, ctx: Context) -> Fix:
    if ctx.on_provider:
        return _wedged_fix(facts, ctx, ["ls -l /dev/nvidia*"])
    root = sudo(facts)
    return Fix(
        steps=[FixStep.disruptive(f"{root}modprobe nvidia && nvidia-smi"), FixStep.inspect(_dmesg(facts))],
        advice=f"if nvidia-smi still fails, the kernel log says why; a kernel update without a rebuilt driver is the "
        f"usual cause: reinstall the driver ({root}ubuntu-drivers install) and reboot",
    )


def _no_gpu_fix(ctx: Context) -> Fix:
    if ctx.on_provider:
        restart = ctx.restart_command()
        return Fix(
            steps=[FixStep.local(restart, StepKind.DISRUPTIVE)] if restart else [],
            advice=f"this {ctx.profile.title} machine has no GPU attached: restart it or redeploy it on a GPU",
        )
    return Fix(
        advice="start the container with GPU access (docker run --gpus all ...) or install the NVIDIA driver "
        "(sudo ubuntu-drivers install)"
    )


# ---------------------------------------------------------------- torch against the driver


def check_torch_cpu_build(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.torch-cpu-build"
    torch = facts.torch
    if not ctx.gpu_present or not _torch_ok(torch):
        return []
    if torch.cuda_build:
        return [passed(cid, f"{_torch_name(torch)} is a CUDA {torch.cuda_build} build")]
    kind = f"a ROCm {torch.hip_build} build" if torch.hip_build else "a CPU-only build"
    return [
        block(
            cid,
            f"{_torch_name(torch)} in {torch.python} is {kind} on an NVIDIA GPU machine: training runs on the CPU",
            _install_fix(facts, replace=True),
        )
    ]


def _driver_too_old(facts: Facts) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(driver CUDA, torch CUDA) when the driver's CUDA is older than torch's build."""
    driver = parse_cuda(facts.gpu.cuda_version)
    build = parse_cuda(facts.torch.cuda_build)
    if driver is None or build is None or driver_runs(facts.gpu.cuda_version, facts.torch.cuda_build):
        return None
    return driver, build


def check_driver_too_old(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.driver-too-old"
    torch = facts.torch
    if not ctx.gpu_usable or not _torch_ok(torch) or not torch.cuda_build:
        return []
    unknown = [
        f"{what} {_odd(text)} is not a CUDA version" if text else f"no {what} was reported"
        for what, text in (("driver CUDA version", facts.gpu.cuda_version), ("torch CUDA build", torch.cuda_build))
        if parse_cuda(text) is None
    ]
    if unknown:
        # Unknown is never a pass: a version no CUDA release has cannot be compared.
        return [
            warn(
                cid,
                f"{'; '.join(unknown)}: whether driver {facts.gpu.driver_version or '?'} runs "
                f"{_torch_name(torch)} is unknown",
                Fix(
                    commands=[
                        "nvidia-smi | head -n 4",
                        f"{q(training_python(facts))} -c 'import torch; print(torch.version.cuda)'",
                    ]
                ),
            )
        ]
    too_old = _driver_too_old(facts)
    if too_old is None:
        return [passed(cid, f"driver CUDA {facts.gpu.cuda_version} runs torch's CUDA {torch.cuda_build} build")]
    driver, build = too_old
    effect = (
        "torch.cuda.is_available() is False and training falls back to the CPU"
        if not torch.cuda_available
        else "kernels built for the newer CUDA fail to load"
    )
    message = (
        f"{_torch_name(torch)} is built for CUDA {cuda_text(build)}, but driver {facts.gpu.driver_version or '?'} "
        f"supports CUDA {cuda_text(driver)} only: {effect}"
    )
    fix = _install_fix(facts, replace=True, advice=f"or use a machine whose driver supports CUDA {cuda_text(build)}")
    # A driver older than every published torch build leaves nothing to install: only another machine helps.
    no_build = choose_build(torch.version, facts.gpu.cuda_version, min_cuda_for_gpus(facts)) is None
    return [block(cid, message, fix, remedy=Remedy.REPLACE if no_build else None)]


def check_cuda_unavailable(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.cuda-unavailable"
    torch = facts.torch
    if not ctx.gpu_usable or not _torch_ok(torch) or not torch.cuda_build or _driver_too_old(facts):
        return []
    if torch.cuda_available:
        count = torch.device_count if torch.device_count is not None else "?"
        return [passed(cid, f"torch uses CUDA ({count} device{'' if count == 1 else 's'})")]
    seen = len(facts.gpu.gpus)
    visible = _visible_devices(facts)
    if visible is not None and visible.strip().lower() in ("", "-1", "none", "void", "nodevfiles"):
        return [
            block(
                cid,
                f"torch cannot use CUDA: CUDA_VISIBLE_DEVICES={visible!r} hides {_all_gpus(seen)} the driver sees",
                _visible_devices_origin(facts, visible)[1],
            )
        ]
    error = read_cuda_error(torch.cuda_error)
    why = f": {error.text}" if error else ""
    message = (
        f"{_torch_name(torch)} cannot use CUDA although the driver sees {plural(seen, 'GPU')}{why}; "
        "training would silently run on the CPU"
    )
    subject = f"CUDA error {error.code}" if error and error.code is not None else None
    return [block(cid, message, _cuda_error_fix(facts, ctx, error), subject=subject)]


def _cuda_error_fix(facts: Facts, ctx: Context, error: CudaError | None) -> Fix:
    """What the CUDA error needs; a torch reinstall only where torch itself may be the cause."""
    code = error.code if error else None
    restart_command = ctx.restart_command()
    restart = [FixStep.local(restart_command, StepKind.DISRUPTIVE)] if restart_command else []
    root = sudo(facts)
    if code == cuda_errors.NOT_INITIALIZED:
        if ctx.on_provider:
            return Fix(
                steps=[*restart, FixStep.inspect("nvidia-smi -q | grep -A 2 -i fabric")],
                advice=f"error 802: the NVSwitch fabric is not initialised because the host's fabric manager is not "
                f"running; only the host can start it: restart the {ctx.profile.title} machine or move to "
                "another one; reinstalling torch cannot help",
            )
        return Fix(
            steps=[
                FixStep.disruptive(f"{root}systemctl start nvidia-fabricmanager"),
                FixStep.inspect("nvidia-smi -q | grep -A 2 -i fabric"),
            ],
            advice="error 802: the NVSwitch fabric is not initialised; install nvidia-fabricmanager of the driver's "
            "exact version if the service is missing; reinstalling torch cannot help",
        )
    if code in (cuda_errors.UNKNOWN, cuda_errors.INITIALIZATION):
        return Fix(
            steps=[FixStep.inspect(_dmesg(facts)), *restart],
            advice=f"CUDA error {code} leaves the GPU unusable until it is reset: " + _restart_note(ctx),
        )
    if code == cuda_errors.NO_DEVICE:
        return Fix(
            commands=["ls -l /dev/nvidia*"],
            advice="CUDA finds no device: the container cannot open the GPU device nodes (start it with "
            "--gpus all or NVIDIA_VISIBLE_DEVICES=all), or CUDA_VISIBLE_DEVICES names no GPU that exists",
        )
    if code == cuda_errors.COMPAT_NOT_SUPPORTED:
        return Fix(
            commands=["ldconfig -p | grep -F libcuda.so"],
            advice="error 804: CUDA forward-compatibility libraries (cuda-compat, /usr/local/cuda/compat) load ahead "
            "of the driver's libcuda, and only datacenter GPUs support them: remove that directory from "
            "LD_LIBRARY_PATH and /etc/ld.so.conf.d, or use an image built for this driver",
        )
    if code == cuda_errors.INSUFFICIENT_DRIVER:
        return _install_fix(
            facts,
            replace=True,
            advice="the driver is older than torch's CUDA runtime; or use a machine with a newer driver",
        )
    return _install_fix(
        facts,
        replace=True,
        advice=f"`{q(training_python(facts))} -c 'import torch; torch.cuda.init()'` prints the underlying error",
    )


# ---------------------------------------------------------------- GPU architectures


def _arch_supported(cap: tuple[int, int], arch_list: list[str]) -> bool:
    for entry in arch_list:
        entry = entry.strip().lower()
        built = parse_capability(entry)
        if built is None:
            continue
        if entry.startswith("compute_") and built <= cap:
            return True  # PTX is JIT-compiled for newer GPUs
        if entry.startswith("sm_") and built[0] == cap[0] and built[1] <= cap[1]:
            return True  # binaries run on later GPUs of the same major version
    return False


def check_arch_unsupported(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.arch-unsupported"
    torch = facts.torch
    if not ctx.gpu_usable or not _torch_ok(torch) or not torch.cuda_build or not torch.arch_list:
        return []
    by_cap: dict[tuple[int, int], list[tuple[int, str]]] = {}
    for gpu in facts.gpu.gpus:
        cap = capability(facts, gpu.index, gpu.compute_cap)
        if cap is not None:
            by_cap.setdefault(cap, []).append((gpu.index, gpu.name))
    if not by_cap:
        return []
    findings = []
    for cap, gpus in sorted(by_cap.items()):
        if _arch_supported(cap, torch.arch_list):
            continue
        sm = f"sm_{cap[0]}{cap[1]}"
        indices = ",".join(str(i) for i, _ in gpus)
        message = (
            f"{_torch_name(torch)} has no kernels for {sm} ({gpus[0][1]}, GPU {indices}): CUDA ops fail with "
            f"'no kernel image is available'; it was built for {' '.join(torch.arch_list)}"
        )
        min_cuda = max(ARCH_MIN_CUDA.get(cap, (0, 0)), min_cuda_for_gpus(facts) or (0, 0))
        findings.append(block(cid, message, _install_fix(facts, replace=True, min_cuda=min_cuda), subject=sm))
    if findings:
        return findings
    covered = ", ".join(f"sm_{c[0]}{c[1]}" for c in sorted(by_cap))
    return [passed(cid, f"{_torch_name(torch)} has kernels for {covered}")]


# ---------------------------------------------------------------- what the GPUs hold and show


def check_memory_in_use(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.memory-in-use"
    if not ctx.gpu_usable:
        return []
    measured = [g for g in facts.gpu.gpus if g.memory_used_mib is not None]
    if not measured:
        return []
    busy = [g for g in measured if (g.memory_used_mib or 0) > BUSY_MIB]
    if not busy:
        most = max(g.memory_used_mib or 0 for g in measured)
        return [passed(cid, f"no GPU memory held by other processes (at most {most} MiB in use)")]
    held = ", ".join(
        f"GPU {g.index} {g.memory_used_mib} of {g.memory_total_mib if g.memory_total_mib is not None else '?'} MiB"
        for g in busy
    )
    fix = Fix(
        commands=["nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"],
        advice="kill the stale PIDs it lists; if it lists none, the memory is held outside this container: "
        + _restart_note(ctx),
    )
    subject = "GPU " + ",".join(str(g.index) for g in busy)
    return [warn(cid, f"GPU memory already in use ({held}): the job may run out of memory", fix, subject=subject)]


def check_count_mismatch(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.count-mismatch"
    torch = facts.torch
    if not ctx.gpu_usable or not _torch_ok(torch) or not torch.cuda_available or torch.device_count is None:
        return []
    seen, usable = len(facts.gpu.gpus), torch.device_count
    if usable == seen:
        interactive = _interactive_only_selection(facts, seen, ctx)
        if interactive:
            return interactive
        return [
            passed(
                cid,
                f"torch sees all {seen} GPUs the driver lists" if seen > 1 else "torch sees the GPU the driver lists",
            )
        ]
    visible = _visible_devices(facts)
    listed = [part for part in (visible or "").split(",") if part.strip()]
    if visible is not None and listed and len(listed) == usable:
        # The probe runs in a fresh login session: a value it sees is the machine's, not the job's choice.
        where, fix_hidden = _visible_devices_origin(facts, visible)
        if ctx.gpu_count is not None and ctx.gpu_count.satisfied_by(usable):
            return [
                passed(
                    cid,
                    f"torch sees {usable} of {seen} GPUs: CUDA_VISIBLE_DEVICES={visible} from {where}, "
                    f"as the policy's gpu_count {ctx.gpu_count.text} intends",
                )
            ]
        return [
            warn(
                cid,
                f"CUDA_VISIBLE_DEVICES={visible} hides {seen - usable} of the {seen} GPUs this machine has "
                f"(torch sees {usable}); it is set in {where}, so every login and job gets it",
                fix_hidden,
            )
        ]
    every = ",".join(str(g.index) for g in facts.gpu.gpus)
    if visible is not None:
        message = f"torch sees {plural(usable, 'GPU')}, the driver lists {seen}; CUDA_VISIBLE_DEVICES={visible!r}"
        # Only the job's own shell can change what it sees: words, not a step to run on the pod.
        fix = Fix(
            advice=f"run the job with CUDA_VISIBLE_DEVICES={every} (or unset it); look for a stale setting in ~/.bashrc",
        )
    else:
        nvidia_visible = env_by_source(facts, "NVIDIA_VISIBLE_DEVICES").get("process")
        shown = f" (NVIDIA_VISIBLE_DEVICES={nvidia_visible})" if nvidia_visible else ""
        message = f"torch sees {plural(usable, 'GPU')}, the driver lists {seen}: the container exposes fewer devices to CUDA{shown}"
        fix = Fix(
            commands=["ls -l /dev/nvidia*"],
            advice="the container was started with fewer GPU devices than nvidia-smi reports: " + _restart_note(ctx),
        )
    return [warn(cid, message, fix)]


# Where a machine-wide CUDA_VISIBLE_DEVICES can come from (EnvValue.source), as a file to edit.
_ENV_FILES = {"etc_environment": "/etc/environment", "rp_environment": "/etc/rp_environment"}
_STARTUP_FILES = (
    "~/.bashrc ~/.profile ~/.bash_profile /etc/profile /etc/bash.bashrc /etc/profile.d/*.sh /etc/ssh/sshd_config"
)


def _interactive_only_selection(facts: Facts, seen: int, ctx: Context) -> list[Finding]:
    """A login file that hides GPUs from interactive shells only (after .bashrc's
    non-interactive return): the probe's session missed it, a job started by hand gets it."""
    cid = "gpu.count-mismatch"
    for source, value in env_by_source(facts, "CUDA_VISIBLE_DEVICES").items():
        listed = [part for part in (value or "").split(",") if part.strip()]
        if not source.startswith("file:") or value is None or len(listed) >= seen:
            continue
        if ctx.gpu_count is not None and ctx.gpu_count.satisfied_by(len(listed)):
            continue
        where, fix_hidden = _visible_devices_origin(facts, value)
        return [
            warn(
                cid,
                f"{where} sets CUDA_VISIBLE_DEVICES={value} for interactive shells: a job started from one "
                f"sees {len(listed)} of the {seen} GPUs this machine has",
                fix_hidden,
            )
        ]
    return []


# Deletes `CUDA_VISIBLE_DEVICES=` and `export CUDA_VISIBLE_DEVICES=` lines; a second run finds none.
_DELETE_VISIBLE = "sed -i '/^[[:space:]]*\\(export[[:space:]]\\+\\)\\?CUDA_VISIBLE_DEVICES=/d'"


def _root_for(facts: Facts, path: str) -> str:
    return sudo(facts) if not path.startswith(facts.identity.home or "~") else ""


def _visible_devices_origin(facts: Facts, value: str) -> tuple[str, Fix]:
    """(where the value is set, the fix that removes it there)."""
    sources = [
        source
        for source, seen in env_by_source(facts, "CUDA_VISIBLE_DEVICES").items()
        if source != "process" and seen == value
    ]
    files = [
        _ENV_FILES.get(source) or source.removeprefix("file:")
        for source in sources
        if source in _ENV_FILES or source.startswith("file:")
    ]
    if files:
        path = files[0]
        steps = [
            FixStep.safe(f"{refuse_link(q(f))} && {_root_for(facts, f)}{_DELETE_VISIBLE} -- {q(f)}")
            for f in dict.fromkeys(files)
        ]
        return path, Fix(
            steps=steps, advice="then log in again; or set the GPUs the job should use in the job's own command"
        )
    if "container" in sources:
        return "the container's environment", Fix(
            advice="`unset CUDA_VISIBLE_DEVICES` lasts for one shell only: remove the variable from the pod's "
            "template or `docker run -e`",
        )
    return "the login environment", Fix(
        commands=[f"grep -ns CUDA_VISIBLE_DEVICES {_STARTUP_FILES}"],
        advice="delete the line it finds (an sshd SetEnv needs `systemctl reload ssh`), then log in again",
    )


RULES = [
    check_driver,
    check_torch_cpu_build,
    check_driver_too_old,
    check_cuda_unavailable,
    check_arch_unsupported,
    check_memory_in_use,
    check_count_mismatch,
]
