import re
from datetime import datetime

import pytest
from sample_reports import HOSTILE_NAME

from computefence.errors import ConfigError
from computefence.render import FORMATS, render

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"(,|$)')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], value)


def parse(text: str):
    """A strict reader of the text exposition format: every family has HELP then TYPE
    before its samples, label sets parse completely, values are numbers."""
    families, samples, current = {}, [], None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in families, f"family {name} declared twice"
            families[name] = None
            current = name
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name == current and kind == "gauge"
            families[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"bad sample line: {line!r}"
            assert m.group(1) == current, f"sample {m.group(1)} outside its family"
            labels = {}
            body = m.group(3) or ""
            pos = 0
            while pos < len(body):
                lm = _LABEL.match(body, pos)
                assert lm, f"bad labels: {body!r}"
                labels[lm.group(1)] = _unescape(lm.group(2))
                pos = lm.end()
            samples.append((m.group(1), labels, float(m.group(4))))
    return families, samples


def _value(samples, name, **labels):
    (value,) = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
    return value


def test_fleet_metrics(fleet_report):
    families, samples = parse(render(fleet_report, "prometheus"))
    assert {
        "computefence_host_up",
        "computefence_findings",
        "computefence_blockers",
        "computefence_verdict",
        "computefence_cost_per_hour_at_risk_dollars",
        "computefence_last_run_timestamp_seconds",
    } <= set(families)
    assert _value(samples, "computefence_host_up", host="pod-a") == 1
    assert _value(samples, "computefence_host_up", host="pod-d", status="unreachable") == 0
    assert _value(samples, "computefence_findings", host="pod-a", check="storage.output-dir", severity="block") == 1
    assert _value(samples, "computefence_findings", host="pod-a", check="storage.output-dir", severity="warn") == 0
    assert _value(samples, "computefence_blockers", host="pod-c") == 1
    assert _value(samples, "computefence_warnings", host="pod-a") == 1
    assert _value(samples, "computefence_cost_per_hour_at_risk_dollars") == 7.47
    assert _value(samples, "computefence_hosts", state="not_checked") == 1
    assert _value(samples, "computefence_verdict") == 2
    assert (
        _value(samples, "computefence_last_run_timestamp_seconds")
        == datetime.fromisoformat("2025-06-01T12:00:00+00:00").timestamp()
    )
    # an unreachable pod has no blocker count (it was not checked), only host_up 0
    assert not [s for s in samples if s[0] == "computefence_blockers" and s[1]["host"] == "pod-d"]


def test_hostile_label_values_are_escaped(hostile_report):
    _families, samples = parse(render(hostile_report, "prometheus"))
    names = {l["host"] for n, l, _ in samples if n == "computefence_host_up"}
    assert names == {HOSTILE_NAME.replace("\x1b", "?"), "down|<i>"}


def test_no_cost_metric_without_prices(doctor_report):
    families, _ = parse(render(doctor_report, "prometheus"))
    assert "computefence_cost_per_hour_at_risk_dollars" not in families


def test_unknown_format_is_a_config_error(doctor_report):
    assert set(FORMATS) == {"rich", "json", "junit", "markdown", "prometheus", "html"}
    with pytest.raises(ConfigError, match="unknown format 'yaml'"):
        render(doctor_report, "yaml")
