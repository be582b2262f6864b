"""ssh_config through `ssh -G`: the user's own OpenSSH decides every alias."""

from __future__ import annotations

import getpass

import pytest

import computefence.sources.ssh_config as ssh_config
from computefence.errors import ConfigError
from computefence.sources import TargetSelection, collect_targets
from computefence.sources.ssh_config import RESOLVER_PARSER, RESOLVER_SSH, SshConfigSource, ssh_available

pytestmark = pytest.mark.skipif(not ssh_available(), reason="needs the OpenSSH client for `ssh -G`")


def test_match_exec_runs_as_ssh_runs_it(tmp_path):
    marker = tmp_path / "ran"
    config = tmp_path / "cfg"
    config.write_text(f'Match exec "touch {marker}"\n  User fromexec\nHost *\n  User other\n')
    (target,) = SshConfigSource(["box"], str(config)).targets()
    assert target.user == "fromexec" and marker.exists()


def test_proxy_command_and_first_proxy_wins(tmp_path):
    config = tmp_path / "cfg"
    config.write_text(
        "Host gpu\n  HostName GPU.Example\n  ProxyCommand ssh -W %h:%p bastion\nHost *\n  ProxyJump fallback\n"
    )
    gpu, other = SshConfigSource(["gpu", "other"], str(config)).targets()
    assert (gpu.host, gpu.proxy_command, gpu.proxy_jump) == ("gpu.example", "ssh -W %h:%p bastion", None)
    assert (other.proxy_jump, other.proxy_command) == ("fallback", None)


def test_each_alias_is_resolved_once_per_run(tmp_path, monkeypatch):
    calls = []
    real = ssh_config.ssh_g

    def counting(alias, **kwargs):
        calls.append(alias)
        return real(alias, **kwargs)

    monkeypatch.setattr(ssh_config, "ssh_g", counting)
    config = tmp_path / "cfg"
    config.write_text("Host a b\n  Port 2200\n")
    source = SshConfigSource(["a", "b", "a"], str(config))
    assert [t.name for t in source.targets()] == ["a", "b"]
    source.targets()
    assert sorted(calls) == ["a", "b"]


def test_a_hanging_match_exec_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setattr(ssh_config, "SSH_G_TIMEOUT_S", 0.5)
    config = tmp_path / "cfg"
    config.write_text('Match exec "sleep 5"\n  User x\n')
    with pytest.raises(ConfigError, match=r"^ssh -G box: no answer within 0.5 s"):
        SshConfigSource(["box"], str(config)).targets()


def test_ssh_rejects_a_bad_line_naming_file_and_line(tmp_path):
    config = tmp_path / "cfg"
    config.write_text("Host a\n  NoSuchOption yes\n")
    with pytest.raises(ConfigError, match=rf"^{config}:2: .*\(ssh -G a\)$"):
        SshConfigSource(["a"], str(config)).targets()


def test_status_names_the_resolver(tmp_path, monkeypatch):
    config = tmp_path / "cfg"
    config.write_text("Host a\n  User u\n")
    _, statuses = collect_targets(TargetSelection(ssh_config=str(config)))
    assert statuses[0].resolver == RESOLVER_SSH
    # Without an ssh binary on PATH the parser takes over, and says so
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    targets, statuses = collect_targets(TargetSelection(ssh_config=str(config)))
    assert statuses[0].resolver == RESOLVER_PARSER and targets[0].user == "u"


def test_identity_tokens_are_expanded_as_ssh_would(tmp_path):
    config = tmp_path / "cfg"
    config.write_text("Host a\n  HostName A.example\n  Port ssh\n  IdentityFile /keys/%h-%p-%r\n  IdentityFile none\n")
    (target,) = SshConfigSource(["a"], str(config)).targets()
    user = getpass.getuser()
    assert (target.host, target.port) == ("a.example", 22)
    assert target.identity_files == [f"/keys/a.example-22-{user}"]


@pytest.mark.parametrize("use_ssh", [True, False])
def test_options_that_cannot_be_honoured_are_warnings_naming_host_and_option(tmp_path, use_ssh):
    config = tmp_path / "cfg"
    config.write_text(
        "Host a b\n  HostKeyAlias shared\nHost c\n  ProxyCommand nc %h %p\n  ProxyUseFdpass yes\n"
        "Host *\n  AddressFamily any\n"
    )
    source = SshConfigSource(["a", "b", "c", "d"], str(config), use_ssh=use_ssh)
    source.targets()
    assert source.warnings == [
        f"{config}: host a, b: hostkeyalias shared cannot be honoured; ComputeFence connects without it",
        f"{config}: host c: proxyusefdpass yes cannot be honoured; ComputeFence connects without it",
    ]


def test_a_match_exec_that_floods_is_stopped_at_the_cap_with_one_line(tmp_path, monkeypatch):
    # ssh sends a Match exec command's stdout to /dev/null, its stderr to ours.
    monkeypatch.setattr(ssh_config, "SSH_G_MAX_BYTES", 100_000)
    config = tmp_path / "cfg"
    config.write_text('Match exec "yes flood >&2"\n  User x\n')
    with pytest.raises(ConfigError, match=r"^ssh -G box: printed over 100,000 bytes; no ssh answers so much$"):
        SshConfigSource(["box"], str(config)).targets()
