"""Every line on stderr is free of terminal control sequences, whoever wrote the text in it:
a pod's connection error in a progress line, a provider's pod name, an inventory author's
value quoted in an error. ESC, CR, BEL and bidi overrides show as '?'."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from computefence.cli import main

DEMO = Path(__file__).resolve().parents[2] / "computefence/demo/recordings/fleet"
TITLE = "\x1b]0;owned\x07"  # retitles the terminal
WIPE = "\x1b[2J\x1b[1;1H"  # clears it
HIDDEN = "\r\x1b[Kchecked"  # overwrites the line it is on
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def test_a_pods_reason_in_a_progress_line_cannot_drive_the_terminal(tmp_path, capsys):
    folder = tmp_path / "replay"
    shutil.copytree(DEMO, folder)
    recording = json.loads((folder / "6-pod-unreachable.json").read_text())
    recording["reason"] = f"connection refused{TITLE}{WIPE}{HIDDEN}\u202egnp.exe"
    (folder / "6-pod-unreachable.json").write_text(json.dumps(recording))
    code = main(["fleet", "check", "--replay", str(folder), "--format", "json"])
    _, err = capsys.readouterr()
    assert code == 1
    (line,) = [line for line in err.splitlines() if "pod-unreachable:" in line]
    assert not CONTROL.search(err), repr(line)
    assert line.endswith("connection refused?]0;owned??[2J?[1;1H??[Kchecked?gnp.exe")


def test_an_inventory_value_quoted_in_an_error_cannot_drive_the_terminal(tmp_path, capsys):
    policy = tmp_path / "computefence.yaml"
    policy.write_text(f'"bad{TITLE}{WIPE}": 1\n')
    code = main(["fleet", "check", "--replay", str(DEMO), "--policy", str(policy)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert not CONTROL.search(err), repr(err)


def test_provider_strings_in_inventory_list_cannot_drive_the_terminal_from_stdout(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))
    from fake_api import FakeProviderApi, vast_instance

    monkeypatch.setenv("HOME", str(tmp_path))
    with FakeProviderApi() as api:
        monkeypatch.setenv("VAST_URL", api.base_url("vast"))
        monkeypatch.setenv("VAST_API_KEY", api.keys["vast"])
        running = vast_instance(4242, f"pod{TITLE}", gpu=f"RTX 4090{WIPE}")
        stopped = vast_instance(4243, "idle", status=f"exited{HIDDEN}")
        api.vast_instances = [running, stopped]
        code = main(["inventory", "list", "--provider", "vast"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert not CONTROL.search(out), repr(out)
    assert "pod?]0;owned?" in out and "instance is exited??[Kchecked" in out
