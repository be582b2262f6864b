"""Every command in the README and docs/ works as written.

Each `computefence ...` line of a ```sh block is parsed by the real CLI, options and values
checked (a flag renamed or removed, a choice misspelt, fails here). What runs on this machine
runs for real, as pasted: every documented `--demo` command, the Python example, the recipe
that starts a job on the ready pods (against the simulated pods), and the quick start in a
fresh virtual environment made from a copy of this checkout."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from computefence.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
_OPERATORS = {"&&", "||", "|", ";", "&", "(", ")"}


def sh_blocks(path: Path) -> list[str]:
    return _SH_BLOCK.findall(path.read_text(encoding="utf-8"))


def computefence_commands(block: str) -> list[list[str]]:
    """The argv of each `computefence` command in a shell block (after a crontab's schedule too)."""
    joined = re.sub(r"(\\|\|)\n", lambda m: " | " if m.group(1) == "|" else " ", block)
    commands: list[list[str]] = []
    for line in joined.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        commands.append([])
        for word in lexer:
            if word in _OPERATORS:
                commands.append([])
            else:
                commands[-1].append(word)
    found = []
    for words in commands:
        if "computefence" in words:
            found.append(words[words.index("computefence") + 1 :])
    return found


def parse(argv: list[str]) -> None:
    """Parse argv as the CLI would, down to the command that runs, without running it."""
    command = typer.main.get_command(app)
    ctx = command.make_context("computefence", list(argv))
    while hasattr(command, "resolve_command"):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        name, command, rest = command.resolve_command(ctx, rest)
        ctx = command.make_context(name, rest, parent=ctx)


CASES = [
    pytest.param(argv, id=f"{path.relative_to(ROOT)}: computefence {' '.join(argv)}"[:150])
    for path in DOCS
    for block in sh_blocks(path)
    for argv in computefence_commands(block)
]


def test_the_docs_have_commands_to_check():
    assert len(CASES) > 30


@pytest.mark.parametrize("argv", CASES)
def test_a_documented_command_parses(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # options naming files that must exist get them here
    for word in argv:
        if re.fullmatch(r"[\w./-]+\.(ya?ml|json|lock\.json)", word) and not word.startswith("/"):
            (tmp_path / word).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / word).write_text("{}\n")
    parse(argv)


def shell_lines(path: Path) -> list[str]:
    """Each command line of the file's ```sh blocks (continued lines joined)."""
    return [line for block in sh_blocks(path) for line in re.sub(r"\\\n", " ", block).splitlines() if line.strip()]


DEMO_LINES = [
    pytest.param(line, id=f"{path.relative_to(ROOT)}: {line}"[:150])
    for path in DOCS
    for line in shell_lines(path)
    if re.search(r"\bcomputefence\b.*--demo\b", line)
]


@pytest.fixture
def pasted(tmp_path):
    """A shell as a user's: this checkout's `computefence` on PATH (as `pip install .` puts it),
    an empty HOME, a scratch folder to run in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "computefence"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m computefence "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"), COLUMNS="100")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env.pop("COMPUTEFENCE_POLICY", None)

    def run(script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path / "work",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


def test_the_docs_have_demo_commands_to_run():
    assert {"fleet check --demo", "fleet fix --demo", "fleet watch --demo --once"} <= {
        re.sub(r"^.*computefence ", "", p.values[0]).split("  #")[0].strip() for p in DEMO_LINES
    }


@pytest.mark.parametrize("line", DEMO_LINES)
def test_a_documented_demo_command_runs_as_pasted(line, pasted):
    result = pasted(line)
    # The demo fleet has blockers: a check, a plan or a watch of it exits 1, as documented.
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert "ComputeFence" in result.stdout and "Traceback" not in result.stderr


def test_the_python_example_runs_and_prints_what_the_page_says(pasted):
    example = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "python.md").read_text(), re.M | re.S)[0]
    result = pasted(f"python3 - <<'EOF'\n{example}EOF\n")
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr[-3000:]
    assert lines[0] == "block" and "pod-cpu-torch ok gpu.torch-cpu-build" in lines
    assert "pod-unreachable unreachable" in lines


def test_the_launch_recipe_starts_nothing_without_a_ready_pod_and_reaches_ready_pods_by_name(pasted):
    """docs/operations.md's first recipe against the simulated pods, listed in an inventory
    (through which none is ready: the demo's volumes come from its provider). The job's own
    command is swapped for an echo, the rest is run as written."""
    from computefence.demo.fleet import demo_fleet
    from computefence.sources.export import export_yaml

    (recipe,) = [b for b in sh_blocks(ROOT / "docs" / "operations.md") if "--healthy-out ready.yaml" in b]
    job = "cd /workspace && nohup ./train.sh >train.log 2>&1 </dev/null &"
    assert job in recipe
    work = Path(pasted("pwd").stdout.strip())
    with demo_fleet() as fleet:
        (work / "pool.yaml").write_text(export_yaml(fleet.targets, written_by="test"))
        nothing_ready = pasted(recipe.replace(job, "echo started"))
        assert nothing_ready.returncode == 0, nothing_ready.stderr[-3000:]
        assert (work / "ready.yaml").read_text() == "" and not (work / "ready.ssh_config").exists()
        assert "started" not in nothing_ready.stdout

        # What --healthy-out writes for a ready pod (the same emitter), then the rest as written.
        healthy = [t for t in fleet.targets if t.name == "pod-healthy"]
        (work / "ready.yaml").write_text(export_yaml(healthy, written_by="computefence fleet check --healthy-out"))
        started = pasted(recipe[recipe.index("if [ -s ready.yaml ]") :].replace(job, "echo started"))
    assert started.returncode == 0, started.stderr[-3000:]
    assert started.stdout == "started\n"


@pytest.mark.network
def test_the_quick_start_runs_in_a_fresh_venv(tmp_path):
    """The README's first block, as a new user pastes it, in a copy of the checkout."""
    (first, *_) = sh_blocks(ROOT / "README.md")
    assert "pip install ." in first and "pip install computefence" not in first
    checkout = tmp_path / "computefence"
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        HOME=str(tmp_path), TMPDIR=str(tmp_path), COLUMNS="100", PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin"
    )

    result = subprocess.run(["bash", "-c", first], cwd=checkout, env=env, capture_output=True, text=True, timeout=900)

    out = result.stdout
    assert "ComputeFence fleet check · 6 pods" in out, result.stderr[-3000:]
    assert "BLOCKED  4 of 6 pods blocked" in out
    assert "ComputeFence fix · plan · 6 pods" in out and "--apply runs the steps" in out
    assert "ComputeFence fleet watch · 7 pods" in out and "FAILING  2 of 7 pods" in out
    assert "Traceback" not in result.stderr
