"""The built-in demo fleet: a few simulated GPU pods on loopback, each with its own fault.

`computefence fleet check --demo` checks this fleet so a new user sees the whole flow with
no pods rented. Every pod is an in-process SSH server (computefence.demo.server) that runs
the real probe the real runner sends, under that pod's fake `nvidia-smi`, fake `torch`,
environment and simulated mount table. Everything lives in one temporary directory that is
removed on exit, Ctrl-C included.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from computefence.connectors.asyncssh_quiet import asyncssh
from computefence.demo.fakes import write_fake_nvidia_smi, write_fake_torch
from computefence.demo.jobs import start_job, stop_jobs, wait_until_ready, write_job_files
from computefence.demo.server import PodServer, PodShell, start_pod_server
from computefence.errors import ConfigError
from computefence.interrupt import held
from computefence.models import CheckOptions, ProviderInfo, Target

HOST = "127.0.0.1"
USER = "root"
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class DemoPod:
    """One simulated pod and the fault it carries."""

    name: str
    gpu_type: str
    cost_per_hour: float
    nvidia_smi: str = "h100x1"  # computefence.demo.fakes scenario
    torch: str = "cu124"
    # A persistent volume mounted at <pod>/workspace; without one, /workspace is a plain
    # directory of the container's overlay root and vanishes with the pod.
    volume: bool = True
    hf_home_on_volume: bool = True
    accelerate_processes: int | None = None
    # No SSH server at all: the port is held closed.
    reachable: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)
    # What `--perf` measures on its GPUs (computefence.demo.fakes.write_fake_torch).
    canary: dict[str, Any] | None = None
    # A simulated training run (computefence.demo.jobs): train.py's arguments, "{workspace}"
    # and "{home}" standing for the pod's folders. None: no job runs.
    job: tuple[str, ...] | None = None


# Figures a healthy card of the model reaches (see providers/hardware/gpu-performance.yaml).
_H100_CANARY = {"tflops": 742.0, "h2d_gbps": 53.4, "d2h_gbps": 52.1}
_RTX4090_CANARY = {"tflops": 148.0, "h2d_gbps": 24.6, "d2h_gbps": 25.9}

DEMO_PODS: tuple[DemoPod, ...] = (
    # Nothing wrong; its HF_TOKEN shows the probe reports secrets as present, never by value.
    DemoPod(
        "pod-healthy",
        "NVIDIA H100 80GB HBM3",
        2.99,
        extra_env={"HF_TOKEN": "hf_demoTokenNotARealSecret0000"},
        canary=_H100_CANARY,
    ),
    # A CPU-only torch build on a GPU pod: training silently runs on the CPU.
    DemoPod("pod-cpu-torch", "NVIDIA H100 80GB HBM3", 2.99, torch="cpu"),
    # nvidia-smi cannot talk to the driver (exit 9).
    DemoPod("pod-driver-broken", "NVIDIA A100-SXM4-80GB", 1.89, nvidia_smi="driver-unreachable"),
    # No volume: checkpoints and the HF cache on the container disk; accelerate set up for
    # 2 GPUs on a 1-GPU pod.
    DemoPod(
        "pod-ephemeral-ckpt",
        "NVIDIA GeForce RTX 4090",
        0.69,
        nvidia_smi="rtx4090x1",
        volume=False,
        hf_home_on_volume=False,
        accelerate_processes=2,
        canary=_RTX4090_CANARY,
    ),
    # Driver 470 (CUDA 11.4) under a torch built for CUDA 12.6.
    DemoPod(
        "pod-old-driver", "NVIDIA A100-SXM4-40GB", 1.29, nvidia_smi="a100x1-driver470", torch="cu126-driver-too-old"
    ),
    # Nothing listens on its SSH port.
    DemoPod("pod-unreachable", "NVIDIA H100 80GB HBM3", 2.99, reachable=False),
)

# `fleet watch --demo`: one pod per failure the watch can show on this machine, and a healthy
# run. run.disk-eta is not among them: it needs a disk that really fills.
WATCH_PODS: tuple[DemoPod, ...] = (
    DemoPod("run-healthy", "NVIDIA H100 80GB HBM3", 2.99, job=("--output_dir", "{workspace}/out")),
    # The job died (or never started) and the pod bills on.
    DemoPod("run-no-job", "NVIDIA H100 80GB HBM3", 2.99),
    # The job runs and its GPU does nothing.
    DemoPod(
        "run-gpu-idle", "NVIDIA A100-SXM4-80GB", 1.89, job=("--output_dir", "{workspace}/out", "--utilization", "0")
    ),
    # Labels the model cannot learn from: the loss sits at ln 2.
    DemoPod("run-plateau", "NVIDIA H100 80GB HBM3", 2.99, job=("--output_dir", "{workspace}/out", "--loss", "plateau")),
    # The loss went to NaN at step 40.
    DemoPod("run-nan", "NVIDIA H100 80GB HBM3", 2.99, job=("--output_dir", "{workspace}/out", "--loss", "nan")),
    # Alive, but its log and checkpoints last moved 20 minutes ago.
    DemoPod(
        "run-stalled", "NVIDIA GeForce RTX 4090", 0.69, job=("--output_dir", "{workspace}/out", "--stall_after", "60")
    ),
    # Checkpoints under the home folder, on the container disk, not on the volume.
    DemoPod("run-ephemeral", "NVIDIA GeForce RTX 4090", 0.69, job=("--output_dir", "{home}/out")),
)


@dataclass
class DemoFleet:
    targets: list[Target]
    known_hosts_path: str
    client_key_path: str
    root: Path
    pods: tuple[DemoPod, ...]


@contextmanager
def demo_fleet(pods: tuple[DemoPod, ...] = DEMO_PODS) -> Iterator[DemoFleet]:
    """Start the demo pods on 127.0.0.1, yield the fleet, and tear it all down."""
    if os.name != "posix":
        raise ConfigError("--demo needs Linux or macOS: its simulated pods run their commands with /bin/sh")
    root = _demo_dir()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="computefence-demo", daemon=True)
    servers: list[PodServer] = []
    closed_ports: list[socket.socket] = []
    jobs: list[subprocess.Popen[bytes]] = []
    try:
        # A Ctrl-C while the pods start is acted on once they are up, so none is left half started.
        with held():
            thread.start()
            client_key = asyncssh.generate_private_key("ssh-ed25519")
            client_key_path = root / "client_ed25519"
            client_key.write_private_key(str(client_key_path))
            os.chmod(client_key_path, 0o600)
            known_hosts_path = root / "known_hosts"
            known_lines: list[str] = []
            targets: list[Target] = []
            for pod in pods:
                pod_root = root / pod.name
                if pod.reachable:
                    shell = _build_pod(pod, pod_root)
                    if pod.job is not None:
                        jobs.append(_start_job(pod, pod_root, shell))
                    host_key = asyncssh.generate_private_key("ssh-ed25519")
                    server = asyncio.run_coroutine_threadsafe(
                        start_pod_server(shell, host_key, client_key, HOST), loop
                    ).result(_START_TIMEOUT_S)
                    servers.append(server)
                    port = server.port
                    known_lines.append(f"[{HOST}]:{port} {host_key.export_public_key().decode().strip()}")
                else:
                    port = _closed_port(closed_ports)
                targets.append(_target(pod, pod_root, port, client_key_path, known_hosts_path))
            known_hosts_path.write_text("\n".join(known_lines) + "\n", encoding="utf-8")
            wait_until_ready([root / pod.name / _READY for pod in pods if pod.job is not None], jobs)
        yield DemoFleet(
            targets=targets,
            known_hosts_path=str(known_hosts_path),
            client_key_path=str(client_key_path),
            root=root,
            pods=pods,
        )
    finally:
        with held():  # and one during the teardown once it is done
            stop_jobs(jobs)
            if thread.is_alive():
                stop = asyncio.run_coroutine_threadsafe(_close_all(servers), loop)
                try:
                    stop.result(_STOP_TIMEOUT_S)
                except BaseException:
                    stop.cancel()
                loop.call_soon_threadsafe(loop.stop)
                thread.join(_STOP_TIMEOUT_S)
            if not thread.is_alive():
                loop.close()
            for sock in closed_ports:
                sock.close()
            shutil.rmtree(root, ignore_errors=True)


def _demo_dir() -> Path:
    # The pods execute their fake nvidia-smi and python3 from here: not from a noexec /tmp.
    root = Path(tempfile.mkdtemp(prefix="cf-demo-"))
    if not os.statvfs(root).f_flag & getattr(os, "ST_NOEXEC", 0):
        return root
    root.rmdir()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "computefence"
    cache.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="cf-demo-", dir=cache))


async def _close_all(servers: list[PodServer]) -> None:
    await asyncio.gather(*(server.close() for server in servers), return_exceptions=True)


def _closed_port(holders: list[socket.socket]) -> int:
    # Bound but never listening: connections are refused, and no other socket (not even a
    # client's own ephemeral port) can take the port while the demo runs.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((HOST, 0))
    holders.append(sock)
    port: int = sock.getsockname()[1]
    return port


def _target(pod: DemoPod, pod_root: Path, port: int, client_key_path: Path, known_hosts_path: Path) -> Target:
    workspace = pod_root / "workspace"
    return Target(
        name=pod.name,
        host=HOST,
        port=port,
        user=USER,
        identity_files=[str(client_key_path)],
        known_hosts=[str(known_hosts_path)],
        tags=["demo"],
        checks=CheckOptions(output_dir=str(workspace / "checkpoints"), expect_gpu=True),
        source="demo",
        provider=ProviderInfo(
            provider="runpod",
            pod_id=_pod_id(pod.name),
            # As RunPod's machineId: the machine the hosts ledger and `fleet watch --hosts-history` key by.
            machine_id=demo_machine_id(pod.name),
            name=pod.name,
            state="RUNNING",
            gpu_type=pod.gpu_type,
            gpu_count=1,
            cost_per_hour=pod.cost_per_hour,
            volume_mount_path=str(workspace) if pod.volume else None,
            volume_gb=100.0 if pod.volume else 0.0,
            container_disk_gb=20.0,
            persistent_paths=[str(workspace)] if pod.volume else [],
        ),
        probe_roots={name: str(pod_root / name) for name in ("proc", "etc", "dev")},
    )


def _pod_id(name: str) -> str:
    return "demo" + name.removeprefix("pod-").replace("-", "")[:10]


def demo_machine_id(name: str) -> str:
    return _pod_id(name) + "-host"


# ---------------------------------------------------------------- pod layout


def _build_pod(pod: DemoPod, pod_root: Path) -> PodShell:
    """Lay out one pod's files under pod_root and return how its commands run."""
    home = pod_root / "root"
    workspace = pod_root / "workspace"
    bin_dir = pod_root / "bin"
    site_dir = pod_root / "site"
    for directory in (home, workspace, bin_dir, site_dir):
        directory.mkdir(parents=True)
    write_fake_nvidia_smi(bin_dir, pod.nvidia_smi)
    write_fake_torch(site_dir, pod.torch, pod.canary)
    _write_python(bin_dir)
    _write_pip(site_dir, pod_root / "builds", pod.canary)

    hf_home = workspace / ".cache" / "huggingface" if pod.hf_home_on_volume else home / ".cache" / "huggingface"
    hf_home.mkdir(parents=True)
    if pod.accelerate_processes:
        accel = hf_home / "accelerate" / "default_config.yaml"
        accel.parent.mkdir(parents=True)
        accel.write_text(_accelerate_yaml(pod.accelerate_processes), encoding="utf-8")

    env = {
        "PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": str(site_dir),
        "HOME": str(home),
        "USER": USER,
        "LOGNAME": USER,
        "SHELL": "/bin/sh",
        "LANG": "C.UTF-8",
        "RUNPOD_POD_ID": _pod_id(pod.name),
        "RUNPOD_GPU_COUNT": "1",
        **pod.extra_env,
    }
    if pod.hf_home_on_volume:
        env["HF_HOME"] = str(hf_home)
    _write_proc(pod_root / "proc", _mountinfo(pod, workspace), env)
    _write_etc(pod_root / "etc")
    _write_dev(pod_root / "dev", with_gpu=pod.nvidia_smi != "driver-unreachable")
    return PodShell(env=env, cwd=str(workspace))


