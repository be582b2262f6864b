"""Every command's --help at 60, 80 and 120 columns: the renderer wraps the text (no line
broken by hand where the next word would have fit), no word is split across lines, and no
flag shows a `<bool>` it does not take.

At 60 columns the options table cannot hold `--ansible-vault-password-file` (29 characters)
beside a type and a help column: typer's table folds its longest option names there, so at
60 only the description is held to whole words."""

from __future__ import annotations

import itertools
import re

import pytest
import typer

from computefence.cli import app, main

WIDTHS = (60, 80, 120)
_BOX = str.maketrans(dict.fromkeys("│╭╮╰╯─*", " "))
_WORD = re.compile(r"[A-Za-z]{3,}")


def _command_paths(command, path=()):
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


def _vocabulary(command, words: set[str]) -> set[str]:
    texts = [command.help or "", command.short_help or "", *_param_texts(command)]
    texts += list(getattr(command, "commands", {}))  # subcommand names
    for text in texts:
        words.update(_WORD.findall(text))
    for sub in getattr(command, "commands", {}).values():
        _vocabulary(sub, words)
    return words


def _param_texts(command):
    for param in command.params:
        yield " ".join(param.opts + param.secondary_opts)
        yield str(getattr(param, "help", "") or "")
        yield str(param.metavar or "")
        yield str(getattr(param, "envvar", "") or "")
        yield str(param.default) if param.default is not None else ""
        yield str(getattr(param, "rich_help_panel", "") or "")


ROOT = typer.main.get_command(app)
PATHS = list(_command_paths(ROOT))
# Words the help may show: those in the help texts, option names and defaults, and typer's own.
VOCABULARY = _vocabulary(
    ROOT,
    set(
        _WORD.findall(
            "Usage OPTIONS COMMAND ARGS Options Commands Arguments help Show this message and exit default required "
            "env var str int float path Path range"
        )
    ),
)


def _help(capsys, monkeypatch, path, width: int) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    main([*path, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "computefence")
def test_help_reads_at_this_width(capsys, monkeypatch, path, width):
    text = _help(capsys, monkeypatch, path, width)

    assert "<bool>" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    description = text.split("╭", 1)[0].splitlines()
    checked = text if width >= 80 else "\n".join(description)
    split = sorted({w for w in _WORD.findall(checked.translate(_BOX)) if w not in VOCABULARY})
    assert split == [], f"words split across lines at {width} columns: {split}\n{text}"
    # The description, above the first panel: a line ended where its paragraph's next word fitted.
    for line, following in itertools.pairwise(description):
        if line.strip() and following.strip() and not line.strip().startswith("Usage:"):
            next_word = following.split()[0]
            assert len(line.rstrip()) + 1 + len(next_word) > width - 2, f"broken by hand:\n{line}\n{following}"


def test_the_probe_example_in_help_fits_one_line_and_runs_as_pasted(capsys, monkeypatch):
    text = _help(capsys, monkeypatch, ("probe",), 80)
    assert "`computefence probe --print | ssh POD python3 -`" in " ".join(text.split())
