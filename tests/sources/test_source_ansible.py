"""Targets from Ansible inventories: INI and YAML, groups, vars, children, ranges, group_vars."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from computefence.errors import ConfigError
from computefence.sources.ansible import (
    AnsibleSource,
    _ini_value,
    ansible_inventory_command,
    expand_host_pattern,
    load_ansible_inventory,
    read_ansible_inventory,
)

INI = """\
# ungrouped hosts come first
loose.example ansible_user=lonely

[web]
web[01:03].example.com
web-b:2201 ansible_host=10.0.0.9 ansible_user="deploy"   # inline comment

[gpu]
gpu-1 ansible_host=10.1.0.1 ansible_ssh_private_key_file=~/.ssh/gpu ansible_python_interpreter=/opt/conda/bin/python
localhost ansible_connection=local

[gpu:vars]
ansible_user=ubuntu
ansible_port=2222
ansible_ssh_common_args='-o ProxyJump=jump@bastion'

[cloud:children]
gpu
web

[cloud:vars]
ansible_user=cloudy
ansible_port=22
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def by_name(path) -> dict:
    return {t.name: t for t in load_ansible_inventory(path)}


def test_ini_groups_vars_children_and_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    inv = write(tmp_path / "hosts", INI)
    write(tmp_path / "group_vars/web.yml", "ansible_user: from-group-vars\n")
    write(tmp_path / "host_vars/web02.example.com.yaml", "ansible_port: 2302\n")
    hosts = by_name(inv)
    assert list(hosts) == [
        "loose.example",
        "web01.example.com",
        "web02.example.com",
        "web03.example.com",
        "web-b",
        "gpu-1",
        "localhost",
    ]
    assert hosts["loose.example"].user == "lonely" and hosts["loose.example"].tags == []
    # group_vars/web.yml beats [cloud:vars]; web is a child of cloud
    web1 = hosts["web01.example.com"]
    assert (web1.host, web1.port, web1.user, web1.tags) == (
        "web01.example.com",
        22,
        "from-group-vars",
        ["cloud", "web"],
    )
    assert web1.source == f"{inv}:5"
    assert hosts["web02.example.com"].port == 2302  # host_vars/
    # host:port and host vars beat group vars
    web_b = hosts["web-b"]
    assert (web_b.host, web_b.port, web_b.user) == ("10.0.0.9", 2201, "deploy")
    # [gpu:vars] (deeper) beats [cloud:vars]
    gpu = hosts["gpu-1"]
    assert (gpu.host, gpu.port, gpu.user) == ("10.1.0.1", 2222, "ubuntu")
    assert gpu.identity_files == [str(tmp_path / ".ssh/gpu")]
    assert gpu.python == "/opt/conda/bin/python"
    assert gpu.proxy_jump == "jump@bastion"
    assert gpu.unreachable_reason is None
    local = hosts["localhost"]
    assert "ansible_connection=local" in local.unreachable_reason and "doctor" in local.unreachable_fix.advice


YAML = """\
all:
  vars:
    ansible_user: root
  hosts:
    solo:
      ansible_host: 192.0.2.5
      ansible_ssh_extra_args: -J hop
  children:
    trainers:
      vars:
        ansible_port: 2200
      hosts:
        trainer-[a:c]:
        trainer-z:
          ansible_port: 2299
      children:
        h100:
          hosts:
            trainer-a:
              ansible_python_interpreter: auto_silent
          vars:
            ansible_user: gpuuser
spare:
  hosts:
    spare-[1:5:2]:
"""


