import re

from sample_reports import HF_ADVICE, HF_COMMANDS, HOSTILE_FIX, OUTPUT_DIR_FIX

from computefence.render import render
from computefence.render.markdown import code_block, code_span, md


def _cells(row: str) -> list[str]:
    # GFM splits a table row on pipes that are not backslash-escaped.
    return re.split(r"(?<!\\)\|", row.strip().strip("|"))


def _tables(text: str) -> list[list[str]]:
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def test_fleet_markdown_has_summary_findings_drift_and_money(fleet_report):
    text = render(fleet_report, "markdown")
    assert text.startswith("## 🛑 ComputeFence fleet check: BLOCKED")
    summary = _tables(text)[0]
    assert [c.strip() for c in _cells(summary[0])] == [
        "Pod",
        "Provider",
        "GPUs",
        "torch / CUDA",
        "Status",
        "Blockers",
        "Warnings",
    ]
    assert len(summary) == 2 + 5
    pod_d = next(r for r in summary if r.startswith("| pod-d"))
    assert [c.strip() for c in _cells(pod_d)][-3:] == ["unreachable", "-", "-"]
    assert "**storage.output-dir** (2 pods)" in text and "Pods: pod-a, pod-b" in text
    assert f"```sh\n{OUTPUT_DIR_FIX}\n```" in text
    assert "### Version drift" in text and "### Pods not checked" in text
    # $ is escaped so GitHub does not render "$7.47/h ... $7.47/h" as math
    assert "3 blocked or unchecked pods burn \\$7.47/h" in text
    assert "<details><summary>Per-pod details</summary>" in text and text.count("</details>") == 1


def test_doctor_markdown_lists_every_check_and_the_fixes(doctor_report):
    text = render(doctor_report, "markdown")
    table = _tables(text)[0]
    assert len(table) == 2 + 6
    assert "| 🛑 block | `storage.output-dir` |" in text
    assert "### Fixes" in text and f"```sh\n{OUTPUT_DIR_FIX}\n```" in text


def test_hostile_strings_cannot_break_tables_html_or_fences(hostile_report):
    text = render(hostile_report, "markdown")
    for table in _tables(text):
        widths = {len(_cells(row)) for row in table}
        assert len(widths) == 1, table
    outside_code = re.sub(r"(`{3,})sh\n.*?\n\1", "", text, flags=re.S)
    outside_code = re.sub(r"(`+)[^`].*?\1(?!`)", "", outside_code)  # and code spans
    assert "<b>" in text and "<b>" not in outside_code  # literal only inside a code block
    assert "<script>" not in text and "<i>" not in text
    assert text.count("</details>") == 1  # only ours
    assert "\x1b" not in text and "\x07" not in text
    # the fix with ``` inside sits in a longer fence, intact
    assert f"````sh\n{HOSTILE_FIX}\n````" in text
    assert "\\[link\\](http://x) \\*bold\\*" in text


def test_escaping_helpers():
    assert md("a|b<c>&*d*\nnext") == "a\\|b&lt;c&gt;&amp;\\*d\\*<br>next"
    assert code_span("a`b|c") == "``a`b\\|c``"
    assert code_block("x ```` y").startswith("`````sh\n")


def test_only_commands_go_in_code_blocks_and_advice_is_a_note(doctor_report):
    text = render(doctor_report, "markdown")
    blocks = re.findall(r"```sh\n(.*?)\n```", text, flags=re.S)
    assert "\n".join(HF_COMMANDS) in blocks
    assert not any(HF_ADVICE in block for block in blocks)
    assert f"*Note:* {md(HF_ADVICE)}" in text
    assert "| ⏭️ skip | `gpu.driver` |" in text


def test_group_by_pod_gives_each_pod_one_block_of_commands_in_order(fleet_report):
    text = render(fleet_report, "markdown", group_by="pod")
    assert "### Findings across pods" not in text and "### Pods" in text
    pod_a = text[text.index("#### pod-a: blocked") : text.index("#### pod-b")]
    assert pod_a.count("```sh") == 1
    assert f"```sh\n{OUTPUT_DIR_FIX}\n" + "\n".join(HF_COMMANDS) + "\n```" in pod_a
    assert f"*Note:* {md(HF_ADVICE)}" in pod_a
    assert "#### pod-d: unreachable" in text and "#### pod-e" not in text
    assert "Ready: pod-e" in text
