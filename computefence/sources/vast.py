"""Vast.ai discovery: GET {base}/api/v1/instances, keyset-paginated (at most 25 a page).

The vastai CLI's conventions: key from VAST_API_KEY, else $XDG_CONFIG_HOME/vastai/vast_api_key
(~/.config when unset), else the CLI's older ~/.vast_api_key. Base URL: --api-url, else VAST_URL
(the CLI's variable), else VAST_API_URL (ComputeFence's older name), else https://console.vast.ai.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from computefence.errors import ConfigError, SourceError
from computefence.http import ApiClient
from computefence.models import Fix, FixStep, ProviderInfo, StepKind, Target
from computefence.sources.interface import ActionAnswer
from computefence.sources.providers import HeldClient, as_dict, as_float, as_int, as_str, target_names

PROVIDER = "Vast.ai"
DEFAULT_API = "https://console.vast.ai"
URL_ENV = "VAST_URL"
OLD_URL_ENV = "VAST_API_URL"
KEY_ENV = "VAST_API_KEY"
PAGE_SIZE = 25
# 10,000 instances: beyond any real account; stops a server whose listing never ends.
MAX_PAGES = 400
# Contract ids are numbers; only those are ever put into a request path.
INSTANCE_ID = re.compile(r"[0-9]{1,20}")
KEY_HELP = (
    "check VAST_API_KEY (or $XDG_CONFIG_HOME/vastai/vast_api_key); keys are at https://cloud.vast.ai/manage-keys/"
)


class VastSource(HeldClient):
    """Every Vast.ai instance of the account; running ones are checkable."""

    name = "vast"
    title = PROVIDER
    key_env = KEY_ENV
    key_how_to = "create one at https://cloud.vast.ai/manage-keys/ and export VAST_API_KEY"
    key_help = KEY_HELP
    url_envs = (URL_ENV, OLD_URL_ENV)
    default_api = DEFAULT_API
    pod_id_shape = INSTANCE_ID

    def key_files(self) -> list[Path]:
        """The vastai CLI's key files."""
        config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return [Path(config_home) / "vastai" / "vast_api_key", Path.home() / ".vast_api_key"]

    def targets(self) -> list[Target]:
        with self._session() as api:
            instances = list_instances(api)
        names = target_names([(as_str(i.get("label")), str(i["id"])) for i in instances], "vast")
        return [instance_target(inst, name) for inst, name in zip(instances, names)]

    # ------------------------------------------------------------ fleet release

    # stop ends GPU billing and keeps the disk (which still bills); terminate destroys the instance.
    actions = ("stop", "terminate")

    def describe(self, pod_id: str, action: str) -> str:
        url = f"{self._base()}/api/v0/instances/{pod_id}/"
        return f'PUT {url} {{"state": "stopped"}}' if action == "stop" else f"DELETE {url}"

    def release_all(self, pod_ids: list[str], action: str) -> dict[str, ActionAnswer]:
        return {pod_id: self.release(pod_id, action) for pod_id in pod_ids}

    def release(self, pod_id: str, action: str) -> ActionAnswer:
        if not self.accepts(pod_id):
            return ActionAnswer("failed", f"{pod_id!r} is not a Vast.ai instance id; nothing sent")
        path = f"/api/v0/instances/{pod_id}/"
        try:
            with self._session() as api:
                if action == "stop":
                    status, body = api.send_json("PUT", path, {"state": "stopped"}, answered=(404,))
                else:
                    status, body = api.send_json("DELETE", path, answered=(404,))
                detail = api.error_text(body)
        except (SourceError, ConfigError) as exc:
            return ActionAnswer("failed", str(exc))
        if status == 404:
            return ActionAnswer("gone", f"{PROVIDER}: no such instance (HTTP 404)")
        if as_dict(body).get("success") is False:
            return ActionAnswer("failed", f"{PROVIDER} refused: {detail or 'success: false'}")
        verb = "stop" if action == "stop" else "destroy"
        return ActionAnswer("released", f"{PROVIDER}: {verb} accepted" + (f" ({detail})" if detail else ""))


