"""Ansible conformance: for every inventory of the corpus, the host, port, user, keys, proxy,
python and groups ComputeFence resolves equal what `ansible-inventory --list` gives, read
through ansible-inventory itself and then with Ansible hidden (the built-in reader). Where
the built-in reader still differs, the case is a known limitation (xfail, with why).

Corpus: ansible/NN-name/ holds `inventory` (a file or folder) or `inventory.yml`, and any
group_vars/, host_vars/ beside it; `@DIR@` stands for the folder the case is copied to.
The reference mapping below reads the hostvars the way Ansible's ssh connection does:
ansible_ssh_* spellings win, then `-o Port/IdentityFile/User` from the variables come
before the common and extra args on ssh's command line, where ssh keeps first values.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from computefence.sources.ansible import READER_ANSIBLE, READER_BUILTIN, AnsibleSource, ansible_inventory_command

CORPUS = Path(__file__).parent / "ansible"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
# Cases the built-in reader gets wrong, and why.
READER_LIMITS: dict[str, str] = {}

pytestmark = pytest.mark.skipif(ansible_inventory_command() is None, reason="the reference is ansible-inventory")


def _copy_case(case: str, tmp_path: Path) -> Path:
    root = tmp_path / case
    shutil.copytree(CORPUS / case, root)
    for path in root.rglob("*"):
        if path.is_file() and "@DIR@" in path.read_text():
            path.write_text(path.read_text().replace("@DIR@", str(root)))
    return next(root / name for name in ("inventory", "inventory.yml") if (root / name).exists())


def _ssh_options(hostvars: dict) -> tuple[list[tuple[str, str]], str | None, list[str]]:
    """(option, value) in the order of Ansible's ssh command line, its -F file, and the
    arguments that name identity files, as ssh gets them."""
    options = []
    identity_args = []
    for names, option in (
        (("ansible_ssh_port", "ansible_port"), "port"),
        (("ansible_ssh_private_key_file", "ansible_private_key_file"), "identityfile"),
        (("ansible_ssh_user", "ansible_user"), "user"),
    ):
        value = next((hostvars[n] for n in names if n in hostvars), None)
        if value is not None:
            options.append((option, str(value)))
            if option == "identityfile":
                identity_args += ["-o", f'IdentityFile="{value}"']  # as Ansible's ssh plugin writes it
    config = None
    flags = {"-p": "port", "-l": "user", "-i": "identityfile", "-J": "proxyjump"}
    for name in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        words = shlex.split(hostvars.get(name, ""))
        for flag, value in zip(words, words[1:] + [""]):
            if flag == "-o":
                key, _, val = value.partition("=")
                options.append((key.lower(), val))
                if key.lower() == "identityfile":
                    identity_args += ["-o", value]
            elif flag == "-F":
                config = config or value
            elif flag in flags:
                options.append((flags[flag], value))
                if flag == "-i":
                    identity_args += ["-i", value]
    return options, config, identity_args


def _ssh_g(*args: str) -> dict[str, list[str]]:
    out = subprocess.run(
        ["ssh", "-G", *args], capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL
    ).stdout
    values: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        values.setdefault(key, []).append(value)
    return values


def _agent_only(identity_files: list[str]) -> bool:
    """What ssh -G says: `IdentityFile none` and nothing else, so no key file, only the agent's."""
    return bool(identity_files) and all(k.lower() == "none" for k in identity_files)


# The variables the mapping reads; ansible-inventory lists them untemplated.
CONNECTION_VARS = (
    "ansible_ssh_host",
    "ansible_host",
    "ansible_ssh_port",
    "ansible_port",
    "ansible_ssh_private_key_file",
    "ansible_private_key_file",
    "ansible_ssh_user",
    "ansible_user",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
    "ansible_python_interpreter",
)


def templated(inventory: Path, hostvars: dict[str, dict]) -> None:
    """Replace the connection variables that hold `{{ }}` with what Ansible makes of them at
    run time, asked of `ansible HOST -m debug` (it runs here and connects nowhere)."""
    if not any("{{" in str(v) for hv in hostvars.values() for k, v in hv.items() if k in CONNECTION_VARS):
        return
    keys = json.dumps(list(CONNECTION_VARS))
    expression = f"hostvars[inventory_hostname] | dict2items | selectattr('key', 'in', {keys}) | items2dict | to_json"
    out = subprocess.run(
        ["ansible", "-i", str(inventory), "all", "-m", "debug", "-a", "msg={{ " + expression + " }}"],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    ).stdout
    for host, block in re.findall(r"^(\S+) \| SUCCESS => (\{.*?^\})", out, re.M | re.S):
        hostvars.setdefault(host, {}).update(json.loads(json.loads(block)["msg"]))


