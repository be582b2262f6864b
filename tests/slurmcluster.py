"""A real Slurm cluster on loopback, for end-to-end tests (Debian slurm-wlm 22.05 and munge).

Slurm's multiple-slurmd mode: every node of slurm.conf has NodeHostname=<this host>,
NodeAddr=127.0.0.1 and a port of its own, and runs as one `slurmd -D -N NAME`. Each slurmd
runs in its own UTS namespace (its hostname is the node's name) and mount namespace, where a
tmpfs over /usr/local/sbin holds the node's own tools: a fake nvidia-smi replaying a recorded
driver (computefence.demo.fakes), or anything a test puts there. munged runs with its own key
and socket (AuthInfo=socket=), slurmctld with its own state folder; everything lives in one
temporary folder and goes away with the cluster.

Needs root, util-linux (unshare, nsenter), slurm-wlm (slurmctld, slurmd, srun, scontrol)
and munge.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from computefence.demo.fakes import write_fake_nvidia_smi

CHECKOUT = Path(__file__).resolve().parent.parent
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
MUNGED = "/usr/sbin/munged"
# In every node's mount namespace this folder is the node's own (a tmpfs): its tools go here.
NODE_BIN = "/usr/local/sbin"
# What a job step on a node sees first on its PATH (srun passes the caller's environment on).
NODE_PATH = f"{NODE_BIN}:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def slurm_unavailable_reason() -> str | None:
    """Why a Slurm cluster cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "the Slurm cluster needs root (namespaces, mknod, slurmd as root)"
    for tool in ("unshare", "nsenter", "srun", "sinfo", "scontrol", "sbatch", "mknod"):
        if shutil.which(tool) is None:
            return f"the Slurm cluster needs `{tool}` on PATH (slurm-wlm, util-linux)"
    for daemon in (SLURMCTLD, SLURMD, MUNGED):
        if not os.access(daemon, os.X_OK):
            return f"the Slurm cluster needs {daemon} (apt install slurm-wlm munge)"
    return None


@dataclass
class NodeSpec:
    name: str
    # computefence.demo.fakes nvidia-smi scenario; None: the node has no nvidia-smi.
    nvidia_smi: str | None = "h100x1"
    # Gres=gpu:N (File= character devices); 0: no GRES.
    gres_gpus: int = 1
    cpus: int = 2
    # The node's python3 (first on a step's PATH): this interpreter without site-packages
    # (-S), so there is no torch to import and a probe takes a second, not the ten that
    # importing torch costs; the probe itself is stdlib only.
    python: str = sys.executable
    # Extra executables in the node's own NODE_BIN: name -> script text.
    bin: dict[str, str] = field(default_factory=dict)


@dataclass
class Node:
    spec: NodeSpec
    port: int
    process: subprocess.Popen | None = None

    @property
    def name(self) -> str:
        return self.spec.name


