"""A target's ProxyCommand, run as ssh runs it: tokens expanded, `exec`ed by the user's shell."""

from __future__ import annotations

import getpass

import pytest

from computefence.connectors.ssh import proxy_command_argv, tunnel_spec
from computefence.models import Target


def test_tokens_are_expanded_and_the_shell_runs_it(monkeypatch):
    monkeypatch.setenv("SHELL", "/bin/bash")
    target = Target(
        name="gpu",
        host="10.0.0.5",
        port=2222,
        user="ops",
        proxy_command="ssh -W %h:%p -l %r bastion # %n ${KEEP} 100%%",
    )
    assert proxy_command_argv(target) == [
        "/bin/bash",
        "-c",
        "exec ssh -W 10.0.0.5:2222 -l ops bastion # gpu ${KEEP} 100%",
    ]


def test_the_local_user_stands_in_for_a_missing_one():
    target = Target(name="gpu", host="h", proxy_command="nc %h %p # %r")
    assert proxy_command_argv(target)[-1] == f"exec nc h 22 # {getpass.getuser()}"


@pytest.mark.parametrize("field,value", [("host", "h;touch /tmp/x"), ("user", "$(id)"), ("name", "a b")])
def test_shell_syntax_never_reaches_the_command(field, value):
    target = Target(name="gpu", host="h", user="u", proxy_command="nc %h %p").model_copy(update={field: value})
    with pytest.raises(ValueError, match="must not receive; not connecting"):
        proxy_command_argv(target)


@pytest.mark.parametrize(
    "jump,spec",
    [
        ("bastion", "bastion"),
        ("jump@bastion:2222", "jump@bastion:2222"),
        ("root@[127.0.0.1]:2200", "root@127.0.0.1:2200"),
        ("ssh://ops@[2001:db8::5]:2022,inner", "ops@2001:db8::5:2022,inner"),
        ("u@2001:db8::7", "u@2001:db8::7:22"),
    ],
)
def test_proxyjump_in_the_form_asyncssh_parses(jump, spec):
    assert tunnel_spec(jump) == spec