def test_yaml_groups_vars_children_and_ranges(tmp_path):
    inv = write(tmp_path / "hosts.yml", YAML)
    hosts = by_name(inv)
    assert list(hosts) == ["solo", "trainer-a", "trainer-b", "trainer-c", "trainer-z", "spare-1", "spare-3", "spare-5"]
    assert (hosts["solo"].host, hosts["solo"].user, hosts["solo"].proxy_jump) == ("192.0.2.5", "root", "hop")
    a = hosts["trainer-a"]
    assert (a.port, a.user, a.python, a.tags) == (2200, "gpuuser", "python3", ["h100", "trainers"])
    assert a.source == f"{inv}:13"
    assert (hosts["trainer-b"].user, hosts["trainer-b"].tags) == ("root", ["trainers"])
    assert hosts["trainer-z"].port == 2299
    assert hosts["spare-3"].tags == ["spare"] and hosts["spare-3"].user == "root"


def test_directory_of_inventories(tmp_path):
    write(tmp_path / "inv/10-ini", "[a]\nh1\n")
    write(tmp_path / "inv/20.yaml", "b:\n  hosts:\n    h2:\n")
    write(tmp_path / "inv/old~", "garbage line that is not an inventory = =\n")
    source = AnsibleSource(tmp_path / "inv", use_ansible=False)
    assert [(t.name, t.tags) for t in source.targets()] == [("h1", ["a"]), ("h2", ["b"])]


def test_ranges():
    assert expand_host_pattern("web[01:03]", "x") == ["web01", "web02", "web03"]
    assert expand_host_pattern("n[8:10]", "x") == ["n8", "n9", "n10"]
    assert expand_host_pattern("r[a:b]-[1:2]", "x") == ["ra-1", "ra-2", "rb-1", "rb-2"]
    with pytest.raises(ConfigError, match="f:3: bad host range"):
        expand_host_pattern("w[1:b]", "f:3")


@pytest.mark.parametrize(
    "name,content,line,words",
    [
        ("h.ini", "[web]\nh ansible_port=99999\n", 2, ["ansible_port must be a port"]),
        # Ansible refuses the whole file for a range it cannot expand: no line of it is dropped quietly
        ("h.ini", "[ok]\ngood\nbad[1:b]\n", 3, ["bad host range [1:b] in 'bad[1:b]'"]),
        ("h.ini", "[g:children]\nkid[1:3]\n", 2, ["takes group names", "no host range"]),
        ("h.yml", "all:\n  hosts:\n    h:\n      ansible_port: nope\n", 4, ["ansible_port must be a port"]),
        ("h.yml", "all:\n  hosts: [a, b]\n", 2, ["hosts must be a mapping"]),
        ("h.yml", "all:\n  host:\n    a:\n", 2, ["unknown key 'host'"]),
        ("h.yml", "all:\n  hosts:\n    h:\n  hosts:\n    g:\n", 4, ["duplicate key 'hosts'"]),
        ("h.yml", "all:\n  hosts:\n    h: {ansible_host: [\n", 4, ["YAML syntax error"]),
    ],
)
def test_errors_name_file_and_line(tmp_path, name, content, line, words):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_ansible_inventory(path)
    assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(
    "content,line,words",
    [
        ("[web\nlost\n[ok]\ngood\n", 1, "bad section header"),
        ("[ok]\ngood\n[ok:vars]\nnot a var\n", 4, "expected key=value in [ok:vars]"),
        ("[ok]\ngood\nhost1 port 22\n", 3, "expected key=value after the host name"),
        ("[ok]\ngood\n[g:children]\ntwo words\n", 4, "expected one group name"),
        # `#` needs a blank before it here: Ansible reads the group `kid#note`, never declared
        ("[ok]\ngood\n[g:children]\nkid#note\n", 4, "names 'kid#note', a group this file never declares"),
        ("[ok]\ngood\n[nog:vars]\nx=1\n", 3, "[nog:vars] is for a group this file never declares"),
    ],
)
def test_a_line_ansible_refuses_refuses_the_file_naming_the_line(tmp_path, content, line, words):
    path = tmp_path / "h.ini"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        read_ansible_inventory(path)
    assert str(info.value).startswith(f"{path}:{line}: ") and words in str(info.value)
    assert str(info.value).endswith(": Ansible refuses the whole file for it")


