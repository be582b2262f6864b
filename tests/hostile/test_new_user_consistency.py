"""What a new user found contradictory in one report (#25, class 7): a warning suggesting a torch
build that the pod's own blocker says cannot run there, and one pod's script installing the same
package twice with two interpreters."""

from __future__ import annotations

import json
import shlex
from collections import Counter

import pytest
from packaging.requirements import Requirement

from computefence.cli import main


def _pip_lines(command: str) -> list[tuple[str, str]]:
    """(interpreter, package) for each package a pasted `... -m pip install|uninstall ...` names."""
    found = []
    for part in command.split("&&"):
        words = shlex.split(part)
        if len(words) > 3 and words[1:3] == ["-m", "pip"] and words[3] in ("install", "uninstall"):
            args = [w for i, w in enumerate(words[4:], 4) if not w.startswith("-") and words[i - 1] != "--index-url"]
            found += [(words[0], Requirement(arg).name.lower()) for arg in args]
    return found


@pytest.fixture(scope="module")
def demo_report_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "r.json"
    assert main(["fleet", "check", "--demo", "--no-policy", "--format", "json", "-o", str(out)]) == 1
    return out


@pytest.fixture(scope="module")
def demo_report(demo_report_file):
    return {h["name"]: h for h in json.loads(demo_report_file.read_text())["hosts"]}


def _problems(host: dict) -> list[dict]:
    return [f for f in host["findings"] if f["severity"] in ("warn", "block")]


def test_no_demo_pod_installs_a_package_twice_or_with_two_interpreters(demo_report):
    for name, host in demo_report.items():
        pip = [line for f in _problems(host) for step in f.get("fix_steps", []) for line in _pip_lines(step["run"])]
        # An uninstall and its install of one build are one fix: count the findings that touch each package.
        per_package = Counter(
            package
            for f in _problems(host)
            for package in {p for step in f.get("fix_steps", []) for _, p in _pip_lines(step["run"])}
        )
        assert [p for p, n in per_package.items() if n > 1] == [], name
        assert len({python for python, _ in pip}) <= 1, (name, pip)


def test_the_cpu_torch_pods_one_torch_fix_is_its_blocker_and_the_outlier_points_there(demo_report):
    host = demo_report["pod-cpu-torch"]
    [outlier] = [f for f in host["findings"] if f["check"] == "env.outlier"]
    assert outlier["fix_steps"] == []
    assert "gpu.torch-cpu-build's fix already installs torch" in outlier["fix_advice"]
    [blocker] = [f for f in host["findings"] if f["check"] == "gpu.torch-cpu-build"]
    # The interpreter the probe found for the job (its python3 resolves to pyenv's).
    assert blocker["fix_steps"][0]["run"].startswith("/root/.pyenv/versions/3.11.7/bin/python3 -m pip uninstall")


def test_the_old_driver_pod_is_never_told_to_install_a_build_its_driver_cannot_run(demo_report):
    host = demo_report["pod-old-driver"]
    [blocker] = [f for f in host["findings"] if f["check"] == "gpu.driver-too-old"]
    assert "no published PyTorch CUDA build runs on this driver" in blocker["fix_advice"]
    [outlier] = [f for f in host["findings"] if f["check"] == "env.outlier"]
    assert outlier["fix_steps"] == [] and "pip" not in json.dumps(outlier)
    assert "cannot run here: this driver runs builds up to CUDA 11.4 only" in outlier["fix_advice"]
    assert "no command on this pod helps (see gpu.driver-too-old)" in outlier["fix_advice"]


# ---------------------------------------------------------------- PEP 440 specifiers in requirements

# packaging's SpecifierSet reads ">=2.4,," as ">=2.4"; pip refuses it, and so must the policy.
BAD_SPECIFIERS = [">=2.4,,", ",>=2.4", ">=2.4, ,<2.7", "=>2", ">=2.4 <2.7", "torch>=2", ">=2.4;"]
# Each place a policy file gives requirements, with the line the specifier is on.
PLACES = [
    ("requirements:\n  numpy: '*'\n  torch: {spec}\n", 3, "requirements.torch"),
    ("requirements: {{numpy: '*', torch: {spec}}}\n", 1, "requirements.torch"),
    (
        "requirements: {{numpy: '*'}}\noverrides:\n  - match: {{name: pod-*}}\n    requirements:\n      torch: {spec}\n",
        5,
        "overrides.0.requirements.torch",
    ),
]


@pytest.mark.parametrize("spec", BAD_SPECIFIERS)
@pytest.mark.parametrize(("text", "line", "where"), PLACES, ids=["block", "flow", "override"])
def test_an_invalid_specifier_is_file_colon_line_and_exit_2(
    tmp_path, capsys, demo_report_file, spec, text, line, where
):
    policy = tmp_path / "computefence.yaml"
    policy.write_text(text.format(spec=json.dumps(spec)))
    capsys.readouterr()
    for argv in (
        ["policy", "show", "--policy", str(policy)],
        ["fleet", "check", "--demo", "--policy", str(policy)],
        ["doctor", "--policy", str(policy)],
        ["report", "show", str(demo_report_file), "--policy", str(policy)],
    ):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, (argv, err)
        assert err.startswith(f"computefence: error: {policy}:{line}: {where}: {spec!r} is not a PEP 440"), err
