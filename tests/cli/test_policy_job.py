"""The `job:` section of computefence.yaml: every key of issue #23 and of `fleet watch` loads,
and every bad value is one `FILE:LINE: job.KEY: ...` error."""

from __future__ import annotations

import json
import textwrap

import pytest

from computefence.errors import ConfigError
from computefence.policy import parse_policy_text

FULL_JOB = textwrap.dedent("""\
    job:
      model: meta-llama/Llama-3.1-8B
      params: 8.03e9
      method: lora
      precision: bf16
      optimizer: adamw-8bit
      sharding: zero3
      save_total_limit: 3
      save_steps: 500
      max_steps: 6000
      save_only_model: false
      lora: {r: 16, target_modules: [q_proj, k_proj, v_proj, o_proj]}
      cache_dir: /workspace/hf/hub
      from: /workspace/axolotl.yaml
      num_labels: 3
      process: 'python.* train\\.py'
      log: /workspace/train.log
      loss_regex: "'loss': ([0-9.]+)"
    """)


def test_every_key_of_the_issue_and_of_fleet_watch_loads():
    job = parse_policy_text(FULL_JOB, "computefence.yaml").job
    assert job is not None
    assert (job.model, job.params, job.method, job.optimizer, job.sharding) == (
        "meta-llama/Llama-3.1-8B",
        8_030_000_000,
        "lora",
        "adamw-8bit",
        "zero3",
    )
    assert (job.save_total_limit, job.save_steps, job.max_steps, job.checkpoints_written) == (3, 500, 6000, 12)
    assert (
        job.lora is not None
        and job.lora.r == 16
        and job.lora.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    assert (job.from_, job.cache_dir, job.num_labels, job.log) == (
        "/workspace/axolotl.yaml",
        "/workspace/hf/hub",
        3,
        "/workspace/train.log",
    )
    assert job.process == "python.* train\\.py" and job.loss_regex == "'loss': ([0-9.]+)"


@pytest.mark.parametrize(
    "written,count",
    [("8B", 8_000_000_000), ("8.03e9", 8_030_000_000), ("350M", 350_000_000), ("1.5t", 1_500_000_000_000),
     ("7_241_732_096", 7_241_732_096), (8030261248, 8030261248), (7.5e9, 7_500_000_000)],
)  # fmt: skip
def test_params_reads_counts_as_people_write_them(written, count):
    text = f"job: {{params: {json.dumps(written) if isinstance(written, str) else written}}}"
    assert parse_policy_text(text, "computefence.yaml").job.params == count


def test_defaults_are_hf_trainers():
    job = parse_policy_text("job: {model: gpt2}", "computefence.yaml").job
    # save_total_limit None keeps every checkpoint, as Trainer does when it is not set.
    assert (job.method, job.precision, job.optimizer, job.sharding) == ("full", "bf16", "adamw", "none")
    assert (job.save_total_limit, job.save_steps, job.max_steps, job.checkpoints_written) == (None, 500, None, None)
    assert parse_policy_text("job: {lora: {}}", "c").job.lora.r == 8  # PEFT's default rank


# Each bad job section, the line its error must name, and words the error must say.
BAD_JOBS = [
    ("job:\n  modle: gpt2\n", 2, "unknown key 'modle' in job (did you mean 'model'?)"),
    ("job:\n  model: gpt2\n  fromm: a.yaml\n", 3, "unknown key 'fromm' in job (did you mean 'from'?)"),
    ("job:\n  lora: {rank: 8}\n", 2, "unknown key 'rank' in job.lora"),
    ("job:\n  model: meta llama/8B\n", 2, "job.model: 'meta llama/8B' is neither a Hugging Face repo id"),
    ("job:\n  model: a--b/c\n", 2, "neither a Hugging Face repo id"),
    ("job:\n  model: -rf\n", 2, "neither a Hugging Face repo id"),
    ("job:\n  params: lots\n", 2, "job.params: 'lots' is not a parameter count"),
    ("job:\n  params: 0\n", 2, "job.params: 0 is not a parameter count between 1 and 1e15"),
    ("job:\n  params: .nan\n", 2, "job.params: nan is not a parameter count"),
    ("job:\n  params: yes\n", 2, "job.params: must be a parameter count"),
    ("job:\n  params: 9e99\n", 2, "not a parameter count between 1 and 1e15"),
    ("job:\n  method: ful\n", 2, "job.method: must be one of 'full', 'lora' or 'qlora', not 'ful'"),
    ("job:\n  precision: bf32\n", 2, "job.precision: must be one of"),
    ("job:\n  optimizer: adam\n", 2, "job.optimizer: must be one of 'adamw', 'adamw-8bit', 'adafactor' or 'sgd'"),
    ("job:\n  sharding: zero4\n", 2, "job.sharding: must be one of"),
    ("job:\n  save_total_limit: 0\n", 2, "job.save_total_limit: Input should be greater than or equal to 1"),
    ("job:\n  save_steps: often\n", 2, "job.save_steps"),
    ("job:\n  save_only_model: maybe\n", 2, "job.save_only_model"),
    ("job:\n  lora:\n    r: 0\n", 3, "job.lora.r"),
    ("job:\n  lora: {target_modules: []}\n", 2, "job.lora.target_modules: is empty"),
    ("job:\n  lora: {target_modules: ['q proj']}\n", 2, "'q proj' is not a module name"),
    ("job:\n  num_labels: 0\n", 2, "job.num_labels"),
    ("job:\n  process: '(python'\n", 2, "job.process: '(python' is not a valid regular expression"),
    ("job:\n  log: ''\n", 2, "job.log: must be a path on the pod"),
    ("job:\n  loss_regex: 'loss=(['\n", 2, "job.loss_regex: 'loss=([' is not a valid regular expression"),
    ("job: [gpt2]\n", 1, "job"),
    ("overrides:\n  - match: {tag: big}\n    job: {metod: lora}\n", 3, "unknown key 'metod' in overrides.0.job"),
]


@pytest.mark.parametrize("text,line,words", BAD_JOBS)
def test_a_bad_job_section_is_one_file_colon_line_error(text, line, words):
    with pytest.raises(ConfigError) as caught:
        parse_policy_text(text, "computefence.yaml")
    message = str(caught.value)
    assert message.startswith(f"computefence.yaml:{line}: ") and words in message, message
    assert "\n" not in message


def test_a_bad_job_exits_2_before_any_pod_is_contacted(cli, tmp_path):
    policy = tmp_path / "computefence.yaml"
    policy.write_text("job:\n  model: gpt2\n  loss_regex: '(['\n")
    inventory = tmp_path / "pods.yaml"
    inventory.write_text("hosts:\n  - {name: p, host: 192.0.2.1}\n")
    code, out, err = cli("fleet", "check", "-i", str(inventory), "--policy", str(policy), "--connect-timeout", "0.1")
    assert code == 2 and out == ""
    assert err.startswith(f"computefence: error: {policy}:3: job.loss_regex: ") and err.count("\n") == 1


def test_an_override_changes_only_the_job_keys_it_sets():
    policy = parse_policy_text(
        "job: {model: gpt2, save_total_limit: 3, max_steps: 6000}\n"
        "overrides:\n  - match: {tag: lora}\n    job: {method: lora, lora: {r: 4}}\n",
        "computefence.yaml",
    )
    plain, tagged = policy.for_target("a", []).job, policy.for_target("b", ["lora"]).job
    assert (plain.method, plain.lora) == ("full", None)
    assert (tagged.model, tagged.save_total_limit, tagged.max_steps, tagged.method, tagged.lora.r) == (
        "gpt2", 3, 6000, "lora", 4,
    )  # fmt: skip
    only_override = parse_policy_text("overrides:\n  - match: {tag: x}\n    job: {model: gpt2}\n", "c")
    assert only_override.for_target("a", []).job is None and only_override.for_target("a", ["x"]).job.model == "gpt2"


def test_policy_show_prints_the_job_with_its_from_key(cli, tmp_path):
    policy = tmp_path / "computefence.yaml"
    policy.write_text(FULL_JOB)
    code, out, err = cli("policy", "show", "--policy", str(policy), "--format", "json")
    assert code == 0, err
    job = json.loads(out)["targets"][0]["policy"]["job"]
    assert job["from"] == "/workspace/axolotl.yaml" and job["params"] == 8_030_000_000 and "from_" not in job


def test_policy_show_prints_the_derived_figures_per_target(cli, tmp_path):
    policy = tmp_path / "computefence.yaml"
    policy.write_text(
        "job: {params: 8.03e9, save_total_limit: 3, save_steps: 500, max_steps: 6000}\n"
        "overrides:\n  - match: {name: 'lora-*'}\n    job: {method: lora}\n"
    )
    inventory = tmp_path / "pods.yaml"
    inventory.write_text("hosts:\n  - {name: full-1, host: 192.0.2.1}\n  - {name: lora-1, host: 192.0.2.2}\n")
    code, out, err = cli("policy", "show", "--policy", str(policy), "-i", str(inventory), "--format", "json")
    assert code == 0, err
    derived = {t["name"]: t["job_derived"] for t in json.loads(out)["targets"]}
    # 12 checkpoints written, 3 kept + the one being written; 8.03e9 × 12 B = 96.4 GB each.
    assert derived["full-1"] == {
        "checkpoints_on_disk": 4,
        "checkpoints_written": 12,
        "checkpoints_kept": 3,
        "checkpoint_bytes_per_param": 12.0,
        "checkpoint_makeup": "model 4 B + optimizer 8 B",
        "final_model_bytes_per_param": 4.0,
        "model_states_bytes_per_param": 18.0,
        "params": 8_030_000_000,
        "checkpoint_gb": 96.4,
        "final_model_gb": 32.1,
        "output_dir_needs_gb": 417.6,
        "model_states_gb_on_one_gpu": 144.5,
    }
    assert derived["lora-1"]["checkpoint"].startswith("the adapter and its optimizer states")
    code, out, _ = cli("policy", "show", "--policy", str(policy))
    assert code == 0 and "# job checkpoint_gb: 96.4" in out and "# job output_dir_needs_gb: 417.6" in out


def test_the_readme_job_example_loads_and_gives_its_stated_figures():
    from pathlib import Path

    from computefence.evaluate.checks.job import derived_figures

    readme = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    section = readme[readme.index("## The run's size: `job:`") :]
    example = section[section.index("```yaml\n") + 8 : section.index("```\n", section.index("```yaml\n") + 8)]
    figures = derived_figures(parse_policy_text(example, "README.md").job)
    # The README's storage.budget example: 4 × 96.4 GB + 32.1 GB.
    assert (figures["checkpoints_on_disk"], figures["checkpoint_gb"], figures["final_model_gb"]) == (4, 96.4, 32.1)
    assert (
        round(figures["output_dir_needs_gb"]) == 418
        and "4 × 96.4 GB checkpoints + 32.1 GB final model = 418 GB" in section
    )
