"""The wheel, installed non-editable into a fresh venv, is complete and runs `doctor`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from computefence.models import Report

ROOT = Path(__file__).resolve().parents[1]
# The installed venv must import its own wheel, whatever PYTHONPATH the test run was given.
VENV_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built with build isolation, as `pip install .` builds it for a user.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        timeout=180,
    )
    (wheel,) = out.glob("computefence-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A venv that sees this interpreter's dependencies but has its own computefence."""
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, system_site_packages=True, with_pip=False, symlinks=True)
    python = env / "bin" / "python"
    # The venv's python runs the system pip (visible through system site-packages), so the
    # console script gets the venv's interpreter; --ignore-installed because this
    # checkout's editable computefence is visible too.
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--ignore-installed", str(wheel)],
        check=True,
        timeout=120,
    )
    purelib = _purelib(env)
    assert (purelib / "computefence").is_dir()
    return env


@pytest.mark.network
def test_wheel_holds_only_the_computefence_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top - {"computefence"} == {name.split("/", 1)[0] for name in names if ".dist-info/" in name}
    assert len(top) == 2
    assert "computefence/probe/core.py" in names
    # The HTML report's template, style and script travel with the renderer.
    assert {"report.html.j2", "base.html.j2", "page.css", "page.js"} <= {
        n.rsplit("/", 1)[1] for n in names if n.startswith("computefence/render/templates/")
    }
    profiles = {n for n in names if n.startswith("computefence/_providers/") and n.endswith(".yaml")}
    assert {
        "computefence/_providers/runpod.yaml",
        "computefence/_providers/vast.yaml",
        "computefence/_providers/lambda.yaml",
        "computefence/_providers/generic.yaml",
    } <= profiles


@pytest.mark.network
def test_installed_wheel_adds_no_generic_top_level_names(installed):
    purelib = _purelib(installed)
    assert not (purelib / "providers").exists()
    assert not (purelib / "inventory").exists()
    assert (purelib / "computefence" / "probe" / "core.py").is_file()
    # Every provider profile of the checkout travels, whatever profiles are added.
    shipped = sorted(p.name for p in (purelib / "computefence" / "_providers").glob("*.yaml"))
    assert shipped == sorted(p.name for p in (ROOT / "providers").glob("*.yaml"))
    assert {"generic.yaml", "lambda.yaml", "runpod.yaml", "slurm.yaml", "vast.yaml"} <= set(shipped)


@pytest.mark.network
def test_installed_doctor_runs_from_the_wheel(installed, tmp_path):
    python = installed / "bin" / "python"
    # The venv's own computefence is the one imported, not this checkout's editable one.
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import computefence, computefence.evaluate.profiles as p; print(computefence.__file__); print(p.profiles_dir())",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=VENV_ENV,
    ).stdout.split()
    purelib = _purelib(installed).resolve()
    assert Path(where[0]).resolve().is_relative_to(purelib)
    assert Path(where[1]).resolve() == purelib / "computefence" / "_providers"

    script = installed / "bin" / "computefence"
    result = subprocess.run(
        [str(script), "doctor", "--format", "json", "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=VENV_ENV,
    )
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    report = Report.model_validate_json(result.stdout)
    assert report.kind == "doctor" and len(report.hosts) == 1
    assert report.hosts[0].facts is not None
    assert json.loads(result.stdout)["schema_version"] == report.schema_version


@pytest.mark.network
def test_installed_wheel_runs_the_readme_demo(installed, tmp_path):
    result = subprocess.run(
        [str(installed / "bin" / "computefence"), "fleet", "check", "--demo", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**VENV_ENV, "XDG_CONFIG_HOME": str(tmp_path / "config")},
    )
    # The demo fleet has blocked pods on purpose: exit 1, with a full report.
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    report = Report.model_validate_json(result.stdout)
    assert {h.status.value for h in report.hosts} == {"ok", "unreachable"}
    assert report.summary.blockers > 0


def _purelib(env: Path) -> Path:
    out = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        env=VENV_ENV,
    )
    return Path(out.stdout.strip())


def test_ci_runs_exactly_the_documented_test_command():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("To run the tests", 1)[1]
    readme_command = section.split("```sh\n", 1)[1].split("\n```", 1)[0].strip()
    development = (ROOT / "docs" / "development.md").read_text().split("## Run the tests", 1)[1]
    assert readme_command == development.split("```sh\n", 1)[1].split("\n```", 1)[0].strip()
    ci_lines = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    assert ci_lines[-1] == readme_command
    assert "set -euo pipefail" in ci_lines
