"""Policies over saved reports: `policy init --from report.json` and `report --policy`."""

from __future__ import annotations

from evaluate_builders import runpod_pod

from computefence.evaluate import build_report, evaluate_host
from computefence.models import CheckOptions, HostReport, HostStatus, Report
from computefence.policy import parse_policy_text


def test_init_from_a_saved_report_writes_a_commented_policy_that_holds_there(cli, tmp_path, monkeypatch):
    facts = runpod_pod()
    report = build_report([HostReport(name="good-pod", status=HostStatus.OK, facts=facts)], kind="fleet")
    saved = tmp_path / "report.json"
    saved.write_text(report.model_dump_json())
    out_file = tmp_path / "computefence.yaml"
    code, _, err = cli("policy", "init", "--from", str(saved), "-o", str(out_file))
    assert code == 0, err
    text = out_file.read_text()
    assert text.startswith("# computefence.yaml") and "# custom:" in text
    policy = parse_policy_text(text, "computefence.yaml").for_target("good-pod", [])
    assert policy.requirements["transformers"] == ">=4.44.2" and policy.requirements["torch-cuda"] == ">=12.4"
    findings = evaluate_host(facts, CheckOptions(), policy=policy)
    judged = [f for f in findings if f.check.startswith("policy.")]
    assert judged and all(f.severity.value == "pass" for f in judged), judged
    code, _, err = cli("policy", "init", "--from", str(saved), "-o", str(out_file))
    assert code == 2 and "exists; use --force" in err


def test_report_reapplies_a_policy_to_saved_facts(cli, tmp_path):
    report = build_report([HostReport(name="p", status=HostStatus.OK, facts=runpod_pod())], kind="fleet")
    saved = tmp_path / "report.json"
    saved.write_text(report.model_dump_json())
    policy = tmp_path / "computefence.yaml"
    policy.write_text("requirements: {transformers: '>=4.48'}\n")
    code, out, err = cli("report", str(saved), "--policy", str(policy), "--format", "json")
    assert code == 1, err
    again = Report.model_validate_json(out)
    assert again.policy is not None and again.policy.path == str(policy) and len(again.policy.sha256) == 64
    [finding] = [f for f in again.hosts[0].findings if f.check == "policy.requirement"]
    assert finding.message == "transformers 4.44.2 does not satisfy >=4.48"


def test_report_sizes_a_saved_pod_against_a_policys_job(cli, tmp_path):
    from evaluate_builders import GB, mount, path

    facts = runpod_pod(volume_free=180 * GB)
    out = path("output_dir", "/workspace/ckpt", mount("/workspace", "ext4", "/dev/sdb"), free=180 * GB)
    facts = facts.model_copy(
        update={"storage": facts.storage.model_copy(update={"paths": [*facts.storage.paths, out]})}
    )
    report = build_report([HostReport(name="p", status=HostStatus.OK, facts=facts)], kind="fleet")
    saved = tmp_path / "report.json"
    saved.write_text(report.model_dump_json())
    policy = tmp_path / "computefence.yaml"
    policy.write_text("job: {params: 8B, save_total_limit: 3, max_steps: 6000}\n")
    code, out_text, err = cli("report", str(saved), "--policy", str(policy), "--format", "json")
    assert code == 1, err
    (budget,) = [f for f in Report.model_validate_json(out_text).hosts[0].findings if f.check == "storage.budget"]
    # The saved output dir's free space against 4 × 96 GB + 32 GB.
    assert budget.severity.value == "block" and budget.message.startswith("needs 4 × 96.0 GB checkpoints + 32.0 GB")
    assert budget.message.endswith("180 GB free on /workspace")
