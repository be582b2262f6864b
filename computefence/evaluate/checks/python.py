"""python.torch-missing: torch must import in the interpreter the job will run with.

Where torch matters: a GPU is present or expected, or torch is installed (a broken install
is a fault wherever it is). A machine with neither (a laptop, a CI runner) without torch
gets a pass saying so, never a blocker.
"""

from __future__ import annotations

from computefence.evaluate.context import Context, block, collector_error, passed, skipped, timed_out, training_python
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.evaluate.torch_builds import build_fix, pip_install, reinstall_command
from computefence.models import CheckOptions, Facts, Finding, Fix, FixStep
from computefence.text import one_line

CHECKS: dict[str, CheckSpec] = {
    "python.torch-missing": CheckSpec("torch imports in the training interpreter", Remedy.FIX),
}

DEFAULT_PYTHON = "python3"


def check_torch_missing(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "python.torch-missing"
    torch = facts.torch
    python = torch.python
    installed = facts.packages.versions.get("torch")
    needed = ctx.gpu_present or ctx.gpu_expected or bool(installed)
    if torch.importable and not torch.timed_out:
        where = f" (Python {torch.python_version})" if torch.python_version else ""
        return [passed(cid, f"torch {torch.version or '?'} imports in {python}{where}", subject=python)]
    slow = timed_out(facts, "torch")
    if slow is not None:
        # Unknown, not missing: probe.timeout says so and blocks where torch matters.
        return [skipped(cid, f"unknown: {slow} (see probe.timeout)", subject=python)]
    failure = collector_error(facts, "torch")
    if not torch.python_found:
        message = f"the training interpreter {python} was not found"
        fix = Fix(
            commands=["command -v python3"],
            advice="install Python, or name the job's interpreter with --python "
            "/path/to/venv/bin/python (python: in an inventory)",
        )
        if needed or python != DEFAULT_PYTHON:
            return [block(cid, message, fix, subject=python)]
        return [skipped(cid, f"{message}; no GPU here, so torch is not needed", subject=python)]
    error = one_line(torch.import_error or failure or "import failed", 200)
    if not needed:
        return [skipped(cid, f"torch is not installed in {python}; no GPU here, so none is needed", subject=python)]
    if installed:
        message = f"torch {installed} is installed in {python} but does not import: {error}"
    else:
        message = f"torch is not installed in {python}: {error}"
    repair = reinstall_command(training_python(facts), installed) if installed else _install(facts)
    return [block(cid, message, repair, subject=python)]


def _install(facts: Facts) -> Fix:
    python = training_python(facts)
    driver = facts.gpu.cuda_version
    if driver is None:
        return Fix(steps=[FixStep.safe(pip_install(python, "torch"))])
    return build_fix(python, driver)


RULES = [check_torch_missing]