_READY = "job-ready"


def _start_job(pod: DemoPod, pod_root: Path, shell: PodShell) -> subprocess.Popen[bytes]:
    assert pod.job is not None
    folders = {"workspace": str(pod_root / "workspace"), "home": str(pod_root / "root")}
    args = (*(arg.format(**folders) for arg in pod.job), "--ready", str(pod_root / _READY))
    job_dir = pod_root / "workspace" / "job"
    write_job_files(pod_root / "bin", job_dir)
    return start_job(
        pod_root / "bin", job_dir, pod_root / "proc", pod_root / "workspace" / "train.log", shell.env, args
    )


def _write_python(bin_dir: Path) -> None:
    # The pod's python3 is the interpreter running ComputeFence, linked under the pod's own
    # name: the probe reports this path, so a fix names the pod's python, never the user's.
    (bin_dir / "python3").symlink_to(sys.executable)


def _write_pip(site_dir: Path, builds: Path, canary: dict[str, Any] | None) -> None:
    """The pod's `python3 -m pip` (site_dir comes first on its sys.path): it installs the
    recorded torch builds from `builds` into site_dir and touches nothing outside the pod."""
    for tag in _PIP_BUILDS:
        write_fake_torch(builds / tag, tag, canary)
    (site_dir / "pip").mkdir()
    (site_dir / "pip" / "__init__.py").write_text("", encoding="utf-8")
    (site_dir / "pip" / "__main__.py").write_text(_DEMO_PIP, encoding="utf-8")


