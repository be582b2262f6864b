"""Every command in the README and docs/ works as written.

Each `computefence ...` line of a ```sh block is parsed by the real CLI, options and values
checked (a flag renamed or removed, a choice misspelt, fails here); the quick start runs for
real, in a fresh virtual environment made from a copy of this checkout."""

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