def test_missing_and_empty(tmp_path):
    with pytest.raises(ConfigError, match="no such Ansible inventory"):
        load_ansible_inventory(tmp_path / "nope")
    (tmp_path / "empty.ini").write_text("[web]\n# nobody\n")
    with pytest.raises(ConfigError, match="lists no hosts"):
        load_ansible_inventory(tmp_path / "empty.ini")
    (tmp_path / "binary.ini").write_bytes(b"\x00\x01\n")
    with pytest.raises(ConfigError, match="binary.ini: not a text file"):
        load_ansible_inventory(tmp_path / "binary.ini")


@pytest.mark.skipif(ansible_inventory_command() is None, reason="needs ansible-inventory")
def test_a_file_ansible_rejects_for_one_bad_line_is_refused_naming_the_line(tmp_path):
    path = write(tmp_path / "hosts", "[gpu]\ngood ansible_host=10.0.0.1\n[broken\n[more]\nalso-good\n")
    with pytest.raises(ConfigError) as info:
        AnsibleSource(path).targets()
    assert str(info.value) == f"{path}:3: bad section header '[broken': Ansible refuses the whole file for it"


@pytest.mark.skipif(ansible_inventory_command() is None, reason="needs ansible-inventory")
def test_ansible_reads_it_when_it_can_and_unhonoured_ssh_options_are_warnings(tmp_path):
    path = write(tmp_path / "hosts", "[gpu]\ng[1:3] ansible_ssh_common_args='-o StrictHostKeyChecking=no -J hop'\n")
    source = AnsibleSource(path)
    targets = source.targets()
    assert source.resolver == "ansible-inventory"
    assert [(t.name, t.proxy_jump) for t in targets] == [("g1", "hop"), ("g2", "hop"), ("g3", "hop")]
    assert source.warnings == [
        f"{path}: host g1, g2, g3: ansible_ssh_common_args `-o StrictHostKeyChecking=no` "
        "cannot be honoured; ComputeFence connects without it"
    ]


@pytest.mark.parametrize(
    "text",
    [
        "22",
        "0",
        "00",
        "007",
        "1_000",
        "-3",
        "+4",
        "0x1f",
        "1.5",
        "1e3",
        "1.2.3",
        "10.0.0.1",
        "1.2",
        "3j",
        "root",
        "True",
        "False",
        "None",
        "true",
        "none",
        "inf",
        "nan",
        "pod-1",
        "a.b",
        "a:b",
        "a/b",
        "a@b",
        "lambda",
        "if",
        "None,1",
        "[1, 2]",
        "{'a': 1}",
        "b'x'",
        "'quoted'",
        "é",
        "٣",
        "x.1",
        "_private",
        # Past int()'s digit limit: what ast makes of them (text, and 0 for the zeros), never a traceback.
        pytest.param("9" * 5000, id="5000 nines"),
        pytest.param("0" * 5000, id="5000 zeros"),
    ],
)
def test_ini_values_are_python_literals_only_where_ast_reads_one(text):
    try:
        expected = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        expected = text
    assert _ini_value(text) == expected and type(_ini_value(text)) is type(expected)


def test_ini_host_lines_split_as_shlex_splits_them(tmp_path):
    path = write(
        tmp_path / "hosts.ini",
        "[g]\n"
        "a\tansible_host=10.0.0.1   ansible_user=tab\n"
        "b ansible_user=hash#rest-is-a-comment ansible_port=2\n"
        "c ansible_user='two words' ansible_port=3\n"
        "d ansible_user=back\\ slash\n",
    )
    hosts = by_name(path)
    assert (hosts["a"].host, hosts["a"].user) == ("10.0.0.1", "tab")
    assert (hosts["b"].user, hosts["b"].port) == ("hash", 22)
    assert (hosts["c"].user, hosts["c"].port) == ("two words", 3)
    assert hosts["d"].user == "back slash"