# The CUDA builds a demo pod's pip can install (index tag = computefence.demo.fakes scenario).
_PIP_BUILDS = ("cu124",)

_DEMO_PIP = """# pip on a computefence demo pod: installs the recorded torch builds beside this package,
# any other package as a bare dist-info; it writes only inside the pod's own folder.
import os
import re
import shutil
import sys

SITE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILDS = os.path.join(os.path.dirname(SITE), "builds")


def remove(name):
    for entry in os.listdir(SITE):
        if entry == name or re.match(re.escape(name) + r"-[^-]+[.]dist-info$", entry):
            path = os.path.join(SITE, entry)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
            print("  Successfully uninstalled " + entry)


def main(args):
    if args[:2] == ["uninstall", "-y"]:
        for name in args[2:]:
            remove(name)
        return 0
    if not args or args[0] != "install":
        print("demo pip: only install and uninstall -y", file=sys.stderr)
        return 2
    index = args[args.index("--index-url") + 1] if "--index-url" in args else "/cu124"
    for requirement in [a for a in args[1:] if not a.startswith("-") and a != index]:
        name = re.split(r"[<>=!~ \\[]", requirement, maxsplit=1)[0]
        if name == "torch":
            build = os.path.join(BUILDS, index.rstrip("/").rsplit("/", 1)[-1])
            if not os.path.isdir(build):
                print("ERROR: No matching distribution found for " + requirement, file=sys.stderr)
                return 1
            remove("torch")
            for entry in os.listdir(build):
                shutil.copytree(os.path.join(build, entry), os.path.join(SITE, entry))
        else:
            version = (re.findall(r"[0-9][0-9a-zA-Z.]*", requirement) or ["1.0"])[0]
            remove(name)
            info = os.path.join(SITE, name + "-" + version + ".dist-info")
            os.makedirs(info)
            with open(os.path.join(info, "METADATA"), "w") as fh:
                fh.write("Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (name, version))
        print("Successfully installed " + requirement)
    return 0


sys.exit(main(sys.argv[1:]))
"""


