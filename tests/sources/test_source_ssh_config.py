"""Targets from ssh_config through the built-in parser (the fallback without an ssh binary):
aliases, Host patterns, first-value-wins, Include, Match, tokens. `ssh -G` itself: test_ssh_g.py."""

from __future__ import annotations

import functools
import getpass
import shutil
import subprocess
from pathlib import Path

import pytest

from computefence.errors import ConfigError
from computefence.sources.ssh_config import SshConfigSource

Parsed = functools.partial(SshConfigSource, use_ssh=False)

CONFIG = """\
# pods
Include conf.d/*.conf

Host bastion
    HostName 198.51.100.1
    User jump

Host pod-a pod-b
    HostName %h.pods.example
    Port 2222

Host pod-b
    Port 3333
    User alice

Match originalhost pod-a
    IdentityFile ~/.ssh/match_key

Host pod-* !pod-z
    User root
    ProxyJump bastion
    IdentityFile ~/.ssh/id_%h_%r_%p

Host *
    IdentityFile ~/.ssh/id_ed25519
    UserKnownHostsFile ~/.ssh/known_pods
"""

INCLUDED = """\
Host gpu-1
  HostName=10.0.0.1
Host gpu-2
  HostName 10.0.0.2
  Port 7000
"""


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    ssh = tmp_path / ".ssh"
    (ssh / "conf.d").mkdir(parents=True)
    (ssh / "config").write_text(CONFIG)
    (ssh / "conf.d/gpu.conf").write_text(INCLUDED)
    return tmp_path


def by_name(source: SshConfigSource) -> dict:
    return {t.name: t for t in source.targets()}


def test_first_value_wins_and_tokens(home):
    ssh = home / ".ssh"
    targets = by_name(Parsed(["pod-a", "pod-b"]))
    a, b = targets["pod-a"], targets["pod-b"]
    assert (a.host, a.port, a.user, a.proxy_jump) == ("pod-a.pods.example", 2222, "root", "bastion")
    # Match originalhost applies to pod-a only; %h/%r/%p use the final values
    assert a.identity_files == [
        str(ssh / "match_key"),
        str(ssh / "id_pod-a.pods.example_root_2222"),
        str(ssh / "id_ed25519"),
    ]
    # Port 2222 was obtained first; User alice comes before pod-*'s root
    assert (b.host, b.port, b.user) == ("pod-b.pods.example", 2222, "alice")
    assert b.identity_files[0] == str(ssh / "id_pod-b.pods.example_alice_2222")
    assert a.known_hosts == [str(ssh / "known_pods")]
    assert a.source == f"{ssh / 'config'}:8" and a.ssh_config == str(ssh / "config")


def test_negated_pattern_and_unlisted_alias(home):
    z = by_name(Parsed(["pod-z", "203.0.113.7"]))
    assert z["pod-z"].user is None and z["pod-z"].proxy_jump is None  # `!pod-z` excludes it from pod-*
    assert z["pod-z"].host == "pod-z"
    other = z["203.0.113.7"]
    assert (other.host, other.port) == ("203.0.113.7", 22)
    assert other.identity_files == [str(home / ".ssh/id_ed25519")]


def test_include_is_relative_to_dot_ssh(home):
    targets = by_name(Parsed(["gpu-*"]))
    assert list(targets) == ["gpu-1", "gpu-2"]
    assert (targets["gpu-2"].host, targets["gpu-2"].port) == ("10.0.0.2", 7000)
    assert targets["gpu-1"].source == f"{home / '.ssh/conf.d/gpu.conf'}:1"


def test_pattern_selects_concrete_host_entries(home):
    assert list(by_name(Parsed(["pod-?"]))) == ["pod-a", "pod-b"]
    with pytest.raises(
        ConfigError, match=r"-H 'train-\*': no Host entry .* \(Host entries: gpu-1, gpu-2, bastion, pod-a, pod-b\)"
    ):
        Parsed(["train-*"]).targets()