def test_host_vars_as_files_and_folders_and_hosts_without_any(tmp_path):
    inventory = write(tmp_path / "hosts.ini", "[g]\na\nb\nc\n")
    write(tmp_path / "host_vars/a.yml", "ansible_port: 2201\n")
    write(tmp_path / "host_vars/b/one.yaml", "ansible_port: 2202\n")
    write(tmp_path / "host_vars/b/two.yaml", "ansible_user: bee\n")
    hosts = by_name(inventory)
    assert (hosts["a"].port, hosts["b"].port, hosts["b"].user, hosts["c"].port) == (2201, 2202, "bee", 22)


def test_a_vars_folder_that_cannot_be_listed_is_a_config_error_naming_it(tmp_path):
    inventory = write(tmp_path / "hosts.ini", "[web]\nh1 ansible_host=10.0.0.1\n")
    (tmp_path / "group_vars").symlink_to(tmp_path / "group_vars")  # a loop: listing it fails even as root
    with pytest.raises(ConfigError) as raised:
        read_ansible_inventory(inventory)
    assert str(raised.value) == f"{tmp_path / 'group_vars'}: cannot list it: Too many levels of symbolic links"


@pytest.mark.parametrize(
    "value,why",
    [
        ('\'{{ lookup("env", "IP") }}\'', "reads the environment (IP); ComputeFence evaluates lookup('env', ...) only"),
        ("'{{ ip | default(\"10.0.0.9\") }}'", "beyond a plain {{ variable }} reference"),
        ("'{% if true %}x{% endif %}'", "beyond a plain {{ variable }} reference"),
        ("'{{ nowhere }}'", "refers to nowhere, which is not defined"),
        ("'{{ loop_a }}' loop_a='{{ loop_b }}' loop_b='{{ loop_a }}'", "refers to itself through loop_a"),
        ("'{{ items }}x' items=\"['a']\"", "puts items (a list) into text"),
    ],
)
def test_a_jinja_value_beyond_a_plain_reference_refuses_only_its_host(tmp_path, value, why):
    path = write(tmp_path / "h.ini", f"[web]\nok ansible_host=10.0.0.1\nh ansible_host={value}\n")
    targets, warnings = read_ansible_inventory(path)
    ok, refused = targets
    assert (ok.name, ok.host, ok.unreachable_reason) == ("ok", "10.0.0.1", None)
    assert refused.name == "h" and refused.unreachable_reason == (
        "ansible_host is a Jinja template ComputeFence does not evaluate"
    )
    (warning,) = warnings
    assert warning.startswith(f"{path}:") and "host h: ansible_host " in warning and why in warning
    assert warning.endswith("; the host is not checked") and "\n" not in warning


def test_plain_references_follow_chains_up_to_the_depth_cap(tmp_path):
    chain = " ".join(f"v{i}='{{{{ v{i + 1} }}}}'" for i in range(30)) + " v30=deploy"
    path = write(
        tmp_path / "h.ini",
        f"[web]\nnear ansible_user='{{{{ v21 }}}}' {chain}\nfar ansible_user='{{{{ v0 }}}}' {chain}\n",
    )
    (near, far), warnings = read_ansible_inventory(path)
    assert (near.user, near.unreachable_reason) == ("deploy", None)  # 10 references
    assert far.unreachable_reason is not None and far.user is None  # 31: past MAX_TEMPLATE_DEPTH
    assert len(warnings) == 1 and "host far: ansible_user refers through more than 10 variables" in warnings[0]


def test_an_ansible_inventory_that_floods_is_stopped_at_the_cap_with_one_line(tmp_path, monkeypatch):
    import computefence.sources.ansible as ansible_source

    monkeypatch.setattr(ansible_source, "ANSIBLE_MAX_BYTES", 100_000)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ansible-inventory").write_text("#!/bin/sh\nexec yes '{'\n")
    (bin_dir / "ansible-inventory").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    path = write(tmp_path / "hosts", "[gpu]\ng1 ansible_host=10.0.0.1\n")
    with pytest.raises(ConfigError) as info:
        AnsibleSource(path).targets()
    assert str(info.value) == f"{path}: ansible-inventory printed over 100,000 bytes"
