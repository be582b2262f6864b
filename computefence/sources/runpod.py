"""RunPod discovery through the runpod SDK (the `runpod` extra: `pip install '.[runpod]'` in the checkout).

`runpod.get_pods()` posts its GraphQL query to {RUNPOD_API_BASE_URL}/graphql, a variable it reads
on each call (default https://api.runpod.io); --api-url sets it for the duration of the call.
Key: RUNPOD_API_KEY, else the SDK's ~/.runpod/config.toml (`runpod config`).

The SDK sends one request with a fixed 30 s timeout and misreads HTTP errors other than 401 (it
parses the body as a result). For the call it is given a stand-in for `requests` that applies our
timeout and turns 429/5xx/other statuses into retries or one-line errors, Retry-After included.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from computefence import jsontext
from computefence.errors import ConfigError, SourceError
from computefence.http import (
    BodyTooLarge,
    DeadlinePassed,
    Retry,
    RetryPolicy,
    call_with_retries,
    decoded_body,
    iter_chunks,
    raise_for_status,
    read_capped,
    scrub,
    within_deadline,
)
from computefence.models import Fix, FixStep, ProviderInfo, StepKind, Target
from computefence.sources.interface import ActionAnswer
from computefence.sources.providers import as_dict, as_float, as_int, as_str, base_url, target_names

PROVIDER = "RunPod"
DEFAULT_API = "https://api.runpod.io"
URL_ENV = "RUNPOD_API_BASE_URL"
KEY_ENV = "RUNPOD_API_KEY"
KEY_HELP = "check RUNPOD_API_KEY or ~/.runpod/config.toml; keys are at https://www.runpod.io/console/user/settings"
# Installed into the interpreter ComputeFence runs on, never by the name `computefence`: the
# package of that name on PyPI is another project.
SDK_REQUIREMENT = "runpod>=1.8.1,<2"
INSTALL_HINT = f"RunPod support needs its SDK: {shlex.quote(sys.executable)} -m pip install '{SDK_REQUIREMENT}'"
# get_pods(api_key=...) arrived in 1.8.1; 2.x lists pods through REST v2, in another shape.
SDK_RANGE = ((1, 8, 1), (2, 0, 0))
# The SDK pastes a pod id into its GraphQL text: only ids of this shape are ever sent.
POD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

# The SDK is configured through process-wide state (an env variable, a module global): one call at a time.
_SDK_LOCK = threading.Lock()


def load_sdk() -> ModuleType:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import runpod
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    finally:
        # Importing runpod runs logging.basicConfig(level=INFO) (runpod/serverless/utils/rp_upload.py),
        # which would print every INFO record of the process, httpx's included, to stderr.
        root.handlers[:] = handlers
        root.setLevel(level)
    version = str(getattr(runpod, "__version__", "0"))
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:3])
    if not SDK_RANGE[0] <= numbers < SDK_RANGE[1]:
        raise ConfigError(
            f"RunPod support needs {SDK_REQUIREMENT} (installed: {version}): "
            f"{shlex.quote(sys.executable)} -m pip install '{SDK_REQUIREMENT}'"
        )
    module: ModuleType = runpod
    return module


class RunPodSource:
    """Every pod of the RunPod account; running pods with direct TCP SSH are checkable."""

    name = "runpod"
    title = PROVIDER

    def __init__(self, api_url: str | None = None, *, policy: RetryPolicy | None = None) -> None:
        self.api_url = api_url
        self.policy = policy or RetryPolicy()

    def __repr__(self) -> str:
        return f"RunPodSource(api_url={self.api_url!r})"

    def _base(self) -> str:
        return base_url(PROVIDER, self.api_url, URL_ENV, DEFAULT_API).removesuffix("/graphql")

    def targets(self) -> list[Target]:
        base = self._base()
        sdk = load_sdk()
        key = api_key(sdk)
        pods = fetch_pods(sdk, key, base, self.policy)
        names = target_names([(as_str(p.get("name")), str(p["id"])) for p in pods], "runpod")
        return [pod_target(pod, name) for pod, name in zip(pods, names)]

    # ------------------------------------------------------------ fleet release

    # stop keeps the pod's volume (it bills for storage only); terminate destroys the pod.
    actions = ("stop", "terminate")

    def __enter__(self) -> RunPodSource:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def accepts(self, pod_id: str) -> bool:
        return POD_ID.fullmatch(pod_id) is not None

    def describe(self, pod_id: str, action: str) -> str:
        mutation = "podStop" if action == "stop" else "podTerminate"
        return f'runpod.{action}_pod("{pod_id}"): POST {self._base()}/graphql {mutation}(input: {{podId: "{pod_id}"}})'

    def release_all(self, pod_ids: list[str], action: str) -> dict[str, ActionAnswer]:
        return {pod_id: self.release(pod_id, action) for pod_id in pod_ids}

    def release(self, pod_id: str, action: str) -> ActionAnswer:
        if not self.accepts(pod_id):
            return ActionAnswer("failed", f"{pod_id!r} is not a RunPod pod id; nothing sent")
        try:
            sdk = load_sdk()
            key = api_key(sdk)
            call = sdk.stop_pod if action == "stop" else sdk.terminate_pod
            answer = sdk_call(sdk, key, self._base(), self.policy, lambda: call(pod_id))
        except (SourceError, ConfigError) as exc:
            return ActionAnswer("failed", str(exc))
        if action == "stop":
            status = as_str(as_dict(answer).get("desiredStatus"))
            return ActionAnswer("released", f"RunPod: podStop accepted, desiredStatus {status or '?'}")
        return ActionAnswer("released", "RunPod: podTerminate accepted")


def api_key(sdk: ModuleType) -> str:
    key = os.environ.get(KEY_ENV, "").strip()
    if key:
        return key
    credentials = sdk.get_credentials()  # ~/.runpod/config.toml, [default] profile; None if absent or invalid
    key = str(credentials.get("api_key") or "").strip() if isinstance(credentials, dict) else ""
    if key:
        return key
    raise ConfigError(
        f"{PROVIDER}: no API key found (looked in {KEY_ENV} and ~/.runpod/config.toml): "
        "create one at https://www.runpod.io/console/user/settings and export RUNPOD_API_KEY"
    )


class _Transport:
    """Stands in for the `requests` module inside runpod.api.graphql during one call."""

    def __init__(self, requests: ModuleType, timeout_s: float, key: str, base: str) -> None:
        self._requests = requests
        self._timeout_s = timeout_s
        self._key = key
        self._base = base

    def __getattr__(self, name: str) -> Any:
        return getattr(self._requests, name)

    def post(self, url: str, **kwargs: Any) -> Any:
        # requests' timeout counts per read: the whole exchange gets the deadline instead, and
        # the body is read raw (identity asked for) up to the cap.
        kwargs.update(timeout=self._timeout_s, stream=True)
        kwargs["headers"] = {**(kwargs.get("headers") or {}), "Accept-Encoding": "identity"}

        def work(expired: Callable[[], bool]) -> Any:
            import urllib3

            response = self._requests.post(url, **kwargs)
            with response:
                try:
                    raw = read_capped(iter_chunks(lambda n: response.raw.read(n, decode_content=False)), expired)
                except urllib3.exceptions.HTTPError as exc:  # a reset mid-body: what requests would call it
                    raise self._requests.ConnectionError(type(exc).__name__) from None
            return response, decoded_body(raw, response.headers.get("Content-Encoding"))

        try:
            response, body = within_deadline(self._timeout_s, work)
        except DeadlinePassed:
            raise self._requests.Timeout(f"no complete answer within {self._timeout_s:g} s") from None
        except BodyTooLarge as exc:
            raise SourceError(f"{PROVIDER} API at {self._base} sent {exc} of answer: check the API URL") from None
        response._content, response._content_consumed = body, True
        if response.status_code != 401:  # the SDK's own AuthenticationError covers 401
            raise_for_status(PROVIDER, response.status_code, response.headers, body, self._key, KEY_HELP, self._base)
        # The SDK parses the body itself; lone surrogates go before they reach a model.
        response.json = lambda **_: jsontext.loads(body)
        return response


def fetch_pods(sdk: ModuleType, key: str, base: str, policy: RetryPolicy) -> list[dict[str, Any]]:
    where = f"{PROVIDER} API at {base}"

    def no_pods() -> SourceError:
        return SourceError(f"{where} returned no data.myself.pods: check the API URL")

    pods = sdk_call(sdk, key, base, policy, lambda: sdk.get_pods(api_key=key), shape_error=no_pods)
    if not isinstance(pods, list):
        raise SourceError(f"{where} returned pods that are not a list: check the API URL")
    return [p for p in pods if isinstance(p, dict) and as_str(p.get("id"))]


def sdk_call(sdk: ModuleType, key: str, base: str, policy: RetryPolicy, call: Any, *, shape_error: Any = None) -> Any:
    """`call()` (an SDK function) against `base` with `key`, our timeout and retries, and
    one-line SourceErrors. The SDK's mutations (stop_pod, terminate_pod) take no key
    argument: they read runpod.api_key, which is set for the call and put back after."""
    import requests
    from runpod.api import graphql

    where = f"{PROVIDER} API at {base}"

    def once() -> Any:
        try:
            return call()
        except sdk.error.AuthenticationError:
            raise SourceError(f"{PROVIDER} API rejected the API key (HTTP 401): {KEY_HELP}") from None
        except sdk.error.QueryError as exc:
            raise SourceError(f"{PROVIDER} API error: {scrub(str(exc), key)}") from None
        except requests.Timeout:
            raise Retry(f"{where} did not answer within {policy.timeout_s:g} s") from None
        except requests.ConnectionError as exc:
            raise Retry(f"cannot reach {where} ({type(exc).__name__})") from None
        except ValueError:  # requests' JSONDecodeError
            raise SourceError(f"{where} returned a body that is not JSON: check the API URL or retry later") from None
        except (KeyError, TypeError):
            raise (
                shape_error() if shape_error else SourceError(f"{where} answered without data: check the API URL")
            ) from None

    client: Any = sdk  # the SDK keeps its key as a module attribute
    with _SDK_LOCK:
        saved_url, saved_requests, saved_key = os.environ.get(URL_ENV), graphql.requests, client.api_key
        os.environ[URL_ENV] = base
        graphql.requests = _Transport(saved_requests, policy.timeout_s, key, base)
        client.api_key = key
        try:
            return call_with_retries(PROVIDER, policy, once)
        finally:
            client.api_key = saved_key
            graphql.requests = saved_requests
            if saved_url is None:
                os.environ.pop(URL_ENV, None)
            else:
                os.environ[URL_ENV] = saved_url


def direct_ssh(pod: dict[str, Any]) -> tuple[str, int] | None:
    """ip and public port of the pod's TCP port 22 on a public IP, if it has one."""
    for port in as_dict(pod.get("runtime")).get("ports") or []:
        port = as_dict(port)
        if (
            as_int(port.get("privatePort")) == 22
            and port.get("type") == "tcp"
            and port.get("isIpPublic") is True
            and as_str(port.get("ip"))
            and as_int(port.get("publicPort"))
        ):
            return str(port["ip"]).strip(), as_int(port["publicPort"])  # type: ignore[return-value]
    return None