def test_user_at_alias_overrides_the_config(home):
    (target,) = Parsed(["bob@bastion"]).targets()
    assert (target.name, target.user, target.host) == ("bastion", "bob", "198.51.100.1")


def test_config_file_alone_means_all_its_host_entries(tmp_path):
    config = tmp_path / "exported"
    config.write_text("Host x\n  HostName 10.9.9.9\nHost y z\n  Port 2200\nHost *\n  User u\n")
    targets = by_name(Parsed(config=str(config)))
    assert list(targets) == ["x", "y", "z"]
    assert (targets["x"].host, targets["z"].port, targets["y"].user) == ("10.9.9.9", 2200, "u")


def test_match_exec_is_never_run(home, tmp_path):
    marker = tmp_path / "ran"
    (home / ".ssh/config").write_text(f'Match exec "touch {marker}"\n  User evil\nHost *\n  User good\n')
    (target,) = Parsed(["anything"]).targets()
    assert target.user == "good"
    assert not marker.exists()


def test_match_all_and_user(home):
    (home / ".ssh/config").write_text(
        "Host h\n  User deploy\nMatch user deploy\n  Port 2022\nMatch !user deploy all\n  Port 9\nMatch all\n  ProxyJump j\n"
    )
    (target,) = Parsed(["h"]).targets()
    assert (target.user, target.port, target.proxy_jump) == ("deploy", 2022, "j")


@pytest.mark.parametrize(
    "config,line,words",
    [
        ("Host a\n  Port nope\n", 2, ["bad Port value 'nope'"]),
        ("Host a\n  Port 70000\n", 2, ["bad Port value '70000'"]),
        ("Host a\n  IdentityFile ~/.ssh/%Q\n", 2, ["unsupported token %Q"]),
        ('Host a\n  HostName "unterminated\n', 2, ["No closing quotation"]),
        ("Host a\n  User\n", 2, ["missing value for user"]),
    ],
)
def test_errors_name_file_and_line(tmp_path, config, line, words):
    path = tmp_path / "cfg"
    path.write_text(config)
    with pytest.raises(ConfigError) as info:
        Parsed(["a"], str(path)).targets()
    assert str(info.value).startswith(f"{path}:{line}: ")
    for word in words:
        assert word in str(info.value)


def test_missing_files(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="no such ssh config file"):
        Parsed(["a"], str(tmp_path / "nope")).targets()
    # Without ~/.ssh/config an alias is reached as ssh would: by its name
    monkeypatch.setenv("HOME", str(tmp_path))
    (target,) = Parsed(["10.1.2.3"]).targets()
    assert (target.host, target.port, target.user) == ("10.1.2.3", 22, None)


def test_empty_config_alone_is_an_error(tmp_path):
    path = tmp_path / "cfg"
    path.write_text("Host *\n  User root\n")
    with pytest.raises(ConfigError, match="no Host entries without wildcards"):
        Parsed(config=str(path)).targets()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client for `ssh -G`")
def test_agrees_with_openssh(home):
    """`ssh -G` prints what OpenSSH resolves for an alias without connecting."""
    config = home / ".ssh/config"
    # ssh finds Include files relative to the real home directory, not $HOME: make it absolute.
    config.write_text(CONFIG.replace("Include conf.d/", f"Include {home}/.ssh/conf.d/"))
    aliases = ["pod-a", "pod-b", "pod-z", "bastion", "gpu-1", "gpu-2", "unlisted"]
    ours = by_name(Parsed(aliases, str(config)))
    for alias in aliases:
        out = subprocess.run(["ssh", "-G", "-F", str(config), alias], capture_output=True, text=True, check=True).stdout
        theirs: dict[str, str] = {}
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            theirs.setdefault(key, value)
        target = ours[alias]
        assert target.host == theirs["hostname"], alias
        assert str(target.port) == theirs["port"], alias
        assert (target.user or getpass.getuser()) == theirs["user"], alias
        assert (target.proxy_jump or None) == theirs.get("proxyjump"), alias