def _free_port_block(count: int) -> int:
    """The first of `count` consecutive loopback ports that are free now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count >= 65000:
            continue
        taken = False
        for port in range(first, first + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    taken = True
                    break
        if not taken:
            return first
    raise RuntimeError("no block of free loopback ports")


class SlurmCluster:
    """munged, slurmctld and one slurmd per node under `base`; `stop()` ends them all."""

    def __init__(
        self,
        base: Path,
        nodes: list[NodeSpec],
        health_check: list[str] | None = None,
        health_interval: int = 10,
        prolog: list[str] | None = None,
    ):
        self.base = base
        self.specs = nodes
        self.health_check = health_check
        self.health_interval = health_interval
        self.prolog = prolog
        self.nodes: dict[str, Node] = {}
        self.hostname = socket.gethostname()
        self.conf = base / "etc" / "slurm.conf"
        self.munge_socket = base / "munge" / "munge.socket"
        self._daemons: list[subprocess.Popen] = []

    # ------------------------------------------------------------ what clients need

    @property
    def env(self) -> dict[str, str]:
        """The environment of a user on this cluster's login node."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = f"{NODE_BIN}:{env.get('PATH', '')}"
        for name in ("SLURM_ACCOUNT", "SLURM_QOS", "SLURM_PARTITION", "SBATCH_PARTITION", "SLURM_JOB_ID"):
            env.pop(name, None)
        return env

    def run(self, *argv: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=check)

    def state(self, node: str) -> str:
        """The node's state as `sinfo -h -N -o %T` prints it (idle, drained, allocated, down*...)."""
        return self.run("sinfo", "-h", "-N", "-n", node, "-o", "%T").stdout.splitlines()[0].strip()

    def reason(self, node: str) -> str:
        # One line per partition the node is in; the reason is the node's, the same in each.
        return self.run("sinfo", "-h", "-N", "-n", node, "-o", "%E").stdout.splitlines()[0].strip()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> SlurmCluster:
        try:
            self._write_config()
            self._start_munge()
            self._start_controller()
            for node in self.nodes.values():
                self._start_node(node)
            # Registered: idle, or already drained by a health check at registration.
            self.wait_until(
                lambda: all(self.state(n) in ("idle", "drained", "draining") for n in self.nodes),
                what="every node registered",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _write_config(self) -> None:
        port = _free_port_block(len(self.specs) + 1)
        for i, spec in enumerate(self.specs):
            self.nodes[spec.name] = Node(spec, port + 1 + i)
        for folder in ("etc", "munge", "state", "spool", "log", "dev"):
            (self.base / folder).mkdir(parents=True, exist_ok=True)
        lines = [
            "ClusterName=cftest",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={self.base / 'state'}",
            f"SlurmdSpoolDir={self.base / 'spool'}/%n",
            f"SlurmctldPidFile={self.base / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.base / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.base / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.base / 'log'}/slurmd-%n.log",
            "SlurmdParameters=config_overrides",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            "SlurmdTimeout=300",
            "MessageTimeout=5",
            "GresTypes=gpu",
            "SchedulerParameters=sched_interval=1",
        ]
        if self.health_check:
            wrapper = self._node_program("health", self.health_check)
            lines += [f"HealthCheckProgram={wrapper}", f"HealthCheckInterval={self.health_interval}"]
        if self.prolog:
            lines.append(f"Prolog={self._node_program('prolog', self.prolog)}")
        gres = ["AutoDetect=off"]
        for node in self.nodes.values():
            spec = node.spec
            line = f"NodeName={spec.name} NodeHostname={self.hostname} NodeAddr=127.0.0.1 Port={node.port} CPUs={spec.cpus} RealMemory=1000 State=UNKNOWN"
            if spec.gres_gpus:
                line += f" Gres=gpu:{spec.gres_gpus}"
                devices = []
                for i in range(spec.gres_gpus):
                    device = self.base / "dev" / f"{spec.name}-gpu{i}"
                    if not device.exists():
                        os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))
                    devices.append(str(device))
                gres.append(f"NodeName={spec.name} Name=gpu File={','.join(devices)}")
            lines.append(line)
        names = ",".join(self.nodes)
        lines.append(f"PartitionName=gpu Nodes={names} Default=YES MaxTime=INFINITE State=UP")
        lines.append(f"PartitionName=debug Nodes={names} MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (self.conf.parent / "gres.conf").write_text("\n".join(gres) + "\n")

    def _node_program(self, kind: str, argv: list[str]) -> Path:
        """A script slurmd runs on each node (HealthCheckProgram, Prolog) that runs `argv`.

        slurmd gives such a program no PATH and no SLURM_CONF. A real node finds its
        configuration at /etc/slurm; this cluster's is only here, so the wrapper names it (and
        the checkout under test), and nothing else. Output goes to log/KIND-NODE.log."""
        wrapper = self.base / kind
        log = f'{shlex.quote(str(self.base / "log"))}/{kind}-"$SLURMD_NODENAME".log'
        wrapper.write_text(
            "#!/bin/sh\n"
            f"export SLURM_CONF={shlex.quote(str(self.conf))} PYTHONPATH={shlex.quote(str(CHECKOUT))}\n"
            f"exec {shlex.join(argv)} >>{log} 2>&1\n"
        )
        wrapper.chmod(0o755)
        return wrapper

    def _start_munge(self) -> None:
        key = self.base / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn(
            [
                MUNGED,
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={self.base / 'munge' / 'munged.pid'}",
                f"--log-file={self.base / 'log' / 'munged.log'}",
                f"--seed-file={self.base / 'munge' / 'munged.seed'}",
            ]
        )
        self.wait_until(self.munge_socket.exists, what="munged's socket")

    def _start_controller(self) -> None:
        self._spawn([SLURMCTLD, "-D", "-i", "-f", str(self.conf)])
        self.wait_until(lambda: self.run("scontrol", "ping", check=False).stdout.count("UP") > 0, what="slurmctld")

    def _start_node(self, node: Node) -> None:
        """slurmd for `node` in its own UTS and mount namespaces, its tools in a tmpfs of its own."""
        tools = self.base / "nodes" / node.name
        tools.mkdir(parents=True, exist_ok=True)
        (self.base / "spool" / node.name).mkdir(parents=True, exist_ok=True)
        if node.spec.nvidia_smi:
            write_fake_nvidia_smi(tools, node.spec.nvidia_smi)
        scripts = {"python3": f'#!/bin/sh\nexec {shlex.quote(node.spec.python)} -S "$@"\n', **node.spec.bin}
        for name, text in scripts.items():
            path = tools / name
            path.write_text(text)
            path.chmod(0o755)
        script = (
            'hostname "$1" && mount -t tmpfs -o mode=0755 cf-node "$2" && cp -a "$3"/. "$2"/ && '
            'exec "$4" -D -N "$1" -f "$5"'
        )
        node.process = self._spawn(
            [
                "unshare",
                "--uts",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                script,
                "slurmd-node",
                node.name,
                NODE_BIN,
                str(tools),
                SLURMD,
                str(self.conf),
            ]
        )

    def _spawn(self, argv: list[str]) -> subprocess.Popen:
        log = open(self.base / "log" / "spawn.log", "ab")
        process = subprocess.Popen(
            argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
        log.close()
        self._daemons.append(process)
        return process

    def set_nvidia_smi(self, name: str, scenario: str) -> None:
        """Put another recorded driver on the running node (its NODE_BIN is its own tmpfs)."""
        node = self.nodes[name]
        assert node.process is not None
        staged = self.base / "nodes" / f"{name}-next"
        write_fake_nvidia_smi(staged, scenario)
        subprocess.run(
            ["nsenter", "-t", str(node.process.pid), "-m", "--", "cp", "-a", f"{staged}/.", f"{NODE_BIN}/"],
            check=True,
            timeout=10,
        )

    def kill_node(self, name: str) -> None:
        """slurmd dies; the controller does not notice for SlurmdTimeout (300 s)."""
        process = self.nodes[name].process
        assert process is not None
        _killpg(process.pid)
        process.wait(timeout=10)

    def restart_node(self, name: str) -> None:
        self._start_node(self.nodes[name])

    def stop(self) -> None:
        # Job steps (slurmstepd and its tasks) run in sessions of their own and would outlive
        # their slurmd: they are found by the node's mount namespace.
        namespaces = {_mount_namespace(n.process.pid) for n in self.nodes.values() if n.process is not None}
        for process in reversed(self._daemons):
            _killpg(process.pid)
        for pid in _pids_in(namespaces - {None, _mount_namespace(os.getpid())}):
            _kill(pid)
        for process in self._daemons:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._daemons.clear()

    def wait_until(self, condition, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.2)
        logs = "\n".join(
            f"--- {p.name}\n" + p.read_text(errors="replace")[-1500:] for p in sorted((self.base / "log").glob("*"))
        )
        raise AssertionError(f"timed out waiting for {what}\n{logs}")


def _mount_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _pids_in(namespaces: set[str | None]) -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and _mount_namespace(int(e)) in namespaces]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
