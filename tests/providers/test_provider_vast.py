"""Vast.ai discovery: keyset pagination, direct vs proxy SSH, states, key files."""

from __future__ import annotations

import json

import pytest
from fake_api import Fault, vast_instance

from computefence.errors import SourceError
from computefence.models import Fix, FixStep, StepKind
from computefence.sources.vast import VastSource


def discover(api, policy):
    return VastSource(api.base_url("vast"), policy=policy).targets()


def test_pagination_follows_next_token_through_after_token(api, fast):
    api.vast_instances = [vast_instance(i, f"box-{i}") for i in range(1, 62)]  # 25 + 25 + 11
    targets = discover(api, fast)

    assert [t.provider.pod_id for t in targets] == [str(i) for i in range(1, 62)]
    seen = api.seen("vast")
    assert len(seen) == 3
    assert all(s.query["limit"] == "25" for s in seen)
    assert "after_token" not in seen[0].query
    # Each token is the previous page's next_token, passed back untouched.
    assert [json.loads(__import__("base64").b64decode(s.query["after_token"]))["values"]["id"] for s in seen[1:]] == [
        25,
        50,
    ]


def test_exactly_one_full_page(api, fast):
    api.vast_instances = [vast_instance(i, None) for i in range(1, 26)]
    assert len(discover(api, fast)) == 25
    assert len(api.seen("vast")) == 1


def test_direct_ssh_preferred_then_proxy(api, fast):
    api.vast_instances = [
        vast_instance(1, "direct", direct=("198.51.100.20", 40022), proxy=("ssh4.vast.ai", 31022)),
        vast_instance(2, "proxy", direct=None, proxy=("ssh5.vast.ai", 32044)),
        vast_instance(3, "jupyter", direct=None, proxy=("ssh6.vast.ai", 33000), runtype="jupyter_direc ssh_proxy"),
        vast_instance(4, "none", direct=None, proxy=None),
    ]
    targets = {t.name: t for t in discover(api, fast)}

    assert (targets["direct"].host, targets["direct"].port, targets["direct"].user) == ("198.51.100.20", 40022, "root")
    assert (targets["proxy"].host, targets["proxy"].port) == ("ssh5.vast.ai", 32044)
    # Jupyter-launched instances serve SSH on the proxy's next port (as `vastai ssh-url` computes it).
    assert (targets["jupyter"].host, targets["jupyter"].port) == ("ssh6.vast.ai", 33001)
    assert "no SSH address" in targets["none"].unreachable_reason
    assert all(targets[n].unreachable_reason is None for n in ("direct", "proxy", "jupyter"))


def test_provider_info(api, fast):
    api.vast_instances = [vast_instance(312, "ML Training Job", gpu="A100 SXM4", num_gpus=4, dph=3.2041)]
    [target] = discover(api, fast)
    info = target.provider
    assert target.name == "ML-Training-Job" and target.source == "vast" and "vast" in target.tags
    assert (info.provider, info.pod_id, info.name, info.state) == ("vast", "312", "ML Training Job", "running")
    assert (info.gpu_type, info.gpu_count, info.cost_per_hour) == ("A100 SXM4", 4, 3.2041)
    assert (info.image, info.container_disk_gb, info.region) == (
        "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-devel",
        64.0,
        "Texas, US",
    )


def test_only_running_instances_are_checkable(api, fast):
    api.vast_instances = [
        vast_instance(1, "up"),
        vast_instance(2, "stopped", status="exited"),
        vast_instance(3, "loading", status="loading"),
        vast_instance(4, "offline", status="offline"),
        vast_instance(5, "new", status=None),
    ]
    targets = {t.name: t for t in discover(api, fast)}
    assert targets["up"].unreachable_reason is None
    assert targets["stopped"].unreachable_reason == "instance is exited, not running"
    assert targets["stopped"].unreachable_fix == Fix(
        steps=[FixStep.local("vastai start instance 2", StepKind.SAFE)], advice="then re-run"
    )
    assert targets["loading"].unreachable_fix == Fix(advice="wait until it is running, then re-run")
    assert targets["offline"].unreachable_fix.commands == [] and "offline" in targets["offline"].unreachable_fix.advice
    assert targets["new"].provider.state == "starting"


