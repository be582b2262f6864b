import os
import stat

import pytest

from computefence.errors import ConfigError
from computefence.render import write_output


def test_replaces_the_file_atomically(tmp_path):
    target = tmp_path / "metrics.prom"
    target.write_text("old\n")
    before = target.stat().st_ino
    write_output("new ✓\n", target)
    assert target.read_text(encoding="utf-8") == "new ✓\n"
    assert target.stat().st_ino != before  # a new file renamed over the old one
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.prom"]
    # readable by others (node_exporter's user), not mkstemp's 0600
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()


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


def test_lone_surrogates_do_not_crash_the_write(tmp_path):
    target = tmp_path / "r.txt"
    write_output("a\udcffb", target)
    assert target.read_bytes() == b"a?b"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
