"""Lambda Cloud discovery: the {"data": [...]} shape, file systems, states, request spacing."""

from __future__ import annotations

import dataclasses

from fake_api import JUPYTER_SECRET, Fault, lambda_instance

from computefence.models import Fix
from computefence.sources.lambda_cloud import LambdaSource

LONG_ID = "0920582c7ff041399e34823a0be62549"


def discover(api, policy):
    return LambdaSource(api.base_url("lambda"), policy=policy).targets()


def test_instance_shape(api, fast):
    api.lambda_instances = [
        lambda_instance(
            LONG_ID,
            "train-8x",
            ip="198.51.100.2",
            file_systems={"datasets": "/lambda/nfs/datasets", "ckpt": "/data/ckpt"},
            type_name="gpu_8x_h100_sxm5",
            gpu="H100 (80 GB SXM5)",
            gpus=8,
            cents=2392,
            region="us-east-1",
        )
    ]
    [target] = discover(api, fast)
    assert (target.name, target.host, target.port, target.user) == ("train-8x", "198.51.100.2", 22, "ubuntu")
    assert target.unreachable_reason is None and target.source == "lambda" and "lambda" in target.tags
    info = target.provider
    assert (info.provider, info.pod_id, info.state, info.region) == ("lambda", LONG_ID, "active", "us-east-1")
    assert (info.gpu_type, info.gpu_count, info.cost_per_hour) == ("H100 (80 GB SXM5)", 8, 23.92)
    assert info.persistent_paths == ["/lambda/nfs/datasets", "/data/ckpt"]
    assert info.volume_mount_path == "/lambda/nfs/datasets"
    assert info.network_volume is True
    assert JUPYTER_SECRET not in target.model_dump_json()
    seen = api.seen("lambda")[0]
    assert (seen.method, seen.path, seen.authorization) == ("GET", "/api/v1/instances", f"Bearer {api.keys['lambda']}")


def test_no_file_system(api, fast):
    api.lambda_instances = [lambda_instance(LONG_ID, None)]
    [target] = discover(api, fast)
    assert target.name == f"lambda-{LONG_ID}"
    assert target.provider.persistent_paths == [] and target.provider.network_volume is False


def test_states(api, fast):
    api.lambda_instances = [
        lambda_instance("a" * 32, "boot", status="booting", ip=None),
        lambda_instance("b" * 32, "sick", status="unhealthy"),
        lambda_instance("c" * 32, "ending", status="terminating"),
        lambda_instance("d" * 32, "noip", ip=None),
    ]
    targets = {t.name: t for t in discover(api, fast)}
    assert targets["boot"].unreachable_reason == "instance is booting, not active"
    # Nothing to run from here: plain advice.
    assert targets["boot"].unreachable_fix == Fix(advice="wait until it is active, then re-run")
    assert "restart it" in targets["sick"].unreachable_fix.advice
    assert targets["ending"].unreachable_fix == Fix(advice="it no longer runs; nothing to check")
    assert "no IP address" in targets["noip"].unreachable_reason


def test_requests_are_spaced_for_the_rate_limit(api, fast):
    import time

    policy = dataclasses.replace(fast, min_interval_s=0.3, backoff_s=0.0, sleep=time.sleep)
    api.fail("lambda", Fault(500))
    api.lambda_instances = [lambda_instance(LONG_ID, "one")]
    assert len(discover(api, policy)) == 1
    first, second = api.seen("lambda")
    assert second.at - first.at >= 0.3


def test_default_policy_keeps_one_request_a_second():
    assert LambdaSource().policy.min_interval_s == 1.0
