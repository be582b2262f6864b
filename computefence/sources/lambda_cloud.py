"""Lambda Cloud discovery: GET {base}/api/v1/instances -> {"data": [instance, ...]}.

Key: LAMBDA_API_KEY (Bearer). Base URL: --api-url, else LAMBDA_API_URL, else https://cloud.lambda.ai.
The API allows about one request a second, so requests (retries included) are spaced by 1 s.
Instances carry `jupyter_token` and `jupyter_url`, which are secrets: they are never read.
"""

from __future__ import annotations

import re
from typing import Any

from computefence.errors import ConfigError, SourceError
from computefence.http import RetryPolicy
from computefence.models import Fix, ProviderInfo, Target
from computefence.sources.interface import ActionAnswer
from computefence.sources.providers import HeldClient, as_dict, as_float, as_int, as_str, target_names

PROVIDER = "Lambda Cloud"
DEFAULT_API = "https://cloud.lambda.ai"
URL_ENV = "LAMBDA_API_URL"
KEY_ENV = "LAMBDA_API_KEY"
KEY_HELP = "check LAMBDA_API_KEY; keys are at https://cloud.lambda.ai/api-keys"
RATE_LIMITED = RetryPolicy(min_interval_s=1.0)
TERMINATE_PATH = "/api/v1/instance-operations/terminate"
# Instance ids are hex; only those are ever sent.
INSTANCE_ID = re.compile(r"[A-Za-z0-9-]{1,64}")

_STATE_FIX = {
    "booting": "wait until it is active, then re-run",
    "unhealthy": "restart it from the Lambda Cloud dashboard, then re-run",
}


class LambdaSource(HeldClient):
    """Every Lambda Cloud instance of the account; active ones are checkable."""

    name = "lambda"
    title = PROVIDER
    key_env = KEY_ENV
    key_how_to = "create one at https://cloud.lambda.ai/api-keys and export LAMBDA_API_KEY"
    key_help = KEY_HELP
    url_envs = (URL_ENV,)
    default_api = DEFAULT_API
    pod_id_shape = INSTANCE_ID

    default_policy = RATE_LIMITED

    # ------------------------------------------------------------ fleet release

    # Lambda Cloud instances cannot be stopped, only terminated.
    actions = ("terminate",)

    def describe(self, pod_id: str, action: str) -> str:
        return f'POST {self._base()}{TERMINATE_PATH} {{"instance_ids": ["{pod_id}"]}}'

    def release(self, pod_id: str, action: str) -> ActionAnswer:
        return self.release_all([pod_id], action)[pod_id]

    def release_all(self, pod_ids: list[str], action: str) -> dict[str, ActionAnswer]:
        """One terminate for all the instances (the API takes a list, and allows a request a
        second); when it answers 404 (one of them went since the listing), one by one."""
        answers = {i: ActionAnswer("failed", f"{i!r} is not a Lambda Cloud instance id; nothing sent") for i in pod_ids}
        ids = [i for i in pod_ids if self.accepts(i)]
        if not ids:
            return answers
        try:
            with self._session() as api:
                status, body = api.send_json("POST", TERMINATE_PATH, {"instance_ids": ids}, answered=(404,))
                detail = api.error_text(body)
        except (SourceError, ConfigError) as exc:
            return {**answers, **{i: ActionAnswer("failed", str(exc)) for i in ids}}
        if status == 404:
            if len(ids) > 1:
                return {**answers, **{i: self.release_all([i], action)[i] for i in ids}}
            return {
                **answers,
                ids[0]: ActionAnswer(
                    "gone", f"{PROVIDER}: no such instance (HTTP 404{f', {detail}' if detail else ''})"
                ),
            }
        done = as_dict(as_dict(body).get("data")).get("terminated_instances")
        terminated = {as_str(as_dict(i).get("id")) for i in done} if isinstance(done, list) else set()
        for i in ids:
            answers[i] = (
                ActionAnswer("released", f"{PROVIDER}: terminate accepted")
                if i in terminated
                else ActionAnswer("failed", f"{PROVIDER} answered, but its terminated_instances does not list {i}")
            )
        return answers

    def targets(self) -> list[Target]:
        base = self._base()
        with self._session() as api:
            body = api.get_json("/api/v1/instances")
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise SourceError(f"{PROVIDER} API returned no `data` list of instances: check the API URL ({base})")
        instances = [i for i in body["data"] if isinstance(i, dict) and as_str(i.get("id"))]
        names = target_names([(as_str(i.get("name")), str(i["id"])) for i in instances], "lambda")
        return [instance_target(inst, name) for inst, name in zip(instances, names)]


def instance_target(inst: dict[str, Any], name: str) -> Target:
    pod_id = str(inst["id"])
    state = as_str(inst.get("status")) or "unknown"
    itype = as_dict(inst.get("instance_type"))
    cents = as_float(itype.get("price_cents_per_hour"))
    mounts = [m for m in (as_str(as_dict(e).get("mount_point")) for e in inst.get("file_system_mounts") or []) if m]
    file_systems = [n for n in inst.get("file_system_names") or [] if isinstance(n, str)]
    info = ProviderInfo(
        provider="lambda",
        pod_id=pod_id,
        name=as_str(inst.get("name")),
        state=state,
        gpu_type=as_str(itype.get("gpu_description")) or as_str(itype.get("name")),
        gpu_count=as_int(as_dict(itype.get("specs")).get("gpus")),
        cost_per_hour=None if cents is None else round(cents / 100, 4),
        region=as_str(as_dict(inst.get("region")).get("name")),
        volume_mount_path=mounts[0] if mounts else None,
        persistent_paths=mounts,
        network_volume=bool(file_systems),
    )
    ip = as_str(inst.get("ip"))
    target = Target(name=name, host=ip or "", port=22, user="ubuntu", tags=["lambda"], source="lambda", provider=info)
    if state != "active":
        target.unreachable_reason = f"instance is {state}, not active"
        target.unreachable_fix = Fix(advice=_STATE_FIX.get(state, "it no longer runs; nothing to check"))
    elif ip is None:
        target.unreachable_reason = "active, but Lambda Cloud lists no IP address for it yet"
        target.unreachable_fix = Fix(advice="wait a minute for its IP address, then re-run")
    return target
