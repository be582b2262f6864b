"""ssh_config conformance: what ComputeFence resolves for each alias of the corpus equals what
`ssh -G` prints, first through `ssh -G` itself, then with ssh hidden from PATH (the built-in
parser). Where the parser still differs, the case is a known limitation (xfail, with why).

Corpus: ssh_config/NN-name.conf, first line `# aliases: a b` (an alias may be `user@alias`);
`@DIR@` stands for the folder the corpus is copied to (ssh reads relative Includes from the
real ~/.ssh, which a test must not touch).
"""

from __future__ import annotations

import getpass
import subprocess
from pathlib import Path

import pytest

from computefence.sources.ssh_config import (
    DEFAULT_IDENTITY_FILES,
    RESOLVER_PARSER,
    RESOLVER_SSH,
    SshConfigSource,
    expand_tokens,
    identity_tokens,
    ssh_available,
)

CORPUS = Path(__file__).parent / "ssh_config"
# Cases the built-in parser gets wrong, and why: it never runs a command.
PARSER_LIMITS = {
    "34-match-exec-true": "the parser never runs Match exec commands; ssh -G does",
    "43-match-exec-token": "the parser never runs Match exec commands; ssh -G does",
}


def _cases() -> list[tuple[str, str]]:
    cases = []
    for path in sorted(CORPUS.glob("*.conf")):
        first = path.read_text().splitlines()[0]
        assert first.startswith("# aliases: "), path
        cases.extend((path.stem, alias) for alias in first.removeprefix("# aliases: ").split())
    return cases


CASES = _cases()


def _copy_corpus(tmp_path: Path) -> Path:
    for path in CORPUS.iterdir():
        (tmp_path / path.name).write_text(path.read_text().replace("@DIR@", str(tmp_path)))
    return tmp_path


def what_ssh_says(config: Path, spec: str) -> dict:
    """Host, port, user, keys, proxy and known_hosts as `ssh -G` prints them for `spec`."""
    user, _, alias = spec.rpartition("@")
    command = ["ssh", "-G", "-F", str(config), *(["-l", user] if user else []), alias]
    out = subprocess.run(command, capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL).stdout
    values: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        values.setdefault(key, []).append(value)
    host, port, login = values["hostname"][0], int(values["port"][0]), values["user"][0]
    keys = values.get("identityfile", [])
    # `IdentityFile none` and nothing else: ssh tries no key file at all, only the agent's keys.
    agent_only = bool(keys) and all(k.lower() == "none" for k in keys)
    if keys == DEFAULT_IDENTITY_FILES:
        keys = []
    tokens = identity_tokens(alias, host, port, login)
    keys = list(
        dict.fromkeys(
            str(Path(expand_tokens(k, tokens, allow_env=True, where="ssh -G")).expanduser())
            for k in keys
            if k.lower() != "none"
        )
    )
    proxy = None
    if "proxyjump" in values:
        proxy = ("jump", values["proxyjump"][0])
    elif "proxycommand" in values:
        proxy = ("command", values["proxycommand"][0])
    home = Path("~").expanduser()
    known = values["userknownhostsfile"][0].split()
    if known == [str(home / ".ssh/known_hosts"), str(home / ".ssh/known_hosts2")]:
        known = []
    return {
        "host": host,
        "port": port,
        "user": login,
        "keys": keys,
        "agent_only": agent_only,
        "proxy": proxy,
        "known_hosts": known,
    }


def what_we_say(config: Path, spec: str) -> tuple[dict, str]:
    source = SshConfigSource([spec], str(config))
    (target,) = source.targets()
    proxy = (
        ("jump", target.proxy_jump)
        if target.proxy_jump
        else ("command", target.proxy_command)
        if target.proxy_command
        else None
    )
    return {
        "host": target.host,
        "port": target.port,
        "user": target.user or getpass.getuser(),
        "keys": target.identity_files,
        "agent_only": not target.identity_files and not target.default_identities,
        "proxy": proxy,
        "known_hosts": target.known_hosts,
    }, source.resolver


pytestmark = pytest.mark.skipif(not ssh_available(), reason="the conformance reference is the OpenSSH client")


def test_the_corpus_is_large_enough():
    assert len(list(CORPUS.glob("*.conf"))) >= 40
    assert set(PARSER_LIMITS) <= {case for case, _ in CASES}


@pytest.mark.parametrize("case,alias", CASES)
def test_ssh_g_resolver_agrees_with_ssh(tmp_path, case, alias):
    config = _copy_corpus(tmp_path) / f"{case}.conf"
    ours, resolver = what_we_say(config, alias)
    assert resolver == RESOLVER_SSH
    assert ours == what_ssh_says(config, alias)


@pytest.mark.parametrize(
    "case,alias",
    [
        pytest.param(c, a, marks=pytest.mark.xfail(reason=PARSER_LIMITS[c], strict=True))
        if c in PARSER_LIMITS
        else (c, a)
        for c, a in CASES
    ],
)
def test_fallback_parser_agrees_with_ssh(tmp_path, monkeypatch, case, alias):
    config = _copy_corpus(tmp_path) / f"{case}.conf"
    expected = what_ssh_says(config, alias)
    empty = tmp_path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    ours, resolver = what_we_say(config, alias)
    assert resolver == RESOLVER_PARSER
    assert ours == expected
