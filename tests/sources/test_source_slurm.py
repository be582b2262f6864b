"""The Slurm source: hostlists expanded as Slurm expands them, nodes read from sinfo's answers."""

from __future__ import annotations

import json
import subprocess

import pytest

from computefence.errors import ConfigError, SourceError
from computefence.sources.slurm import (
    MAX_HOSTS,
    SlurmSource,
    expand_hostlist,
    gres_gpu_count,
    node_target,
    nodes_from_format,
    nodes_from_json,
)

EXPANSIONS = {
    "n[1-4,7]": ["n1", "n2", "n3", "n4", "n7"],
    "n[01-10]": [f"n{i:02d}" for i in range(1, 11)],
    "a[1-2]b[3-4]": ["a1b3", "a1b4", "a2b3", "a2b4"],
    "n1,n[3-4],x": ["n1", "n3", "n4", "x"],
    "n[1,1]": ["n1", "n1"],
    "n[001-3]": ["n001", "n002", "n003"],
    "n[9-11]": ["n9", "n10", "n11"],
    "n[1-3,5-6]x[1-2]": ["n1x1", "n1x2", "n2x1", "n2x2", "n3x1", "n3x2", "n5x1", "n5x2", "n6x1", "n6x2"],
    "[1-2]": ["1", "2"],
    "n1,,n2": ["n1", "n2"],
    " n1 ": ["n1"],
    "n[1-3],n2": ["n1", "n2", "n3", "n2"],
    "n[1-2][3-4]": ["n13", "n14", "n23", "n24"],
    "n[1-]": ["n1"],
    "n[2-02]": ["n2"],
    "n1 n2": ["n1", "n2"],
    "gpu-a100-[08-11]": ["gpu-a100-08", "gpu-a100-09", "gpu-a100-10", "gpu-a100-11"],
}
REFUSED = ["n[5-1]", "n[]", "n[1-2]-ib", "n[1-2]b", "n[a-b]", "n[1-2]]", "n[[1-2]]", "n[1--2]", "n[-2]", "n[1-2"]


@pytest.mark.parametrize("expression", EXPANSIONS)
def test_hostlist_expands_as_slurm_does(expression):
    assert expand_hostlist(expression) == EXPANSIONS[expression]


@pytest.mark.parametrize("expression", REFUSED)
def test_hostlist_slurm_refuses_is_a_config_error(expression):
    with pytest.raises(ConfigError, match="hostlist"):
        expand_hostlist(expression)


def test_hostlist_is_bounded():
    with pytest.raises(ConfigError, match="too many hosts"):
        expand_hostlist("n[1-100000]")
    with pytest.raises(ConfigError, match=f"more than {MAX_HOSTS}"):
        expand_hostlist("n[1-300]x[1-300]")


@pytest.mark.slurm
def test_hostlists_match_scontrol_show_hostnames(tmp_path, slurm_tools):
    """The same lists through Slurm's own hostlist.c (`scontrol show hostnames`)."""
    # scontrol reads a configuration before it parses anything; it contacts no controller here.
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=hostlists\nSlurmctldHost=localhost\nNodeName=n1\nPartitionName=p Nodes=n1\n")
    env = {"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"}
    for expression in [*EXPANSIONS, *REFUSED]:
        if expression == "n[1-2":
            continue  # 22.05 prints `n]` for it; we refuse an unclosed bracket instead
        done = subprocess.run(
            ["scontrol", "show", "hostnames", expression], env=env, capture_output=True, text=True, timeout=30
        )
        theirs = done.stdout.split() if "Invalid hostlist" not in done.stdout + done.stderr else None
        try:
            ours: list[str] | None = expand_hostlist(expression)
        except ConfigError:
            ours = None
        assert ours == theirs, expression


def test_gres_gpu_counts():
    assert gres_gpu_count("gpu:4") == 4
    assert gres_gpu_count("gpu:a100:2(S:0-1)") == 2
    assert gres_gpu_count("gpu:a100:2(S:0-1),gpu:h100:1") == 3
    assert gres_gpu_count("nic:1,gpu:8") == 8
    assert gres_gpu_count("(null)") == 0
    assert gres_gpu_count("") == 0
    assert gres_gpu_count("mps:100") == 0


# What sinfo --json printed on Debian's slurm-wlm 22.05.8 (trimmed to the fields read).
SINFO_22_05 = [
    {"name": "n1", "state": "idle", "state_flags": [], "reason": "", "partitions": ["gpu", "debug"], "cpus": 2, "gres": "gpu:1"},
    {"name": "n3", "state": "idle", "state_flags": ["DRAIN"], "reason": "admin: bad fan", "partitions": ["gpu"], "cpus": 2, "gres": "gpu:2"},
    {"name": "n4", "state": "down", "state_flags": ["NOT_RESPONDING"], "reason": "Not responding", "partitions": ["gpu"], "cpus": 8, "gres": "(null)"},
]  # fmt: skip


def test_nodes_from_sinfo_json_22_05():
    nodes = {n.name: n for n in nodes_from_json(SINFO_22_05)}
    assert nodes["n1"].state_text == "idle" and not nodes["n1"].unusable
    assert nodes["n1"].partitions == ("gpu", "debug") and nodes["n1"].gres_gpus == 1
    assert nodes["n3"].state_text == "idle+drain" and nodes["n3"].unusable and nodes["n3"].reason == "admin: bad fan"
    assert nodes["n4"].unusable and nodes["n4"].gres_gpus == 0 and nodes["n4"].cpus == 8