def list_instances(api: ApiClient) -> list[dict[str, Any]]:
    """All instances, following next_token through after_token until it is null."""
    instances: list[dict[str, Any]] = []
    token: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        params = {"limit": str(PAGE_SIZE)}
        if token:
            params["after_token"] = token
        page = api.get_json("/api/v1/instances", params)
        if isinstance(page, dict) and page.get("success") is False:
            detail = api.error_text(page)
            raise SourceError(f"{PROVIDER} API refused the listing{f' ({detail})' if detail else ''}: {KEY_HELP}")
        if not isinstance(page, dict) or not isinstance(page.get("instances"), list):
            raise SourceError(f"{PROVIDER} API returned no `instances` list: check the API URL ({api.base_url})")
        instances += [i for i in page["instances"] if isinstance(i, dict) and i.get("id") is not None]
        token = as_str(page.get("next_token"))
        if token is None:
            return instances
        if token in seen:
            raise SourceError(f"{PROVIDER} API repeated a page token, so the listing never ends: retry later")
        seen.add(token)
    raise SourceError(f"{PROVIDER} API listing did not end after {MAX_PAGES} pages: retry later")


def ssh_address(inst: dict[str, Any]) -> tuple[str, int] | None:
    """Direct (public IP + the host port mapped to 22/tcp) when there is one, else Vast's SSH proxy."""
    mappings = as_dict(inst.get("ports")).get("22/tcp")
    public_ip = as_str(inst.get("public_ipaddr"))
    if public_ip and isinstance(mappings, list) and mappings:
        port = as_int(as_dict(mappings[0]).get("HostPort"))
        if port:
            return public_ip, port
    proxy_host, proxy_port = as_str(inst.get("ssh_host")), as_int(inst.get("ssh_port"))
    if proxy_host and proxy_port:
        # As the vastai CLI does: on Jupyter-launched instances the proxy's SSH is one port up.
        if "jupyter" in (as_str(inst.get("image_runtype")) or ""):
            proxy_port += 1
        return proxy_host, proxy_port
    return None


_STATE_ADVICE = {
    "offline": "its host machine is offline; wait for it or recreate the instance on another machine",
    "unknown": "Vast cannot see its host machine; wait for it or recreate the instance on another machine",
}


def _state_fix(state: str, pod_id: str) -> Fix:
    if state in ("exited", "stopped"):
        return Fix(
            steps=[FixStep.local(f"vastai start instance {shlex.quote(pod_id)}", StepKind.SAFE)], advice="then re-run"
        )
    return Fix(advice=_STATE_ADVICE.get(state, "wait until it is running, then re-run"))


def _id_text(value: object) -> str | None:
    """A numeric id as text ("12345"); None when absent or not a number."""
    number = as_int(value)
    return str(number) if number is not None and number >= 0 else None


def instance_target(inst: dict[str, Any], name: str) -> Target:
    pod_id = str(inst["id"])
    state = as_str(inst.get("actual_status")) or "starting"
    info = ProviderInfo(
        provider="vast",
        pod_id=pod_id,
        name=as_str(inst.get("label")),
        state=state,
        gpu_type=as_str(inst.get("gpu_name")),
        gpu_count=as_int(inst.get("num_gpus")),
        cost_per_hour=as_float(inst.get("dph_total")),
        image=as_str(inst.get("image_uuid")),
        region=as_str(inst.get("geolocation")),
        container_disk_gb=as_float(inst.get("disk_space")),
        machine_id=_id_text(inst.get("machine_id")),
        host_id=_id_text(inst.get("host_id")),
    )
    address = ssh_address(inst)
    host, port = address or ("", 22)
    target = Target(name=name, host=host, port=port, user="root", tags=["vast"], source="vast", provider=info)
    if state != "running":
        target.unreachable_reason = f"instance is {state}, not running"
        target.unreachable_fix = _state_fix(state, pod_id)
    elif address is None:
        target.unreachable_reason = "running, but Vast.ai lists no SSH address for it (no 22/tcp mapping, no proxy)"
        target.unreachable_fix = Fix(
            advice="launch it with SSH access (an ssh launch mode / template with SSH enabled)"
        )
    return target
