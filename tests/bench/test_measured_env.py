"""The benchmarks run the tools they time as an installed tool runs: bytecode caching on."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from fleet_bench import user_env


def test_user_env_turns_bytecode_caching_back_on_and_keeps_the_rest():
    env = {"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp/run", "PATH": "/usr/bin"}

    assert user_env(env) == {"HOME": "/tmp/run", "PATH": "/usr/bin"}
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # the caller's mapping is left as it was


def test_user_env_defaults_to_this_process_environment(monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("COMPUTEFENCE_BENCH_MARK", "kept")

    env = user_env()

    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["COMPUTEFENCE_BENCH_MARK"] == "kept"
