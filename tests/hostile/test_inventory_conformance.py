"""Class 8: an inventory author writes what Ansible or OpenSSH reads one way, hoping ComputeFence
reads it another (`IdentityFile none`, comments Ansible does not take, ranges, Jinja). Each case
asserts on what the CLI prints; where the real tool is here, it is asked too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from computefence.cli import main
from computefence.sources.ansible import ansible_inventory_command
from computefence.sources.ssh_config import ssh_available

needs_ansible = pytest.mark.skipif(ansible_inventory_command() is None, reason="the reference is ansible-inventory")
needs_ssh = pytest.mark.skipif(not ssh_available(), reason="the reference is ssh -G")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def listed(capsys, *argv: str) -> tuple[list[dict], str]:
    code, out, err = run(capsys, "inventory", "list", *argv, "--format", "json")
    assert code == 0, err
    assert "Traceback" not in err
    return json.loads(out)["targets"], err


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("computefence: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def hide_ansible(tmp_path, monkeypatch) -> None:
    """The built-in reader decides: no ansible-inventory on PATH, no importable Ansible."""
    empty = tmp_path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "ansible.cli.inventory", None)


def ansible_list(path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ansible-inventory", "-i", str(path), "--list"], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )


# ---------------------------------------------------------------- IdentityFile none


@needs_ssh
def test_identity_file_none_is_no_key_and_stays_none_in_the_export(tmp_path, capsys):
    config = tmp_path / "ssh_config"
    config.write_text("Host pod\n  HostName 10.0.0.1\n  IdentityFile none\n")
    (target,) = listed(capsys, "--ssh-config", str(config), "-H", "pod")[0]
    assert target["identity_files"] == [] and target["default_identities"] is False
    code, out, err = run(capsys, "inventory", "export", "--ssh-config", str(config), "-H", "pod", "-f", "ssh-config")
    assert code == 0, err
    exported = tmp_path / "exported"
    exported.write_text(out)
    g = subprocess.run(["ssh", "-G", "-F", str(exported), "pod"], capture_output=True, text=True, check=True).stdout
    # ssh reading what we wrote tries no key file, as it did reading the original
    assert [line for line in g.splitlines() if line.startswith("identityfile ")] == ["identityfile none"]


# ---------------------------------------------------------------- INI comments


# An INI line Ansible refuses makes it refuse the whole file: ansible-inventory lists none of its
# hosts. The old reader skipped the line with a warning and read every other host.
REFUSED_LINES = [
    (
        "[gpu]\ngood ansible_host=10.0.0.1\nc2 ansible_host=10.0.0.2 ; the spare\nc3 ansible_host=10.0.0.3\n",
        "3: expected key=value after the host name, got ';'",
    ),
    (
        "[gpu]\ngood ansible_host=10.0.0.1\n[pods] ; every pod\nsneaky ansible_host=10.0.0.2\n",
        "3: bad section header '[pods] ; every pod'",
    ),
    ("[gpu:children]\nkid ; the one\n[kid]\nk1\n[gpu]\ng1\n", "2: expected one group name in [gpu:children]"),
    ("[gpu]\ngood\nc4 ansible_user='ops\n", "3: No closing quotation"),
]


@needs_ansible
@pytest.mark.parametrize("reader", ["ansible", "built-in"])
@pytest.mark.parametrize(
    ("text", "error"), REFUSED_LINES, ids=["host-comment", "header-comment", "child-comment", "quote"]
)
def test_a_line_ansible_refuses_refuses_the_whole_file_naming_the_line(
    tmp_path, capsys, monkeypatch, reader, text, error
):
    path = tmp_path / "hosts.ini"
    path.write_text(text)
    assert f"Unable to parse {path} as an inventory source" in ansible_list(path).stderr
    if reader == "built-in":
        hide_ansible(tmp_path, monkeypatch)
    err = one_line_error(*run(capsys, "inventory", "list", "--ansible-inventory", str(path))[::2])
    assert f"{path}:{error}" in err and err.rstrip().endswith(": Ansible refuses the whole file for it")


@needs_ansible
def test_a_hash_inside_quotes_is_the_value_not_a_comment(tmp_path, capsys, monkeypatch):
    path = tmp_path / "hosts.ini"
    path.write_text("[pods]\np1 ansible_host=10.0.0.1 ansible_user='ops # not a comment'\n[pods:hosts]\np2\n")
    hostvars = json.loads(ansible_list(path).stdout)["_meta"]["hostvars"]
    assert hostvars["p1"]["ansible_user"] == "ops # not a comment"
    hide_ansible(tmp_path, monkeypatch)
    targets, _ = listed(capsys, "--ansible-inventory", str(path))
    # `[pods:hosts]` is Ansible's spelling of `[pods]`: the old reader dropped p2 as a bad header
    assert [(t["name"], t["user"], t["tags"]) for t in targets] == [
        ("p1", "ops # not a comment", ["pods"]),
        ("p2", None, ["pods"]),
    ]


# ---------------------------------------------------------------- ranges

# Ranges Ansible cannot expand: it refuses the whole file (ansible-inventory warns and lists no
# host). The old reader skipped the line and went on with the rest, or guessed an expansion.
REFUSED_RANGES = [
    "h[1:b]",  # letters and digits
    "h[a:3]",
    "h[c:a]",  # letters backwards
    "h[1:9:0]",  # step 0
    "h[a:c:0]",
    "h[1:3:x]",
    "h[01:5]",  # a padded begin wider than the end
    "h[01:100]",
    "h[1:]",  # no end
    "h[1]",
    "h[1:2:3:4]",
    "h[1:3",  # unterminated
    "h[[1:3]]",
    "h[0a:0c]",
    "h[1:3]|x",
]


def _refused_range_file(folder, pattern: str, kind: str):
    path = folder / f"{REFUSED_RANGES.index(pattern)}" / f"hosts.{kind}"
    path.parent.mkdir(exist_ok=True)
    if kind == "ini":
        path.write_text(f"[pods]\ngood ansible_host=10.0.0.1\n{pattern}\n")
    else:
        path.write_text(f"pods:\n  hosts:\n    good:\n    {json.dumps(pattern)}:\n")
    return path


@pytest.fixture(scope="module")
def refused_by_ansible(tmp_path_factory):
    """The files of REFUSED_RANGES that ansible-inventory could not parse, asked in one run."""
    folder = tmp_path_factory.mktemp("refused")
    paths = [_refused_range_file(folder, p, k) for p in REFUSED_RANGES for k in ("ini", "yml")]
    argv = ["ansible-inventory", *(a for p in paths for a in ("-i", str(p))), "--list"]
    stderr = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL).stderr
    return folder, set(re.findall(r"Unable to parse (\S+) as an inventory source", stderr))


@needs_ansible
@pytest.mark.parametrize("kind", ["ini", "yml"])
@pytest.mark.parametrize("pattern", REFUSED_RANGES)
def test_a_range_ansible_refuses_is_a_one_line_error(refused_by_ansible, tmp_path, monkeypatch, capsys, pattern, kind):
    folder, refused = refused_by_ansible
    path = _refused_range_file(folder, pattern, kind)
    assert str(path) in refused
    hide_ansible(tmp_path, monkeypatch)  # the built-in reader (the next test: through Ansible)
    code, _, err = run(capsys, "inventory", "list", "--ansible-inventory", str(path))
    err = one_line_error(code, err)
    line = 3 if kind == "ini" else 4
    assert f"{path}:{line}: bad host range" in err and repr(pattern) in err


@needs_ansible
@pytest.mark.parametrize("kind", ["ini", "yml"])
def test_through_ansible_a_refused_range_is_the_same_one_line_error(tmp_path, capsys, kind):
    path = _refused_range_file(tmp_path, "h[1:b]", kind)
    err = one_line_error(*run(capsys, "inventory", "list", "--ansible-inventory", str(path))[::2])
    line = 3 if kind == "ini" else 4
    assert f"{path}:{line}: bad host range [1:b] in 'h[1:b]': invalid literal for int()" in err


@needs_ansible
def test_a_range_in_a_children_section_is_an_error(tmp_path, capsys):
    path = tmp_path / "hosts.ini"
    path.write_text("[pods:children]\ngpu[1:3]\n[gpu1]\ng1\n")
    assert "Failed to parse" in ansible_list(path).stderr
    err = one_line_error(*run(capsys, "inventory", "list", "--ansible-inventory", str(path))[::2])
    assert f"{path}:2: [pods:children] takes group names, and Ansible expands no host range there" in err


@pytest.mark.parametrize(
    "pattern",
    [
        "h[a:Z][0:9999]",  # 52 letters x 10,000: the old count left letters out and made 520,000 hosts
        "h[0:99999999999999999999999]",  # past what len(range) can hold: the old reader's traceback
    ],
)
def test_a_range_of_too_many_hosts_is_refused_before_any_is_made(tmp_path, capsys, pattern):
    path = tmp_path / "hosts.ini"
    path.write_text(f"[pods]\n{pattern}\n")
    err = one_line_error(*run(capsys, "inventory", "list", "--ansible-inventory", str(path))[::2])
    assert f"{path}:2: host pattern {pattern!r} expands to more than 100,000 hosts" in err


@needs_ansible
def test_ranges_expand_as_ansible_expands_them(tmp_path, capsys, monkeypatch):
    path = tmp_path / "hosts.ini"
    # A backwards numeric range is no host (and no error); `h[:2]:2222` is no address, so the
    # port stays in the names; letters run a-z then A-Z; a port after a valid name applies.
    path.write_text("[pods]\nkeep\nnone[5:1]\no[:1]:2222\nl[z:B]\nr[1:2]:2200\n")
    document = json.loads(ansible_list(path).stdout)
    expected = sorted(document["pods"]["hosts"])
    assert expected == sorted(["keep", "o0:2222", "o1:2222", "lz", "lA", "lB", "r1", "r2"])
    hide_ansible(tmp_path, monkeypatch)
    targets, _ = listed(capsys, "--ansible-inventory", str(path))
    assert sorted(t["name"] for t in targets) == expected
    assert {t["name"]: t["port"] for t in targets if t["port"] != 22} == {"r1": 2200, "r2": 2200}


# ---------------------------------------------------------------- Jinja values

CODE_RUNNING_TEMPLATES = [
    # Each would run a command if it were rendered (Ansible renders them when it connects).
    "{{ lookup('pipe', 'touch MARK') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}{{ lookup('pipe', 'touch MARK') }}",
    "{% set x = lookup('pipe', 'touch MARK') %}/keys/k",
    "{{ query('pipe', 'touch MARK') | first }}",
]


@pytest.mark.parametrize("use_ansible", [True, False], ids=["ansible-inventory", "built-in"])
@pytest.mark.parametrize("template", CODE_RUNNING_TEMPLATES)
def test_a_template_that_would_run_code_refuses_only_its_host(tmp_path, capsys, monkeypatch, template, use_ansible):
    if use_ansible and ansible_inventory_command() is None:
        pytest.skip("needs ansible-inventory")
    if not use_ansible:
        hide_ansible(tmp_path, monkeypatch)
    mark = tmp_path / "pwned"
    path = tmp_path / "hosts.yml"
    value = template.replace("MARK", str(mark))
    path.write_text(
        "pods:\n  hosts:\n    good: {ansible_host: 10.0.0.1}\n"
        f"    evil: {{ansible_host: 10.0.0.2, ansible_ssh_private_key_file: {json.dumps(value)}}}\n"
    )
    targets, err = listed(capsys, "--ansible-inventory", str(path))
    # the old reader refused the whole inventory (exit 2): one host's value cost every host
    assert {t["name"]: t["unreachable_reason"] for t in targets} == {
        "good": None,
        "evil": "ansible_ssh_private_key_file is a Jinja template ComputeFence does not evaluate",
    }
    warning = next(line for line in err.splitlines() if "evil" in line)
    assert "host evil: ansible_ssh_private_key_file is a Jinja template beyond a plain {{ variable }}" in warning
    assert not mark.exists()


@needs_ansible
def test_plain_references_resolve_as_ansible_resolves_them(tmp_path, capsys):
    path = tmp_path / "hosts.ini"
    path.write_text(
        "[pods]\np1 ansible_ssh_private_key_file='{{ key }}' ansible_port='{{ port }}'\n"
        "p2 ansible_private_key_file='{{ dir }}/{{ inventory_hostname }}.pem' ansible_user='{{ a }}' a='{{ b }}' b=ops\n"
        "[pods:vars]\nkey=/keys/fleet\nport=2222\ndir=/keys/pods\n"
    )
    out = subprocess.run(
        [
            "ansible",
            "-i",
            str(path),
            "all",
            "-m",
            "debug",
            "-a",
            "msg={{ [ansible_private_key_file | default(ansible_ssh_private_key_file), ansible_port | default(22), ansible_user | default(None)] }}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ansible_says = {
        h: json.loads(b)["msg"] for h, b in re.findall(r"^(\S+) \| SUCCESS => (\{.*?^\})", out, re.M | re.S)
    }
    assert ansible_says == {"p1": ["/keys/fleet", 2222, None], "p2": ["/keys/pods/p2.pem", 22, "ops"]}
    targets, _ = listed(capsys, "--ansible-inventory", str(path))
    ours = {t["name"]: [t["identity_files"][0], t["port"], t["user"]] for t in targets}
    assert ours == ansible_says  # the old reader refused the whole inventory


@needs_ansible
@pytest.mark.parametrize("reader", ["ansible-inventory", "built-in"])
def test_an_env_lookup_in_the_key_file_reads_this_machines_environment_as_ansible(
    tmp_path, capsys, monkeypatch, reader
):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CF_UNSET_DIR", raising=False)
    path = tmp_path / "hosts.ini"
    path.write_text(
        "[pods]\n"
        "p1 ansible_ssh_private_key_file=\"{{ lookup('env', 'HOME') }}/.ssh/gpu_key\"\n"
        "p2 ansible_private_key_file='{{ keys }}/p2.pem' keys='{{ lookup(\"env\",\"CF_UNSET_DIR\") }}/k'\n"
        "p3 ansible_ssh_private_key_file=\"{{ lookup('env', 'HF_TOKEN') }}\"\n"
        "p4 ansible_user=\"{{ lookup('env', 'USER') }}\"\n"
    )
    out = subprocess.run(
        ["ansible", "-i", str(path), "p1,p2", "-m", "debug", "-a", "var=ansible_private_key_file"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "ANSIBLE_PRIVATE_KEY_FILE": ""},
    ).stdout
    ansible_says = {
        h: json.loads(b)["ansible_private_key_file"]
        for h, b in re.findall(r"^(\S+) \| SUCCESS => (\{.*?^\})", out, re.M | re.S)
    }
    assert ansible_says == {"p1": f"{tmp_path}/home/.ssh/gpu_key", "p2": "/k/p2.pem"}
    if reader == "built-in":
        hide_ansible(tmp_path, monkeypatch)
    targets, err = listed(capsys, "--ansible-inventory", str(path))
    ours = {t["name"]: (t["identity_files"], t["unreachable_reason"]) for t in targets}
    assert ours["p1"] == ([ansible_says["p1"]], None) and ours["p2"] == ([ansible_says["p2"]], None)
    # A secret by its name is never read, and no env value goes where it would leave the machine.
    assert ours["p3"] == ([], "ansible_ssh_private_key_file is a Jinja template ComputeFence does not evaluate")
    assert ours["p4"][1] == "ansible_user is a Jinja template ComputeFence does not evaluate"
    assert "p3: ansible_ssh_private_key_file reads HF_TOKEN, a secret by its name" in err
    assert "p4: ansible_user reads the environment (USER)" in err
