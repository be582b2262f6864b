"""report merge: shard reports joined into one run; shards that cannot be one run are refused."""

from __future__ import annotations

import pytest

from computefence.cli import main
from computefence.errors import ConfigError
from computefence.evaluate import build_report
from computefence.evaluate.changes import compare_reports
from computefence.evaluate.merge import merge_reports
from computefence.models import Finding, HostReport, HostStatus, Severity, SourceStatus, Target
from computefence.sources.selection import parse_shard, select_shard, shard_of

BLOCK = Finding(check="storage.output-dir", severity=Severity.BLOCK, message="on the overlay", subject="/out")


def _shard(*names: str, blocked: tuple[str, ...] = (), source_ok: bool = True):
    hosts = [HostReport(name=n, status=HostStatus.OK, findings=[BLOCK] if n in blocked else []) for n in names]
    return build_report(
        hosts,
        kind="fleet",
        sources=[SourceStatus(name="pool.yaml", targets=5, ok=source_ok, error=None if source_ok else "boom")],
    )


def test_merged_shards_equal_one_run_over_all_pods():
    whole = _shard("a", "b", "c", "d", "e", blocked=("b", "e"))
    merged = merge_reports(
        [("1.json", _shard("c", "a")), ("2.json", _shard("e", "b", blocked=("b", "e"))), ("3.json", _shard("d"))]
    )
    assert [h.name for h in merged.hosts] == ["a", "b", "c", "d", "e"]
    assert merged.summary == whole.summary
    assert merged.sources == [SourceStatus(name="pool.yaml", targets=5)]


def test_a_source_that_failed_in_one_shard_failed_for_the_merged_run():
    merged = merge_reports([("1.json", _shard("a")), ("2.json", _shard("b", source_ok=False))])
    assert merged.sources == [SourceStatus(name="pool.yaml", targets=5, ok=False, error="boom")]
    assert merged.summary.verdict is Severity.BLOCK


def test_change_sections_are_joined_only_when_every_shard_has_one():
    one = _shard("a", blocked=("a",))
    one = one.model_copy(update={"changes": compare_reports(_shard("a"), one)})
    two = _shard("b").model_copy(update={"changes": compare_reports(_shard("b", "gone"), _shard("b"))})
    merged = merge_reports([("1.json", one), ("2.json", two)]).changes
    assert [c.host for c in merged.new] == ["a"] and merged.vanished == ["gone"]
    assert merge_reports([("1.json", one), ("2.json", _shard("b"))]).changes is None


def test_overlap_and_mismatched_shards_are_refused():
    with pytest.raises(ConfigError, match="pod 'a' is in both 1.json and 2.json"):
        merge_reports([("1.json", _shard("a")), ("2.json", _shard("b", "a"))])
    newer = _shard("b").model_copy(update={"schema_version": 99})
    with pytest.raises(ConfigError, match="2.json has schema_version 99 but 1.json has"):
        merge_reports([("1.json", _shard("a")), ("2.json", newer)])
    strict = _shard("b").model_copy(update={"fail_on": Severity.WARN})
    with pytest.raises(ConfigError, match="--fail-on warn but 1.json has block"):
        merge_reports([("1.json", _shard("a")), ("2.json", strict)])


def test_merge_cli_refuses_overlap_with_one_line_and_exit_2(tmp_path, capsys):
    for name, report in (("1.json", _shard("a")), ("2.json", _shard("a"))):
        (tmp_path / name).write_text(report.model_dump_json())
    assert (
        main(
            ["report", "merge", str(tmp_path / "1.json"), str(tmp_path / "2.json"), "-o", str(tmp_path / "fleet.json")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shards must not overlap" in err
    assert not (tmp_path / "fleet.json").exists()


def _target(name: str) -> Target:
    return Target(name=name, host="203.0.113.7")


def test_shards_split_the_targets_and_adding_pods_moves_none():
    names = [f"pod-{i:03d}" for i in range(300)]
    slices = [select_shard([_target(n) for n in names], i, 3) for i in (1, 2, 3)]
    assert sorted(t.name for s in slices for t in s) == names
    assert all(70 < len(s) < 130 for s in slices)  # a hash, not a fixed assignment: roughly even
    before = {n: shard_of(n, 3) for n in names}
    assert {n: shard_of(n, 3) for n in names + ["pod-new-1", "pod-new-2"] if n in before} == before


@pytest.mark.parametrize("text", ["0/3", "4/3", "1", "a/b", "1/0", "-1/3", "1/3/5"])
def test_bad_shard_specs_are_config_errors(text):
    with pytest.raises(ConfigError, match="expected I/N"):
        parse_shard(text)


def test_outliers_are_judged_across_all_shards():
    from computefence.models import Facts, TorchFacts

    def pod(name: str, torch: str) -> HostReport:
        return HostReport(
            name=name,
            status=HostStatus.OK,
            facts=Facts(torch=TorchFacts(importable=True, version=torch, cuda_build="12.4")),
        )

    shards = [
        (f"{i}.json", build_report([p], kind="fleet"))
        for i, p in enumerate([pod("a", "2.4.1"), pod("b", "2.4.1"), pod("odd", "2.5.0")])
    ]
    merged = merge_reports(shards)
    assert {h.name: [f.check for f in h.findings] for h in merged.hosts} == {"a": [], "b": [], "odd": ["env.outlier"]}
    assert merged.summary.warnings == 1