def _tcp22_mapped(pod: dict[str, Any]) -> bool:
    ports = as_dict(pod.get("runtime")).get("ports") or []
    return any(as_int(as_dict(p).get("privatePort")) == 22 and as_dict(p).get("type") == "tcp" for p in ports)


def pod_target(pod: dict[str, Any], name: str) -> Target:
    pod_id = str(pod["id"])
    desired = (as_str(pod.get("desiredStatus")) or "unknown").lower()
    running = desired == "running" and pod.get("runtime") is not None
    state = "starting" if desired == "running" and not running else desired
    volume_gb = as_float(pod.get("volumeInGb"))
    mount = as_str(pod.get("volumeMountPath"))
    info = ProviderInfo(
        provider="runpod",
        pod_id=pod_id,
        name=as_str(pod.get("name")),
        state=state,
        gpu_type=as_str(as_dict(pod.get("machine")).get("gpuDisplayName")),
        gpu_count=as_int(pod.get("gpuCount")),
        cost_per_hour=as_float(pod.get("costPerHr")),
        image=as_str(pod.get("imageName")),
        volume_mount_path=mount,
        volume_gb=volume_gb,
        container_disk_gb=as_float(pod.get("containerDiskInGb")),
        # A pod volume (volumeInGb > 0) survives stops at its mount path; with 0 there is none.
        persistent_paths=[mount] if mount and volume_gb else [],
        machine_id=as_str(pod.get("machineId")),
    )
    address = direct_ssh(pod) if running else None
    host, port = address or ("", 22)
    target = Target(name=name, host=host, port=port, user="root", tags=["runpod"], source="runpod", provider=info)
    if state == "starting":
        target.unreachable_reason = "pod is starting (RunPod reports no runtime for it yet)"
        target.unreachable_fix = Fix(advice="wait until the pod shows Running in the RunPod console, then re-run")
    elif not running:
        target.unreachable_reason = f"pod is {state}, not running"
        target.unreachable_fix = (
            Fix(
                steps=[FixStep.local(f"runpodctl start pod {shlex.quote(pod_id)}", StepKind.SAFE)], advice="then re-run"
            )
            if state == "exited"
            else Fix(advice="it no longer runs; nothing to check")
        )
    elif address is None and _tcp22_mapped(pod):
        target.unreachable_reason = "TCP port 22 is mapped only on a private IP (no public IP for direct SSH)"
        target.unreachable_fix = Fix(
            advice="run the pod on a machine with a public IP (Secure Cloud or a public-IP Community host)"
        )
    elif address is None:
        target.unreachable_reason = "only RunPod's proxy SSH (no command execution); direct TCP port 22 is not exposed"
        target.unreachable_fix = Fix(
            advice="expose TCP port 22 in the pod's template (Edit Pod > Expose TCP Ports: 22) and restart it"
        )
    return target