def test_nodes_from_scontrol_json_23_02_shape():
    entry = {
        "name": "g1",
        "state": ["MIXED", "DRAIN"],
        "reason": "x",
        "partitions": ["a"],
        "cpus": 64,
        "gres": "gpu:h100:8(S:0-1)",
    }
    (node,) = nodes_from_json([entry])
    assert node.state_text == "mixed+drain" and node.unusable and node.gres_gpus == 8


def test_nodes_from_sinfo_format_join_partitions_and_read_star_as_not_responding():
    text = "n1|idle|gpu*|2|gpu:1|none\nn1|idle|debug|2|gpu:1|none\nn2|down*|gpu*|4|gpu:4|Not responding\n"
    nodes = {n.name: n for n in nodes_from_format(text)}
    assert nodes["n1"].partitions == ("gpu", "debug") and nodes["n1"].reason == "" and not nodes["n1"].unusable
    assert nodes["n2"].unusable and "not_responding" in nodes["n2"].flags and nodes["n2"].gres_gpus == 4


@pytest.mark.parametrize("name", ["-oProxyCommand=x", "a b", "n[1-2]", "", None, 7])
def test_a_node_name_that_is_no_node_name_is_refused(name):
    with pytest.raises(SourceError, match="no Slurm node name"):
        nodes_from_json([{"name": name, "state": "idle"}])


def test_a_listing_that_is_not_nodes_is_refused():
    with pytest.raises(SourceError):
        nodes_from_json([json.loads('"n1"')])
    with pytest.raises(SourceError, match="6 fields"):
        nodes_from_format("n1|idle\n")


def test_a_drained_node_is_a_target_not_checked_with_state_and_reason():
    (node,) = nodes_from_json(SINFO_22_05[1:2])
    target = node_target(node)
    assert target.name == "n3" and target.tags == ["gpu"]
    assert target.provider is not None and target.provider.gpu_count == 2 and target.provider.state == "idle+drain"
    assert target.unreachable_reason == "Slurm has it idle+drain (admin: bad fan)"
    assert target.unreachable_fix is not None and target.unreachable_fix.commands == ["sinfo -R --nodes n3"]


def fake_sinfo(tmp_path, monkeypatch, body: str) -> None:
    """A `sinfo` first on PATH that does what `body` (sh) says: a broken or hostile cluster."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\n" + body + "\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("echo 'not json'", "sinfo --json printed something that is not JSON"),
        ('echo \'{"nodes": [{"name": "-oProxyCommand=x"}]}\'', "no Slurm node name"),
        ("echo 'slurm_load_partitions: Unable to contact slurm controller' >&2; exit 1", "Unable to contact slurm"),
        ("echo '{\"meta\": {}}'", "sinfo --json printed no node list"),
    ],
)
def test_a_broken_sinfo_is_one_line(tmp_path, monkeypatch, body, error):
    fake_sinfo(tmp_path, monkeypatch, body)
    with pytest.raises(SourceError, match=error):
        SlurmSource().targets()


def test_a_hung_sinfo_is_bounded(tmp_path, monkeypatch):
    fake_sinfo(tmp_path, monkeypatch, "exec sleep 60")
    with pytest.raises(SourceError, match="gave no answer within 0.5s"):
        SlurmSource(timeout=0.5).targets()


def test_fleet_check_with_an_unreachable_controller_exits_2_in_one_line(cli, tmp_path, monkeypatch):
    fake_sinfo(
        tmp_path,
        monkeypatch,
        "echo 'slurm_load_partitions: Unable to contact slurm controller (connect failure)' >&2; exit 1",
    )
    code, out, err = cli("fleet", "check", "--slurm")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "computefence: error: every target source failed, nothing to check: sinfo --json failed (exit status 1): "
        "slurm_load_partitions: Unable to contact slurm controller (connect failure)"
    ]


def test_no_sinfo_on_path_is_a_usage_error(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = cli("fleet", "check", "--slurm")
    assert code == 2 and "`sinfo` is not on PATH; run on a login node" in err


@pytest.mark.parametrize("stream", ["", ">&2"])
def test_a_flooding_sinfo_is_stopped_at_the_cap(tmp_path, monkeypatch, stream):
    import computefence.sources.slurm as slurm_source

    monkeypatch.setattr(slurm_source, "MAX_LISTING_BYTES", 100_000)
    fake_sinfo(tmp_path, monkeypatch, f"exec yes nodes {stream}")
    with pytest.raises(SourceError, match="printed over 100000 bytes"):
        SlurmSource(timeout=20).targets()


def test_a_flooding_scontrol_fails_that_call_with_one_line(tmp_path, monkeypatch):
    import computefence.operations.slurm_nodes as slurm_nodes

    monkeypatch.setattr(slurm_nodes, "SCONTROL_MAX_BYTES", 100_000)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nexec yes updated\n")
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert slurm_nodes.Scontrol(timeout=20).run(["scontrol", "update", "NodeName=n1", "State=DRAIN"]) == (
        False,
        "scontrol printed over 100,000 bytes",
    )