def test_unlabelled_and_duplicate_labels(api, fast):
    api.vast_instances = [vast_instance(1, None), vast_instance(2, "dup"), vast_instance(3, "dup")]
    assert [t.name for t in discover(api, fast)] == ["vast-1", "dup-2", "dup-3"]


@pytest.mark.parametrize("where", [".config/vastai/vast_api_key", ".vast_api_key"])
def test_key_files_of_the_vastai_cli(api, fast, home, monkeypatch, where):
    monkeypatch.delenv("VAST_API_KEY")
    path = home / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(api.keys["vast"] + "\n")
    api.vast_instances = [vast_instance(1, "one")]
    assert len(discover(api, fast)) == 1
    assert api.seen("vast")[0].authorization == f"Bearer {api.keys['vast']}"


def test_env_key_wins_over_files(api, fast, home):
    (home / ".vast_api_key").write_text("stale-key")
    api.vast_instances = [vast_instance(1, "one")]
    assert len(discover(api, fast)) == 1


@pytest.mark.parametrize("var", ["VAST_URL", "VAST_API_URL"])
def test_base_url_from_env(api, fast, monkeypatch, var):
    """VAST_URL is the vastai CLI's variable; VAST_API_URL, ComputeFence's older name, still works."""
    monkeypatch.setenv(var, api.base_url("vast") + "/")
    api.vast_instances = [vast_instance(1, "one")]
    assert len(VastSource(policy=fast).targets()) == 1


def test_the_cli_variable_wins_over_the_old_name(api, fast, monkeypatch):
    monkeypatch.setenv("VAST_URL", api.base_url("vast"))
    monkeypatch.setenv("VAST_API_URL", "http://127.0.0.1:9/never")
    api.vast_instances = [vast_instance(1, "one")]
    assert len(VastSource(policy=fast).targets()) == 1


def test_key_file_follows_xdg_config_home(api, fast, home, tmp_path, monkeypatch):
    monkeypatch.delenv("VAST_API_KEY")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg/vastai").mkdir(parents=True)
    (tmp_path / "xdg/vastai/vast_api_key").write_text(api.keys["vast"] + "\n")
    (home / ".config/vastai").mkdir(parents=True)
    (home / ".config/vastai/vast_api_key").write_text("not-this-one\n")
    api.vast_instances = [vast_instance(1, "one")]
    assert len(discover(api, fast)) == 1
    assert api.seen("vast")[0].authorization == f"Bearer {api.keys['vast']}"


def test_a_listing_that_never_ends(api, fast):
    page = {"success": True, "instances": [vast_instance(1, "one")], "next_token": "same"}
    api.fail("vast", Fault(200, json.dumps(page).encode()), times=2)
    with pytest.raises(SourceError, match="repeated a page token"):
        discover(api, fast)


def test_success_false_in_a_200(api, fast):
    api.fail("vast", Fault(200, b'{"success": false, "error": "invalid_request", "msg": "bad filter"}'))
    with pytest.raises(SourceError, match=r"^Vast\.ai API refused the listing \(invalid_request: bad filter\)"):
        discover(api, fast)


def test_odd_field_values_do_not_crash(api, fast):
    odd = vast_instance(1, "odd")
    odd.update(num_gpus="many", dph_total=None, ports={"22/tcp": "nonsense"}, ssh_port="x")
    api.vast_instances = [odd, {"label": "no id"}, "not an object"]
    [target] = discover(api, fast)
    assert target.provider.gpu_count is None and target.provider.cost_per_hour is None
    assert target.unreachable_reason is not None


def test_lone_surrogates_in_the_api_answer_become_question_marks(api, fast):
    # json.dumps in the fake API sends the name as "gpu\\udcffbox", a lone surrogate escape.
    api.vast_instances = [vast_instance(7, "gpu\udcffbox")]
    [target] = discover(api, fast)
    assert target.provider.name == "gpu?box"
    target.model_dump_json()
