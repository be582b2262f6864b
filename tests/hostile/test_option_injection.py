"""An inventory author or a provider API sets a host to `-oProxyCommand=...`: no source lets it
through, and no printed fix lets pod or inventory data become an option of ssh, ssh-keyscan
or ssh-keygen, whatever it holds."""

from __future__ import annotations

import shlex

import pytest

from computefence.cli import main
from computefence.evaluate import status_fix
from computefence.models import HostStatus, ProviderInfo, Target
from computefence.sources import _refuse_option_like

PWN = "-oProxyCommand=touch${IFS}/tmp/PWN"
# Options that take a value, per tool (OpenSSH's getopt strings).
_WITH_VALUE = {
    "ssh": set("BbcDEeFIiJLlmOoPpQRSWw"),
    "ssh-keyscan": set("fOpTt"),
    "ssh-keygen": set("abCDEFfGIJjKMmNnOPrRSsTtVWwYZz"),
}


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "entry,what",
    [
        ({"host": PWN}, "host"),
        ({"host": "10.0.0.1", "user": "-oX=1"}, "user"),
        ({"name": "-x", "host": "10.0.0.1"}, "name"),
        ({"host": "10.0.0.1", "proxy_jump": "root@-oProxyCommand=x"}, "proxy_jump host"),
    ],
)
def test_an_inventory_value_starting_with_a_dash_is_an_error_with_its_line(tmp_path, capsys, entry, what):
    path = tmp_path / "pods.yaml"
    flow = ", ".join(f"{k}: {v!r}".replace("'", '"') for k, v in entry.items())
    path.write_text(f"hosts:\n  - {{name: ok, host: 10.0.0.9}}\n  - {{{flow}}}\n")
    code, err = run(capsys, "inventory", "list", "-i", str(path))
    assert code == 2, err
    assert f"pods.yaml:3: {what} " in err and "starts with '-', which ssh would read as an option" in err
    assert err.count("\n") == 1


def test_an_ansible_host_starting_with_a_dash_is_an_error(tmp_path, capsys):
    path = tmp_path / "hosts.ini"
    path.write_text(f"[pods]\nfine ansible_host=10.0.0.1\n{PWN} ansible_user=root\n")
    code, err = run(capsys, "inventory", "list", "--ansible-inventory", str(path))
    assert code == 2, err
    assert "starts with '-'" in err and err.count("\n") == 1


def test_an_ssh_config_alias_starting_with_a_dash_is_an_error(tmp_path, capsys):
    path = tmp_path / "ssh_config"
    path.write_text("Host fine\n  HostName 10.0.0.1\nHost -oProxyCommand=x\n  HostName 10.0.0.2\n")
    code, err = run(capsys, "inventory", "list", "--ssh-config", str(path))
    assert code == 2, err
    assert "ssh_config:3: Host '-oProxyCommand=x' starts with '-'" in err


def test_a_provider_pod_with_a_dash_address_is_one_uncheckable_pod():
    bad = Target(name="pod-1", host=PWN, provider=ProviderInfo(provider="runpod", pod_id="abc"))
    good = Target(name="pod-2", host="203.0.113.7", provider=ProviderInfo(provider="runpod", pod_id="def"))
    kept = _refuse_option_like([bad, good], "runpod")
    assert [t.name for t in kept] == ["pod-1", "pod-2"]
    assert "starts with '-'" in bad.unreachable_reason
    assert good.unreachable_reason is None


HOSTILE_TARGETS = [
    Target(name="n", host=PWN),
    Target(
        name="n",
        host=PWN,
        port=2222,
        user="-oUser=x",
        identity_files=["-oIdentity"],
        proxy_jump="-oJump",
        ssh_config="-Fconfig",
        known_hosts=["-oKnown"],
    ),
    Target(name="n", host="-h", user=None, port=22, proxy_command="nc %h %p"),
]


@pytest.mark.parametrize("target", HOSTILE_TARGETS, ids=["host", "every-field", "proxy-command"])
@pytest.mark.parametrize("status", [s for s in HostStatus if s is not HostStatus.OK])
def test_no_fix_lets_a_hostile_value_become_an_option(target, status):
    fix = status_fix(target, status, "-oDetail")
    for command in fix.commands if fix else []:
        for words in _simple_commands(command):
            tool = words[0]
            if tool not in _WITH_VALUE:
                continue
            options, operands_after_dashes = _parse(words[1:], _WITH_VALUE[tool])
            for flag, value in options:
                assert flag in _OURS, (command, flag)
                if flag == "-o":
                    assert value in _OUR_OPTIONS or value == f"ProxyCommand={target.proxy_command}", (command, value)
            if tool in ("ssh", "ssh-keyscan"):
                assert operands_after_dashes, f"the destination is not after -- in {command!r}"


# The option words the evaluator writes itself; values from data only ever follow one of them.
_OURS = {"-o", "-v", "-p", "-i", "-J", "-F", "-f", "-R", "-l"}
_OUR_OPTIONS = {"ConnectTimeout=10", "StrictHostKeyChecking=ask"}


def _simple_commands(line: str) -> list[list[str]]:
    """The words of each command of a shell line (split at |, &&, ;, redirections dropped)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands, current = [], []
    skip_next = False
    for token in lexer:
        if skip_next:
            skip_next = False
        elif token in ("|", "&&", ";", "||"):
            commands.append(current)
            current = []
        elif token in (">>", ">", "<"):
            skip_next = True
        else:
            current.append(token)
    commands.append(current)
    return [c for c in commands if c]


def _parse(args: list[str], with_value: set[str]) -> tuple[list[tuple[str, str | None]], bool]:
    """(option word, its value) as getopt reads them, and whether operands start after `--`."""
    options: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return options, True
        if not arg.startswith("-") or arg == "-":
            return options, False
        if arg[1] in with_value:
            value = arg[2:] or (args[i + 1] if i + 1 < len(args) else None)
            i += 1 if arg[2:] else 2
        else:
            value = None
            i += 1
        options.append((arg, value))
    return options, False


def test_export_to_ssh_config_refuses_a_value_with_a_line_break(tmp_path, capsys):
    path = tmp_path / "hosts.yml"
    path.write_text(
        "pods:\n  hosts:\n    a:\n      ansible_host: 10.0.0.1\n"
        '      ansible_user: "root\\nProxyCommand touch /tmp/PWN"\n'
    )
    code, err = run(capsys, "inventory", "export", "--ansible-inventory", str(path), "-f", "ssh-config")
    assert code == 2, err
    assert err.endswith(
        "host 'a': user 'root\\nProxyCommand touch /tmp/PWN' is not a plain user name (letters, digits and . _ -, "
        "not starting with '-'); an ssh_config cannot hold it safely, nothing exported\n"
    )
