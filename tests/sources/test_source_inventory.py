"""ComputeFence YAML inventories: the format, defaults, and errors that name file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from computefence.errors import ConfigError
from computefence.sources.inventory import InventorySource, inventory_files, load_inventory


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_issue_example_with_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    inv = write(
        tmp_path / "pods.yaml",
        """\
        known_hosts: ~/.ssh/known_hosts          # optional, more than one allowed
        defaults:
          user: root
          port: 22
          identity_file: ~/.ssh/id_ed25519
          python: python3
          checks: {output_dir: /workspace/checkpoints, expect_gpu: true}
        hosts:
          - name: pod-a
            host: 203.0.113.10
            port: 22022
            tags: [sweep-7]
            checks: {output_dir: ./out, dataset: /workspace/data/train.jsonl, input_column: text, label_column: label}
          - host: 203.0.113.11
            user: ubuntu
            identity_file: [keys/a, /abs/b]
            python: /opt/conda/bin/python
            proxy_jump: jump@bastion:2222
        """,
    )
    a, b = load_inventory(inv)
    home = tmp_path / "home"
    assert a.name == "pod-a" and a.host == "203.0.113.10" and a.port == 22022 and a.user == "root"
    assert a.identity_files == [str(home / ".ssh/id_ed25519")]
    assert a.known_hosts == [str(home / ".ssh/known_hosts")]
    assert a.tags == ["sweep-7"]
    # host checks are merged over the defaults key by key
    assert a.checks.output_dir == "./out" and a.checks.expect_gpu is True
    assert a.checks.dataset == "/workspace/data/train.jsonl" and a.checks.label_column == "label"
    assert a.source == f"{inv}:9"

    assert b.name == "203.0.113.11"  # the name defaults to the host
    assert b.port == 22 and b.user == "ubuntu" and b.python == "/opt/conda/bin/python"
    assert b.identity_files == [str(tmp_path / "keys/a"), "/abs/b"]  # relative to the inventory
    assert b.proxy_jump == "jump@bastion:2222"
    assert b.checks.output_dir == "/workspace/checkpoints"
    assert b.source == f"{inv}:14"


def test_relative_inventory_path_resolves_identity_against_its_directory(tmp_path, monkeypatch):
    (tmp_path / "inv").mkdir()
    write(tmp_path / "inv/p.yaml", "hosts:\n  - {host: h, identity_file: k}\n")
    monkeypatch.chdir(tmp_path)
    (target,) = load_inventory("inv/p.yaml")
    assert target.identity_files == [str(tmp_path / "inv/k")]
    assert target.source == "inv/p.yaml:2"


def test_known_hosts_list(tmp_path):
    inv = write(tmp_path / "p.yaml", "known_hosts: [/a/kh, rel_kh]\nhosts:\n  - host: h\n")
    (target,) = load_inventory(inv)
    assert target.known_hosts == ["/a/kh", str(tmp_path / "rel_kh")]


ERRORS = [
    # (content, line, words the message must hold)
    ("hosts:\n  - name: a\n    host: x\n    prot: 2222\n", 4, ["unknown key 'prot'", "allowed: name, host, port"]),
    ("hosts:\n  - name: a\n    host: x\n    port: 70000\n", 4, ["hosts[0].port", "between 1 and 65535", "70000"]),
    ("hosts:\n  - name: a\n    host: x\n    port: 0\n", 4, ["between 1 and 65535"]),
    ("hosts:\n  - name: a\n    host: x\n    port: '22'\n", 4, ["hosts[0].port", "valid integer"]),
    (
        "hosts:\n  - name: a\n    host: x\n  - name: b\n    host: y\n  - name: a\n    host: z\n",
        6,
        ["duplicate host name 'a'", "first at line 2"],
    ),
    ("hosts:\n  - host: x\n  - host: x\n", 3, ["duplicate host name 'x'", "give each host a 'name'"]),
    ("hosts:\n  - name: a\n    port: 22\n", 2, ["hosts[0]", "missing required key 'host'"]),
    ("", 1, ["empty"]),
    ("# only a comment\n", 1, ["empty"]),
    ("hosts: [\n  {host: a}\n", 3, ["YAML syntax error"]),
    ("hosts:\n  - host: a\n   bad: indent\n", 3, ["YAML syntax error"]),
    ("hosts:\n  - host: x\n    host: y\n", 3, ["duplicate key 'host'", "first at line 2"]),
    ("hosts: []\n", 1, ["no hosts listed"]),
    ("defaults:\n  user: root\n", 1, ["missing required key 'hosts'"]),
    ("- host: a\n", 1, ["expected a mapping"]),
    (
        "defaults:\n  checks: {outdir: /x}\nhosts:\n  - host: x\n",
        2,
        ["defaults.checks.outdir", "unknown key 'outdir'", "output_dir"],
    ),
    ("hosts:\n  - host: x\n    checks:\n      expect_gpu: maybe\n", 4, ["expect_gpu", "valid boolean"]),
    ("hosts:\n  - host: x\n    tags: sweep-7\n", 3, ["hosts[0].tags", "expected a list (got 'sweep-7')"]),
    ("hosts:\n  - 5\n", 2, ["hosts[0]: expected a mapping (got 5)"]),
    ("hosts: {a: b}\n", 1, ["hosts: expected a list"]),
    ("hosts:\n  - host: x\n    name: 'pod a'\n", 3, ["hosts[0].name", "letters, digits"]),
    ("hosts:\n  - host: 'two words'\n", 2, ["host must be a non-empty string without spaces"]),
    ("known_hosts: 5\nhosts:\n  - host: x\n", 1, ["known_hosts", "a string or a list of strings"]),
    ("hosts:\n  - host: x\n    user: 0\n", 3, ["hosts[0].user", "valid string"]),
    ("hosts:\n  - host: x\nextra: 1\n", 3, ["unknown key 'extra'", "known_hosts, defaults, hosts"]),
    ("hosts:\n  - host: a\n---\nhosts:\n  - host: b\n", 3, ["YAML syntax error", "single document"]),
]


@pytest.mark.parametrize("content,line,words", ERRORS)
def test_every_error_names_file_and_line(tmp_path, content, line, words):
    inv = tmp_path / "pods.yaml"
    inv.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_inventory(inv)
    message = str(info.value)
    assert message.startswith(f"{inv}:{line}: "), message
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_several_problems_report_the_first_and_count_the_rest(tmp_path):
    inv = write(tmp_path / "p.yaml", "hosts:\n  - host: x\n    port: 0\n  - host: y\n    prot: 1\n")
    message = str(pytest.raises(ConfigError, load_inventory, inv).value)
    assert message.startswith(f"{inv}:3: hosts[0].port") and message.endswith("(and 1 more problem)")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such inventory file"):
        load_inventory(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="is a directory"):
        load_inventory(tmp_path)


def test_a_directory_means_its_yaml_files(tmp_path):
    write(tmp_path / "b.yaml", "hosts:\n  - host: b\n")
    write(tmp_path / "a.yml", "hosts:\n  - host: a\n")
    write(tmp_path / "notes.txt", "not an inventory")
    assert [p.name for p in inventory_files(tmp_path)] == ["a.yml", "b.yaml"]
    assert inventory_files(tmp_path / "a.yml") == [tmp_path / "a.yml"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"empty: no \*\.yaml inventory files"):
        inventory_files(tmp_path / "empty")


def test_source_protocol(tmp_path):
    inv = write(tmp_path / "p.yaml", "hosts:\n  - host: h\n")
    source = InventorySource(inv)
    assert source.name == str(inv)
    assert [t.name for t in source.targets()] == ["h"]


def test_proxy_command_beside_proxy_jump(tmp_path):
    path = tmp_path / "pods.yaml"
    path.write_text(
        textwrap.dedent("""\
        defaults: {proxy_jump: jump@bastion}
        hosts:
          - {name: a, host: 10.0.0.1}
          - {name: b, host: 10.0.0.2, proxy_command: "ssh -W %h:%p other-bastion"}
          - {name: c, host: 10.0.0.3, proxy_jump: second}
        """)
    )
    a, b, c = load_inventory(path)
    assert (a.proxy_jump, a.proxy_command) == ("jump@bastion", None)
    # A host's own proxy replaces the default one, whichever kind
    assert (b.proxy_jump, b.proxy_command) == (None, "ssh -W %h:%p other-bastion")
    assert (c.proxy_jump, c.proxy_command) == ("second", None)
    path.write_text("hosts:\n  - {name: a, host: x, proxy_jump: j, proxy_command: 'nc %h %p'}\n")
    with pytest.raises(ConfigError, match=rf"^{path}:2: give proxy_jump or proxy_command, not both"):
        load_inventory(path)


@pytest.mark.parametrize(
    "content",
    [
        "[gpu]\nnode-1 ansible_host=10.0.0.1\n",
        "all:\n  children:\n    gpu:\n      hosts:\n        node-1:\n",
        "gpu:\n  hosts:\n    node-1:\n      ansible_host: 10.0.0.1\n",
    ],
)
def test_an_ansible_inventory_given_to_dash_i_says_which_option_reads_it(tmp_path, content):
    path = tmp_path / "hosts.yml"
    path.write_text(content)
    with pytest.raises(
        ConfigError, match=rf"^{path}: this looks like an Ansible inventory: use --ansible-inventory {path}$"
    ):
        load_inventory(path)


def test_identity_file_none_means_no_default_key_and_survives_export(tmp_path):
    from computefence.sources.export import export_yaml

    path = tmp_path / "pods.yaml"
    path.write_text(
        "defaults: {identity_file: none}\n"
        "hosts:\n  - {name: agent, host: 10.0.0.1}\n  - {name: keyed, host: 10.0.0.2, identity_file: [NONE, k]}\n"
        "  - {name: plain, host: 10.0.0.3, identity_file: k}\n"
    )
    targets = load_inventory(path)
    got = [(t.name, t.identity_files, t.default_identities) for t in targets]
    assert got == [
        ("agent", [], False),
        ("keyed", [str(tmp_path / "k")], False),
        ("plain", [str(tmp_path / "k")], True),
    ]
    again = tmp_path / "again.yaml"
    again.write_text(export_yaml(targets))
    assert [(t.name, t.identity_files, t.default_identities) for t in load_inventory(again)] == got
