"""The known-hosts store: where keys are trusted from, and how first-contact keys are recorded."""

from __future__ import annotations

import os

import asyncssh
import pytest

from computefence.connectors.known_hosts import HostKeyStore, known_hosts_line, own_known_hosts_path
from computefence.errors import ConfigError


@pytest.fixture(scope="module")
def keys():
    return [asyncssh.generate_private_key("ssh-ed25519") for _ in range(2)]


def test_own_file_follows_xdg_config_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert own_known_hosts_path() == tmp_path / "xdg" / "computefence" / "known_hosts"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert own_known_hosts_path() == tmp_path / "home" / ".config" / "computefence" / "known_hosts"


def test_lookup_matches_port_and_names_the_files(tmp_path, keys):
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text(known_hosts_line("10.0.0.5", 2222, keys[0]))
    second.write_text(known_hosts_line("10.0.0.5", 22, keys[1]))
    store = HostKeyStore([first, tmp_path / "missing"], None)

    on_2222 = store.lookup("10.0.0.5", "10.0.0.5", 2222, extra_files=[str(second)])
    assert on_2222.known and on_2222.files == [str(first)]
    assert [k.get_fingerprint() for k in on_2222.trusted] == [keys[0].get_fingerprint()]
    # Port 22 entries are plain host names; the [host]:2222 entry does not apply there.
    on_22 = store.lookup("10.0.0.5", "10.0.0.5", 22, extra_files=[str(second)])
    assert on_22.files == [str(second)]
    assert not store.lookup("10.0.0.6", "10.0.0.6", 2222).known


def test_unparsable_lines_are_skipped_not_fatal(tmp_path, keys):
    path = tmp_path / "known_hosts"
    path.write_text(
        "garbage-without-a-key\n@bogus-marker host ssh-ed25519 AAAA\n# comment\n\n"
        + known_hosts_line("pod", 22, keys[0])
    )
    assert HostKeyStore([path]).lookup("pod", "", 22).known


def test_record_appends_once_with_private_permissions(tmp_path, keys):
    own = tmp_path / "cfg" / "computefence" / "known_hosts"
    store = HostKeyStore([], own)
    assert not store.lookup("127.0.0.1", "127.0.0.1", 40022).known

    store.record("127.0.0.1", 40022, keys[0])
    store.record("127.0.0.1", 40022, keys[0])

    assert own.read_text() == known_hosts_line("127.0.0.1", 40022, keys[0])
    assert own.read_text().startswith("[127.0.0.1]:40022 ssh-ed25519 ")
    assert own.stat().st_mode & 0o777 == 0o600 and own.parent.stat().st_mode & 0o777 == 0o700
    assert store.lookup("127.0.0.1", "127.0.0.1", 40022).files == [str(own)]


def test_unwritable_own_file_is_a_one_line_error(tmp_path, keys):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    store = HostKeyStore([], blocker / "known_hosts")
    with pytest.raises(ConfigError, match="cannot record the host key of pod"):
        store.record("pod", 22, keys[0])


def test_off_port_22_a_bare_host_entry_does_not_apply(tmp_path, keys):
    # One address, many pods on their own ports (Vast.ai): the port-22 key says nothing about them.
    path = tmp_path / "known_hosts"
    path.write_text(known_hosts_line("203.0.113.7", 22, keys[0]))
    store = HostKeyStore([path])
    assert store.lookup("203.0.113.7", "203.0.113.7", 22).known
    assert not store.lookup("203.0.113.7", "203.0.113.7", 40022).known


def test_address_entry_matches_a_named_host(tmp_path, keys):
    path = tmp_path / "known_hosts"
    path.write_text(known_hosts_line("198.51.100.3", 2222, keys[0]))
    store = HostKeyStore([path])
    assert store.lookup("pod.example", "198.51.100.3", 2222).known


def test_unreadable_file_is_a_config_error_before_connecting(tmp_path):
    store = HostKeyStore([tmp_path / "missing-is-fine"])
    store.preload()
    (tmp_path / "not-a-file").mkdir()
    with pytest.raises(ConfigError, match=r"not-a-file: is a directory; the known-hosts file must be a regular file"):
        store.preload([str(tmp_path / "not-a-file")])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"fifo: not a regular file"):  # refused without blocking
        store.preload([str(fifo)])


def test_only_a_missing_file_counts_as_no_entries(tmp_path):
    """A known-hosts file that exists but cannot be read (a symlink loop) must stop the run,
    not be taken for an empty file: its @revoked lines would silently stop applying."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    store = HostKeyStore([tmp_path / "missing-is-fine"])
    with pytest.raises(ConfigError, match=r"loop: cannot read known-hosts file"):
        store.preload([str(loop)])
