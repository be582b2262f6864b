"""computefence.yaml on the command line: discovery, FILE:LINE errors before any connection,
`policy init` and `policy show`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from computefence.policy import find_policy, parse_policy_text

# Each bad policy, the line its error must name, and words the error must say.
BAD_POLICIES = [
    ("requirments:\n  torch: '>=2.4'\n", 1, "unknown key 'requirments' (did you mean 'requirements'?)"),
    ("requirements:\n  torch: '>=2.4'\n  transformers: '>=4.x'\n", 3, "'>=4.x' is not a PEP 440 specifier"),
    ("requirements:\n  python: 3.10\n", 2, "must be a quoted specifier"),
    (
        "hardware:\n  gpu_model: '*H100*'\n  gpu_cont: 8\n",
        3,
        "unknown key 'gpu_cont' in hardware (did you mean 'gpu_count'?)",
    ),
    ("hardware:\n  gpu_model: '[H100'\n", 2, "not a valid glob"),
    ("hardware:\n  gpu_count: lots\n", 2, "not a number or comparison"),
    ("thresholds:\n  disk_warn_gb: plenty\n", 2, "thresholds.disk_warn_gb"),
    ("severity:\n  storage.no-volum: block\n", 2, "did you mean 'storage.no-volume'?"),
    ("severity:\n  storage.no-volume: fatal\n", 2, "must be one of 'block', 'warn' or 'ignore'"),
    ("skip:\n  - gpu\n  - gpu.nope\n", 3, "'gpu.nope' names no check"),
    (
        "custom:\n  - id: wandb\n    run: wandb status\n    expect: {exit: 0, stdout_matches: '(['}\n",
        4,
        "not a valid regular expression",
    ),
    ("custom:\n  - id: a\n    run: x\n  - id: a\n    run: y\n", 2, "custom check id 'a' is used twice"),
    ("custom:\n  - id: Bad Id\n    run: x\n", 2, "is not a check id"),
    ("overrides:\n  - match: {}\n    hardware: {gpu_count: 8}\n", 2, "needs `tag` or `name`"),
    ("checks: {output_dir: /w, outptu: x}\n", 1, "unknown key 'outptu' in checks"),
    ("a: &x [1]\nb: *x\n", 1, "aliases"),
    ("requirements: {torch: '>=2'\n", 2, "not valid YAML"),
    ("torch: '>=2'\ntorch: '>=3'\n", 2, "'torch' is given twice"),
]


@pytest.mark.parametrize("text,line,words", BAD_POLICIES)
def test_every_policy_error_is_one_line_file_colon_line_and_exit_2_before_connecting(cli, tmp_path, text, line, words):
    policy = tmp_path / "computefence.yaml"
    policy.write_text(text)
    # An inventory of a pod that does not exist: the policy error must come first.
    inventory = tmp_path / "pods.yaml"
    inventory.write_text("hosts:\n  - {name: p, host: 192.0.2.1}\n")
    for argv in (
        ["fleet", "check", "-i", str(inventory), "--policy", str(policy), "--connect-timeout", "0.1"],
        ["doctor", "--policy", str(policy)],
        ["policy", "show", "--policy", str(policy)],
    ):
        code, out, err = cli(*argv)
        assert code == 2 and out == ""
        assert err.startswith(f"computefence: error: {policy}:{line}: ") and words in err, err
        assert err.count("\n") == 1


def test_discovery_walks_up_to_the_repository_root_and_no_further(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    deep = repo / "src" / "job"
    deep.mkdir(parents=True)
    (repo / ".git").mkdir()
    assert find_policy(deep) is None
    (tmp_path / "computefence.yaml").write_text("{}\n")  # above the repository: not found
    assert find_policy(deep) is None
    (repo / "computefence.yaml").write_text("{}\n")
    assert find_policy(deep) == repo / "computefence.yaml"
    (deep / "computefence.yaml").write_text("{}\n")
    assert find_policy(deep) == deep / "computefence.yaml"


def test_env_var_names_the_policy_and_no_policy_ignores_it(cli, tmp_path, monkeypatch):
    policy = tmp_path / "strict.yaml"
    policy.write_text("requirments: {}\n")
    monkeypatch.setenv("COMPUTEFENCE_POLICY", str(policy))
    code, _, err = cli("policy", "show")
    assert code == 2 and f"{policy}:1: unknown key" in err
    code, _, err = cli("doctor", "--no-policy", "--policy", str(policy))
    assert code == 2 and "--policy and --no-policy exclude each other" in err


def test_show_merges_overrides_per_target(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "computefence.yaml").write_text(
        textwrap.dedent("""\
        requirements: {transformers: ">=4.48"}
        hardware: {gpu_count: 1, gpu_model: "*H100*"}
        overrides:
          - match: {tag: train-8x}
            hardware: {gpu_count: 8}
            requirements: {flash-attn: "*"}
          - match: {name: "big-*"}
            severity: {env.drift: block}
        """)
    )
    inventory = tmp_path / "pods.yaml"
    inventory.write_text(
        "hosts:\n  - {name: small, host: 192.0.2.1}\n  - {name: big-1, host: 192.0.2.2, tags: [train-8x]}\n"
    )
    code, out, err = cli("policy", "show", "-i", str(inventory), "--format", "json")
    assert code == 0, err
    shown = {t["name"]: t["policy"] for t in json.loads(out)["targets"]}
    assert shown["small"]["hardware"] == {"gpu_model": "*H100*", "gpu_count": "1"}
    assert "severity" not in shown["small"]
    assert shown["big-1"]["hardware"] == {"gpu_model": "*H100*", "gpu_count": "8"}
    assert shown["big-1"]["requirements"] == {"transformers": ">=4.48", "flash-attn": "*"}
    assert shown["big-1"]["severity"] == {"env.drift": "block"}
    code, out, _ = cli("policy", "show")
    assert code == 0 and "# --- (any target)" in out and "gpu_count: '1'" in out


def test_the_readme_example_policy_loads():
    readme = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    section = readme[readme.index("# The job's policy") :]
    example = section[section.index("```yaml\n") + 8 : section.index("```\n", section.index("```yaml\n") + 8)]
    policy = parse_policy_text(example, "README.md")
    assert policy.requirement_specs()["flash-attn"].any_version
    assert policy.for_target("p", ["train-8x"]).hardware.gpu_count.text == "8"


def test_init_on_this_machine_writes_a_policy_that_this_machine_passes(cli, tmp_path, monkeypatch):
    import sys

    monkeypatch.chdir(tmp_path)
    code, _, err = cli("policy", "init", "--python", sys.executable)
    assert code == 0, err
    text = (tmp_path / "computefence.yaml").read_text()
    assert f'"python": ">={sys.version_info[0]}.{sys.version_info[1]}"' in text
    code, out, err = cli("doctor", "--python", sys.executable, "--only", "policy", "--format", "json")
    assert code == 0, out + err
    judged = json.loads(out)["hosts"][0]["findings"]
    assert judged and all(f["severity"] == "pass" for f in judged)


def test_the_policys_checks_fill_what_the_inventory_left_unset_and_never_override_it():
    from computefence.models import CheckOptions
    from computefence.run import merge_checks

    policy = parse_policy_text(
        textwrap.dedent("""\
        checks:
          output_dir: /workspace/policy-out
          dataset: /data/train.jsonl
          expect_gpu: true
          extra_paths: [/workspace/a, /workspace/b]
        """),
        "computefence.yaml",
    ).for_target("pod-a", [])
    given = CheckOptions(output_dir="/workspace/mine", extra_paths=["/workspace/b", "/workspace/c"])
    merged = merge_checks(given, policy)
    assert merged.output_dir == "/workspace/mine"
    assert merged.dataset == "/data/train.jsonl" and merged.expect_gpu is True
    assert merged.extra_paths == ["/workspace/b", "/workspace/c", "/workspace/a"]
    assert merged.accelerate_config is None and merged.perf is False
    assert (
        merge_checks(given, parse_policy_text("checks: {expect_gpu: false}\n", "p.yaml").for_target("x", [])) == given
    )