def expected_targets(inventory: Path) -> dict[str, dict]:
    out = subprocess.run(
        ["ansible-inventory", "-i", str(inventory), "--list"],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout
    document = json.loads(out)
    templated(inventory, document["_meta"]["hostvars"])
    groups: dict[str, set[str]] = {}

    def members(group: str, seen: tuple[str, ...]) -> set[str]:
        body = document.get(group, {})
        found = set(body.get("hosts", []))
        for child in body.get("children", []):
            if child not in seen:
                found |= members(child, (*seen, child))
        return found

    for group in document:
        if group not in ("_meta", "all", "ungrouped"):
            for host in members(group, (group,)):
                groups.setdefault(host, set()).add(group)
    expected = {}
    # Hosts without variables are missing from _meta.hostvars: the groups list them.
    hostvars_of = document["_meta"]["hostvars"]
    for name in {*members("all", ("all",)), *hostvars_of}:
        hostvars = hostvars_of.get(name, {})
        options, config, identity_args = _ssh_options(hostvars)
        first = {}
        for key, value in options:
            first.setdefault("proxy" if key in ("proxyjump", "proxycommand") else key, (key, value))
        host = hostvars.get("ansible_ssh_host", hostvars.get("ansible_host", name))
        proxy = first.get("proxy")
        python = str(hostvars.get("ansible_python_interpreter", "python3"))
        entry = {
            "host": host,
            "port": int(first["port"][1]) if "port" in first else 22,
            "user": first["user"][1] if "user" in first else None,
            "keys": [str(Path(v).expanduser()) for k, v in options if k == "identityfile" and v.lower() != "none"],
            "agent_only": bool(identity_args)
            and _agent_only(_ssh_g("-F", "/dev/null", *identity_args, "--", "host")["identityfile"]),
            "proxy": (proxy[0], proxy[1]) if proxy else None,
            "python": "python3" if python.startswith("auto") else python,
            "tags": sorted(groups.get(name, set())),
        }
        if config:
            # ssh resolves the host through the -F file, the command line's options first
            flags = [arg for key, value in options for arg in ("-o", f"{key}={value}")]
            values = _ssh_g("-F", config, *flags, "--", host)
            jump, command = values.get("proxyjump", [None])[0], values.get("proxycommand", [None])[0]
            entry.update(
                host=values["hostname"][0],
                port=int(values["port"][0]),
                user=values["user"][0],
                agent_only=_agent_only(values["identityfile"]),
                proxy=("proxyjump", jump) if jump else ("proxycommand", command) if command else None,
            )
        expected[name] = entry
    return expected


def resolved(source: AnsibleSource) -> dict[str, dict]:
    return {
        t.name: {
            "host": t.host,
            "port": t.port,
            "user": t.user,
            "keys": t.identity_files,
            "agent_only": not t.identity_files and not t.default_identities,
            "proxy": ("proxyjump", t.proxy_jump)
            if t.proxy_jump
            else ("proxycommand", t.proxy_command)
            if t.proxy_command
            else None,
            "python": t.python,
            "tags": t.tags,
        }
        for t in source.targets()
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """What Ansible says for a case, asked once per case (ansible-inventory starts slowly)."""
    answers: dict[str, dict[str, dict]] = {}

    def answer(case: str) -> dict[str, dict]:
        if case not in answers:
            answers[case] = expected_targets(_copy_case(case, tmp_path_factory.mktemp("reference")))
        return answers[case]

    return answer


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40
    assert set(READER_LIMITS) <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_ansible_reader_agrees_with_ansible(tmp_path, reference, case):
    source = AnsibleSource(_copy_case(case, tmp_path))
    assert source.resolver == READER_ANSIBLE
    assert resolved(source) == reference(case)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.xfail(reason=READER_LIMITS[c], strict=True)) if c in READER_LIMITS else c
        for c in CASES
    ],
)
def test_builtin_reader_agrees_with_ansible(tmp_path, monkeypatch, reference, case):
    inventory = _copy_case(case, tmp_path)
    expected = reference(case)
    empty = tmp_path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "ansible.cli.inventory", None)  # and no importable Ansible
    source = AnsibleSource(inventory)
    assert source.resolver == READER_BUILTIN
    assert resolved(source) == expected