def _accelerate_yaml(processes: int) -> str:
    return (
        "compute_environment: LOCAL_MACHINE\n"
        "distributed_type: MULTI_GPU\n"
        "mixed_precision: bf16\n"
        "num_machines: 1\n"
        f"num_processes: {processes}\n"
        "gpu_ids: all\n"
        "use_cpu: false\n"
    )


def _mountinfo(pod: DemoPod, workspace: Path) -> str:
    """A container's mount table as /proc/self/mountinfo shows it, with the pod's own paths."""
    lines = [
        "1001 1000 0:51 / / rw,relatime master:1 - overlay overlay "
        "rw,lowerdir=/var/lib/docker/overlay2/l/DEMO:/var/lib/docker/overlay2/l/BASE,"
        "upperdir=/var/lib/docker/overlay2/demo/diff,workdir=/var/lib/docker/overlay2/demo/work",
        "1002 1001 0:54 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
        "1003 1001 0:55 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755",
        "1004 1003 0:57 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k",
        "1005 1001 259:1 /var/lib/docker/containers/demo/hostname /etc/hostname rw,relatime - ext4 /dev/nvme0n1p1 rw",
    ]
    if pod.volume:
        lines.append(
            f"1006 1001 259:3 /runpod-volume/{_pod_id(pod.name)} {_mount_escape(str(workspace))} "
            "rw,relatime - ext4 /dev/nvme1n1 rw"
        )
    return "\n".join(lines) + "\n"


def _mount_escape(path: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    return "".join(f"\\{ord(ch):03o}" if ch in " \t\n\\" else ch for ch in path)


def _write_proc(proc: Path, mountinfo: str, env: dict[str, str]) -> None:
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text(mountinfo, encoding="utf-8")
    # The container's init environment; a login session may differ from it.
    (proc / "1").mkdir()
    (proc / "1" / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
    # Everything else the probe reads from /proc is the real machine's.
    for name in ("meminfo", "cpuinfo", "version", "uptime", "loadavg", "driver"):
        real = Path("/proc") / name
        if real.exists():
            (proc / name).symlink_to(real)


def _write_dev(dev: Path, with_gpu: bool) -> None:
    dev.mkdir()
    # A driver that is not loaded leaves no device nodes behind.
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm") if with_gpu else ():
        (dev / name).touch()


def _write_etc(etc: Path) -> None:
    etc.mkdir()
    (etc / "os-release").write_text(
        'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n',
        encoding="utf-8",
    )
