"""One count of a dataset's rows in the header and the finding, whole messages, right plurals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "train.jsonl"
    rows = [json.dumps({"text": f"x{i}", "label": i % 2}) for i in range(1000)]
    path.write_text("\n".join(rows) + "\n{bad json\n")
    return path


def _cli(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "computefence", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    return done.stdout


def test_header_and_finding_count_the_same_rows_and_the_message_ends_whole(tmp_path):
    out = _cli("dataset", "check", str(_file(tmp_path)), "--input-column", "text", "--label-column", "label")

    assert "· 1,001 rows (1 unreadable) ·" in out
    assert "1 of 1,001 rows" in out
    assert "pandas and datasets stop at the first unreadable row" in out
    assert "pip install computefence" not in out  # PyPI's computefence is another project


def test_dedupe_says_one_row_in_the_singular(tmp_path):
    out = _cli("dataset", "dedupe", str(_file(tmp_path)), str(tmp_path / "out.jsonl"))

    assert out.endswith("removed 1 unreadable row\n")
