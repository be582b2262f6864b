"""A local fake of the RunPod, Vast.ai and Lambda Cloud APIs, on 127.0.0.1.

One HTTP server serves all three under path prefixes, so each provider's base URL is
`api.base_url("runpod")` etc.:
  POST /runpod/graphql          what runpod.get_pods() sends (the SDK appends /graphql), and
                                the SDK's podStop / podTerminate mutations
  GET  /vast/api/v1/instances   keyset-paginated: limit (max 25), after_token -> next_token
  PUT/DELETE /vast/api/v0/instances/{id}/  {"state": "stopped"} stops, DELETE destroys
  GET  /lambda/api/v1/instances {"data": [...]}
  POST /lambda/api/v1/instance-operations/terminate {"instance_ids": [...]}
Responses follow the providers' published schemas (shared/reference/providers/). A request
without the expected bearer key gets the provider's 401. Faults queued with `fail()` are served
before normal answers: any status, headers, body, a delay for timeouts, or a body trickled a
byte at a time (each read well within a socket timeout, the whole answer far past a deadline).
The pod builders put secrets (env values, jupyter tokens) into the data, so tests can prove
they never come out the other side.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PROVIDERS = ("runpod", "vast", "lambda")
# The SDK's podStop / podTerminate mutations (runpod/api/mutations/pods.py).
RUNPOD_MUTATION = re.compile(r'(podStop|podTerminate)\(input: \{ podId: "([^"]*)" \}\)')
VAST_INSTANCE = re.compile(r"/api/v0/instances/(\d+)/")
# Secrets the fake puts into pod data; they must never reach a Target, a report or a log.
POD_SECRET = "hf_PODSECRETxyz123456789"
JUPYTER_SECRET = "jupytertoken0123456789abcdef"


@dataclass
class Fault:
    status: int = 500
    body: bytes = b'{"error": "internal"}'
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    # Seconds to wait before answering (longer than the client's timeout: a timeout).
    delay_s: float = 0.0
    # Seconds between the body's bytes, sent one at a time after the headers.
    trickle_s: float = 0.0
    # Served only to a request of this method (a listing answered, the call after it trickled).
    method: str | None = None


@dataclass
class Seen:
    provider: str
    method: str
    path: str
    query: dict[str, str]
    authorization: str | None
    body: str
    user_agent: str | None
    at: float  # time.monotonic() on arrival


class FakeProviderApi:
    def __init__(self, keys: dict[str, str] | None = None) -> None:
        self.keys = dict(keys or {p: f"test-{p}-key" for p in PROVIDERS})
        self.runpod_pods: list[dict[str, Any]] = []
        self.vast_instances: list[dict[str, Any]] = []
        self.lambda_instances: list[dict[str, Any]] = []
        self.requests: list[Seen] = []
        # Added to every answer: a provider API across a WAN (the release benchmark).
        self.latency_s = 0.0
        self._faults: dict[str, list[Fault]] = {p: [] for p in PROVIDERS}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeProviderApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def base_url(self, provider: str) -> str:
        return f"{self.url}/{provider}"

    def fail(self, provider: str, fault: Fault, times: int = 1) -> None:
        with self._lock:
            self._faults[provider] += [fault] * times

    def clear_faults(self) -> None:
        with self._lock:
            for queue in self._faults.values():
                queue.clear()

    def seen(self, provider: str) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if r.provider == provider]

    # ------------------------------------------------------------ answers

    def answer(self, provider: str, method: str, path: str, query: dict[str, str], headers: Any, body: str):
        """(status, headers, body bytes, delay, trickle) for one request."""
        auth = headers.get("Authorization")
        seen = Seen(provider, method, path, query, auth, body, headers.get("User-Agent"), time.monotonic())
        with self._lock:
            self.requests.append(seen)
            queued = self._faults[provider]
            fault = next((f for f in queued if f.method in (None, method)), None)
            if fault is not None:
                queued.remove(fault)
        if fault is not None:
            return fault.status, fault.headers, fault.body, fault.delay_s, fault.trickle_s
        if auth != f"Bearer {self.keys[provider]}":
            return _UNAUTHORIZED[provider]
        if provider == "runpod" and method == "POST" and path == "/graphql":
            return _json(200, self._runpod(body))
        if provider == "vast" and method == "GET" and path == "/api/v1/instances":
            return self._vast(query)
        if provider == "vast" and method in ("PUT", "DELETE") and VAST_INSTANCE.fullmatch(path):
            return self._vast_manage(method, int(VAST_INSTANCE.fullmatch(path).group(1)), body)  # type: ignore[union-attr]
        if provider == "lambda" and method == "GET" and path == "/api/v1/instances":
            return _json(200, {"data": self.lambda_instances})
        if provider == "lambda" and method == "POST" and path == "/api/v1/instance-operations/terminate":
            return self._lambda_terminate(body)
        return _json(404, {"error": "not_found", "msg": f"no route {method} {path}"})

    def _runpod(self, body: str) -> dict[str, Any]:
        query = json.loads(body)["query"]
        mutation = RUNPOD_MUTATION.search(query)
        if mutation is not None:
            return self._runpod_mutation(mutation.group(1), mutation.group(2))
        if "myself" not in query or "pods" not in query:
            return {"errors": [{"message": "fake: unsupported query"}]}
        return {"data": {"myself": {"pods": self.runpod_pods}}}

    def _runpod_mutation(self, name: str, pod_id: str) -> dict[str, Any]:
        # As RunPod's GraphQL answers: podStop returns the pod, podTerminate returns null.
        pod = next((p for p in self.runpod_pods if p.get("id") == pod_id), None)
        if pod is None:
            return {"errors": [{"message": "Pod not found"}]}
        if name == "podStop":
            pod.update(desiredStatus="EXITED", runtime=None, uptimeSeconds=0)
            return {"data": {"podStop": {"id": pod_id, "desiredStatus": "EXITED"}}}
        self.runpod_pods.remove(pod)
        return {"data": {"podTerminate": None}}

    def _vast_manage(self, method: str, instance_id: int, body: str):
        inst = next((i for i in self.vast_instances if isinstance(i, dict) and i.get("id") == instance_id), None)
        if inst is None:
            return _json(404, {"success": False, "error": "not_found", "msg": "Instance not found"})
        if method == "DELETE":
            self.vast_instances.remove(inst)
            return _json(200, {"success": True, "msg": "Instance destroyed successfully"})
        state = json.loads(body or "{}").get("state")
        if state not in ("stopped", "running"):
            return _json(400, {"success": False, "error": "invalid_args", "msg": "state must be stopped or running"})
        if state == "stopped":
            inst.update(actual_status="exited", cur_state="stopped", intended_status="stopped", ports=None)
        return _json(200, {"success": True})

    def _lambda_terminate(self, body: str):
        ids = json.loads(body or "{}").get("instance_ids")
        if not isinstance(ids, list) or not ids:
            return _json(400, {"error": {"code": "global/invalid-parameters", "message": "Invalid request data."}})
        found = [i for i in self.lambda_instances if i.get("id") in ids]
        if len(found) != len(ids):
            return _json(
                404,
                {"error": {"code": "global/object-does-not-exist", "message": "Specified instance does not exist."}},
            )
        for inst in found:
            inst["status"] = "terminating"
        return _json(200, {"data": {"terminated_instances": found}})

    def _vast(self, query: dict[str, str]):
        limit = int(query.get("limit", "25"))
        limit = 5 if limit <= 0 else min(limit, 25)

        # Malformed entries (tests of odd data) sort first, as id 0.
        def ident(item: Any) -> int:
            return item.get("id") or 0 if isinstance(item, dict) else 0

        instances = sorted(self.vast_instances, key=ident)
        after = 0
        if "after_token" in query:
            try:
                after = json.loads(base64.b64decode(query["after_token"]))["values"]["id"]
            except (ValueError, KeyError, TypeError):
                return _json(400, {"error": "invalid_token", "msg": "Invalid pagination token"})
        rest = [i for i in instances if ident(i) > after] if "after_token" in query else instances
        page = rest[:limit]
        token = None
        if len(rest) > limit:
            token = base64.b64encode(json.dumps({"values": {"id": ident(page[-1])}}).encode()).decode()
        return _json(
            200,
            {
                "success": True,
                "instances_found": len(page),
                "total_instances": len(instances),
                "label_counts": {},
                "next_token": token,
                "instances": page,
            },
        )


def _json(status: int, data: Any):
    return status, {"Content-Type": "application/json"}, json.dumps(data).encode(), 0.0, 0.0


_UNAUTHORIZED = {
    "runpod": (401, {"Content-Type": "text/plain"}, b"Unauthorized", 0.0, 0.0),
    "vast": _json(401, {"success": False, "error": "invalid_api_key", "msg": "Invalid user key"}),
    "lambda": _json(
        401,
        {
            "error": {
                "code": "global/invalid-api-key",
                "message": "API key was invalid, expired, or deleted.",
                "suggestion": "Check your API key or create a new one, then try again.",
            }
        },
    ),
}


def _handler(api: FakeProviderApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            provider, _, rest = parts.path.lstrip("/").partition("/")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            if provider not in PROVIDERS:
                status, headers, data, delay, trickle_s = _json(404, {"error": "unknown provider prefix"})
            else:
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                status, headers, data, delay, trickle_s = api.answer(
                    provider, method, "/" + rest, query, self.headers, body
                )
            delay += api.latency_s
            if delay:
                time.sleep(delay)
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not trickle_s:
                    self.wfile.write(data)
                for byte in data if trickle_s else b"":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(trickle_s)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

    return Handler


# ---------------------------------------------------------------- schema-shaped pods


def runpod_pod(
    pod_id: str,
    name: str,
    *,
    status: str = "RUNNING",
    ssh: tuple[str, int] | None = ("203.0.113.10", 22101),
    public_ip: bool = True,
    started: bool = True,
    gpu: str = "NVIDIA H100 80GB HBM3",
    gpu_count: int = 1,
    cost: float = 2.99,
    volume_gb: int = 50,
    mount: str = "/workspace",
    image: str = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04",
    machine_id: str | None = None,
) -> dict[str, Any]:
    """A pod as runpod.get_pods() returns it. ssh None: no TCP 22 mapping (proxy SSH only)."""
    ports: list[dict[str, Any]] = [
        {"ip": "100.65.0.2", "isIpPublic": False, "privatePort": 8888, "publicPort": 60001, "type": "http"}
    ]
    if ssh is not None:
        ports.append({"ip": ssh[0], "isIpPublic": public_ip, "privatePort": 22, "publicPort": ssh[1], "type": "tcp"})
    running = status == "RUNNING" and started
    return {
        "id": pod_id,
        "containerDiskInGb": 20,
        "costPerHr": cost,
        "desiredStatus": status,
        "dockerArgs": "",
        "dockerId": None,
        "env": [f"HF_TOKEN={POD_SECRET}", f"JUPYTER_PASSWORD={JUPYTER_SECRET}"],
        "gpuCount": gpu_count,
        "imageName": image,
        "lastStatusChange": "Rented by User: Tue Jun 03 2025 10:00:00 GMT+0000",
        "machineId": machine_id or "m-" + pod_id,
        "memoryInGb": 62,
        "name": name,
        "podType": "RESERVED",
        "port": None,
        "ports": "8888/http" + (",22/tcp" if ssh is not None else ""),
        "uptimeSeconds": 3600 if running else 0,
        "vcpuCount": 16,
        "volumeInGb": volume_gb,
        "volumeMountPath": mount,
        "runtime": {"ports": ports} if running else None,
        "machine": {"gpuDisplayName": gpu},
    }


def vast_instance(
    instance_id: int,
    label: str | None,
    *,
    status: str | None = "running",
    direct: tuple[str, int] | None = ("198.51.100.20", 40022),
    proxy: tuple[str, int] | None = ("ssh4.vast.ai", 31022),
    runtype: str = "ssh_direc ssh_proxy",
    gpu: str = "RTX 4090",
    num_gpus: int = 1,
    dph: float = 0.4012,
    machine_id: int | None = None,
    host_id: int = 77,
) -> dict[str, Any]:
    """An instance as GET /api/v1/instances lists it (HostPort is a string, as Vast sends it)."""
    ports = {"8080/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40080"}]}
    if direct is not None:
        ports["22/tcp"] = [{"HostIp": "0.0.0.0", "HostPort": str(direct[1])}]
    return {
        "id": instance_id,
        "actual_status": status,
        "cur_state": "running" if status == "running" else "stopped",
        "intended_status": "running",
        "label": label,
        "image_uuid": "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-devel",
        "image_runtype": runtype,
        "jupyter_token": JUPYTER_SECRET,
        "extra_env": [["HF_TOKEN", POD_SECRET]],
        "public_ipaddr": direct[0] if direct else "198.51.100.99",
        "ssh_host": proxy[0] if proxy else None,
        "ssh_port": proxy[1] if proxy else None,
        "ports": ports if status == "running" else None,
        "gpu_name": gpu,
        "num_gpus": num_gpus,
        "dph_total": dph,
        "disk_space": 64.0,
        "geolocation": "Texas, US",
        "machine_id": machine_id if machine_id is not None else 1000 + instance_id,
        "host_id": host_id,
    }


def lambda_instance(
    instance_id: str,
    name: str | None,
    *,
    status: str = "active",
    ip: str | None = "192.0.2.30",
    file_systems: dict[str, str] | None = None,
    type_name: str = "gpu_1x_h100_pcie",
    gpu: str = "H100 (80 GB PCIe)",
    gpus: int = 1,
    cents: int = 249,
    region: str = "us-west-1",
) -> dict[str, Any]:
    """An instance as Lambda's listInstances returns it; file_systems: name -> mount point."""
    inst: dict[str, Any] = {
        "id": instance_id,
        "name": name,
        "status": status,
        "private_ip": "10.0.2.100",
        "ssh_key_names": ["laptop"],
        "file_system_names": list(file_systems or {}),
        "region": {"name": region, "description": "California, USA"},
        "instance_type": {
            "name": type_name,
            "description": f"1x {gpu}",
            "gpu_description": gpu,
            "price_cents_per_hour": cents,
            "specs": {"vcpus": 26, "memory_gib": 200, "storage_gib": 1024, "gpus": gpus},
        },
        "hostname": f"{instance_id[:8]}.cloud.lambdalabs.com",
        "jupyter_token": JUPYTER_SECRET,
        "jupyter_url": f"https://jupyter-{instance_id}.lambdaspaces.com/?token={JUPYTER_SECRET}",
        "actions": {},
    }
    if ip is not None:
        inst["ip"] = ip
    if file_systems:
        inst["file_system_mounts"] = [
            {"mount_point": mount, "file_system_id": f"fs-{fs}"} for fs, mount in file_systems.items()
        ]
    return inst
