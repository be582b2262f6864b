"""--output and every other file ComputeFence writes: only regular files are replaced,
devices, FIFOs and `-` are streamed to, nothing else is touched."""

import os
import stat
import subprocess
import sys
import threading
import time

import pytest

from computefence.cli import main
from computefence.errors import ConfigError
from computefence.files import write_output
from computefence.models import Report, Summary


def test_replaces_the_file_atomically(tmp_path):
    target = tmp_path / "metrics.prom"
    target.write_text("old\n")
    before = target.stat().st_ino
    write_output("new ✓\n", target)
    assert target.read_text(encoding="utf-8") == "new ✓\n"
    assert target.stat().st_ino != before  # a new file renamed over the old one
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.prom"]


def test_a_new_file_is_readable_by_others_not_mkstemps_0600(tmp_path):
    target = tmp_path / "metrics.prom"
    write_output("x", target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()


def test_an_existing_files_mode_is_kept(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    target.chmod(0o640)
    write_output("new", target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_an_existing_files_owner_is_kept(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    os.chown(target, 65534, 65534)
    write_output("new", target)
    assert (target.stat().st_uid, target.stat().st_gid) == (65534, 65534)
    assert target.read_text() == "new"


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(ConfigError, match="No space left on device"):
        write_output("new", target)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_bad_targets_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        write_output("x", tmp_path / "missing" / "r.json")
    with pytest.raises(ConfigError, match="is a directory"):
        write_output("x", tmp_path)


def test_the_flag_named_in_errors_is_the_callers(tmp_path):
    with pytest.raises(ConfigError, match="^--healthy-out .* is a directory"):
        write_output("x", tmp_path, flag="--healthy-out")


def test_lone_surrogates_do_not_crash_the_write(tmp_path):
    target = tmp_path / "r.txt"
    write_output("a\udcffb", target)
    assert target.read_bytes() == b"a?b"


def test_dev_null_stays_a_device():
    write_output("report\n", "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_full_device_is_one_error_and_stays_a_device():
    with pytest.raises(ConfigError, match="No space left on device"):
        write_output("report\n", "/dev/full")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_fifo_is_streamed_to_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "reports"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_output("line 1\nline 2\n", fifo)
    reader.join(timeout=10)
    assert received == [b"line 1\nline 2\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["reports"]


def test_dash_is_stdout(capfd):
    write_output("to stdout ✓\n", "-")
    assert capfd.readouterr().out == "to stdout ✓\n"


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write_output("new", link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


def test_a_dangling_symlink_is_refused(tmp_path):
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(ConfigError, match="symlink to a missing file"):
        write_output("new", link)
    assert not (tmp_path / "nowhere.json").exists()


def test_a_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with pytest.raises(ConfigError, match="not a regular file, character device or FIFO"):
            write_output("x", path)
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        server.close()


def test_the_temporary_of_a_killed_write_is_removed_by_the_next(tmp_path):
    target = tmp_path / "report.json"
    # A writer that hangs after creating its temporary, then is killed with -9.
    code = (
        "import os, sys, time\n"
        "from computefence import files\n"
        "os.fsync = lambda fd: time.sleep(600)\n"
        f"files.write_output('half', {str(target)!r})\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        deadline = time.monotonic() + 30
        while not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]:
            assert time.monotonic() < deadline, "the writer never created its temporary"
            time.sleep(0.05)
    finally:
        writer.kill()
        writer.wait()
    assert len(list(tmp_path.iterdir())) == 1
    write_output("whole", target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    assert target.read_text() == "whole"


def test_a_live_writers_temporary_is_left_alone(tmp_path):
    live = tmp_path / f".report.json.{os.getppid()}.abc123.tmp"
    live.write_text("in progress")
    write_output("x", tmp_path / "report.json")
    assert live.exists()


def test_report_output_to_dev_null_exits_0(tmp_path, capsys):
    saved = tmp_path / "run.json"
    saved.write_text(
        Report(
            tool_version="0.1.0", kind="doctor", generated_at="2025-06-01T12:00:00+00:00", hosts=[], summary=Summary()
        ).model_dump_json()
    )
    assert main(["report", str(saved), "-f", "json", "-o", "/dev/null"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert main(["report", str(saved), "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_pieces_are_written_in_order_to_a_file_and_a_fifo(tmp_path):
    target = tmp_path / "report.json"
    write_output(iter(["{", '"a": 1', "}\n"]), target)
    assert target.read_text() == '{"a": 1}\n'
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    write_output(iter(["one ", "two\n"]), fifo)
    reader.join(10)
    assert received == ["one two\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_piece_that_fails_to_render_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("good\n")

    def pieces():
        yield "half of a new report"
        raise RuntimeError("rendering failed")

    with pytest.raises(RuntimeError):
        write_output(pieces(), target)
    assert target.read_text() == "good\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


@pytest.mark.parametrize("where", ["missing-folder", "folder"])
def test_an_output_that_can_never_be_written_is_refused_before_any_pod_is_probed(where, tmp_path, capsys):
    from computefence.cli import main

    target = tmp_path / "no-such-dir" / "r.json" if where == "missing-folder" else tmp_path
    code = main(["fleet", "check", "--demo", "--format", "json", "--output", str(target)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    # One line and no progress line: nothing was probed.
    expected = (
        f"--output {target}: directory {target.parent} does not exist"
        if where == "missing-folder"
        else f"--output {target} is a directory"
    )
    assert err == f"computefence: error: {expected}\n"
