"""An inventory author (or a careless user) hands over a file built to hang, exhaust memory or
crash the reader: every reader answers with one line and exit 2, quickly."""

from __future__ import annotations

import os
import threading

import pytest

from computefence import files, saved_files
from computefence.cli import main

# Each reader, the flag that reaches it, and the file name it expects.
READERS = [
    (["inventory", "list", "-i"], "pods.yaml"),
    (["inventory", "list", "--ansible-inventory"], "hosts.yml"),
    (["inventory", "list", "--ansible-inventory"], "hosts.ini"),
    (["inventory", "list", "--ssh-config"], "ssh_config"),
    (["report"], "run.json"),
]

ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9)
)


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, err


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("computefence: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("argv,name", READERS, ids=[r[1] for r in READERS])
def test_a_fifo_is_refused_without_blocking(tmp_path, capsys, argv, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    finished = threading.Event()
    result = {}

    def read() -> None:
        result["out"] = run(capsys, *argv, str(fifo))
        finished.set()

    threading.Thread(target=read, daemon=True).start()
    if not finished.wait(20):
        with open(fifo, "wb"):  # unblock the reader so the test process can end
            pass
        pytest.fail("the reader blocked on a FIFO")
    err = one_line_error(*result["out"])
    assert "not a regular file" in err


@pytest.mark.parametrize("argv,name", READERS[:4], ids=[r[1] for r in READERS[:4]])
def test_a_device_is_refused_unread(capsys, argv, name):
    err = one_line_error(*run(capsys, *argv, "/dev/zero"))
    assert "not a regular file" in err


@pytest.mark.parametrize("argv,name", READERS, ids=[r[1] for r in READERS])
def test_a_file_over_the_cap_is_refused(tmp_path, capsys, monkeypatch, argv, name):
    monkeypatch.setattr(files, "MAX_CONFIG_BYTES", 4096)
    monkeypatch.setattr(saved_files, "MAX_REPORT_BYTES", 4096)
    big = tmp_path / name
    big.write_text("# padding\n" * 1000)
    err = one_line_error(*run(capsys, *argv, str(big)))
    assert "is over 4096 bytes" in err


def test_the_config_cap_is_16_mib():
    assert files.MAX_CONFIG_BYTES == 16 * 2**20


# A million hosts in each inventory format: (first lines, one host's line).
MILLION_HOSTS = {
    "pods.yaml": ("hosts:\n", "  - {host: 10.0.0.1}\n"),
    "hosts.yml": ("all:\n  hosts:\n", "    h: {ansible_host: 10.0.0.1}\n"),
    "hosts.ini": ("[pods]\n", "h ansible_host=10.0.0.1 ansible_port=22022\n"),
}


@pytest.mark.parametrize("argv,name", READERS[:3], ids=[r[1] for r in READERS[:3]])
def test_an_inventory_of_a_million_hosts_is_refused_at_the_cap(tmp_path, capsys, argv, name):
    head, line = MILLION_HOSTS[name]
    path = tmp_path / name
    path.write_text(head + line * 1_000_000)
    assert path.stat().st_size > files.MAX_CONFIG_BYTES
    err = one_line_error(*run(capsys, *argv, str(path)))
    assert f"{path}: " in err and "is over 16 MiB; refusing to read it" in err


@pytest.mark.parametrize("argv,name", READERS[:2], ids=[r[1] for r in READERS[:2]])
def test_a_yaml_alias_bomb_is_refused(tmp_path, capsys, argv, name):
    path = tmp_path / name
    path.write_text(ALIAS_BOMB + ("hosts: [{host: x}]\n" if name == "pods.yaml" else "all: {hosts: {x: }}\n"))
    err = one_line_error(*run(capsys, *argv, str(path)))
    assert ":7: expands to more than 4,000,000 values" in err


@pytest.mark.parametrize("argv,name", READERS[:2], ids=[r[1] for r in READERS[:2]])
def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path, capsys, argv, name):
    path = tmp_path / name
    path.write_text("[" * 50000 + "]" * 50000)
    err = one_line_error(*run(capsys, *argv, str(path)))
    assert ":1: nested more than 100 levels deep" in err


def test_a_self_referencing_alias_is_refused(tmp_path, capsys):
    path = tmp_path / "pods.yaml"
    path.write_text("hosts: &h [{host: x, tags: *h}]\n")
    err = one_line_error(*run(capsys, "inventory", "list", "-i", str(path)))
    assert "an alias refers to a value that contains it" in err


def test_deep_json_in_a_report_is_one_line(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text('{"hosts": ' + "[" * 50000 + "]" * 50000 + "}")
    err = one_line_error(*run(capsys, "report", str(path)))
    assert "is not a computefence JSON report" in err


def test_ordinary_aliases_still_work(tmp_path, capsys):
    path = tmp_path / "pods.yaml"
    path.write_text("hosts:\n  - &a {name: a, host: 10.0.0.1, tags: [x]}\n  - {<<: *a, name: b}\n")
    code, _ = run(capsys, "inventory", "list", "-i", str(path), "--format", "json")
    assert code == 0


@pytest.mark.parametrize("name", ["hosts.ini", "hosts.yml"])
def test_an_ansible_range_of_millions_is_refused_at_once(tmp_path, capsys, name):
    path = tmp_path / name
    path.write_text("[pods]\nh[1:100000000]\n" if name.endswith(".ini") else "pods:\n  hosts:\n    h[1:100000000]:\n")
    err = one_line_error(*run(capsys, "inventory", "list", "--ansible-inventory", str(path)))
    assert (
        f"{name}:2: host pattern 'h[1:100000000]' expands to more than 100,000 hosts" in err
        or f"{name}:3: host pattern 'h[1:100000000]' expands to more than 100,000 hosts" in err
    )


def test_nested_ranges_count_as_their_product(tmp_path, capsys):
    path = tmp_path / "hosts.ini"
    path.write_text("[pods]\nr[1:1000]-n[1:1000]\n")
    err = one_line_error(*run(capsys, "inventory", "list", "--ansible-inventory", str(path)))
    assert "expands to more than 100,000 hosts" in err


def test_a_zero_step_range_is_an_error_not_a_traceback():
    from computefence.errors import ConfigError
    from computefence.sources.ansible import expand_host_pattern

    with pytest.raises(ConfigError, match=r"^hosts.ini:2: bad host range \[1:9:0\] in 'h\[1:9:0\]': the step is 0$"):
        expand_host_pattern("h[1:9:0]", "hosts.ini:2")


def test_a_huge_value_is_echoed_cut_to_200_characters(tmp_path, capsys):
    path = tmp_path / "pods.yaml"
    path.write_text("hosts:\n  - {host: a, port: '" + "9" * 1_000_000 + "'}\n")
    err = one_line_error(*run(capsys, "inventory", "list", "-i", str(path)))
    assert len(err) < 600 and "more)" in err
