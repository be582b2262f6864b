"""A fleet of real OpenSSH sshd "pods" on this machine, for end-to-end tests.

Each pod is one `sshd -D -e` in its own mount, UTS and PID namespaces, chrooted into an
overlay of `/` whose upper layer is a tmpfs private to the pod. The upper layer holds what
makes the pod different: its sshd_config, host key, /root (opaque, so the machine's own
dotfiles stay out), fake nvidia-smi and torch, hidden or replaced binaries. /tmp and
/dev/shm are the pod's own tmpfs; /workspace is an optional loop-mounted ext4 image.
Everything a pod mounts lives in its namespace, so it all goes away when its sshd exits.

Needs root, util-linux (unshare, nsenter), openssh-server and e2fsprogs.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

SSHD = "/usr/sbin/sshd"
POD_SSHD_CONFIG = "/etc/ssh/computefence_sshd_config"
POD_HOST_KEY = "/etc/ssh/computefence_host_ed25519_key"
# Where the fake torch lives in a pod; a .pth file puts it on the pod python's path.
POD_FAKES_SITE = "/opt/computefence-fakes/site-packages"
POD_PTH = "/usr/lib/python3/dist-packages/computefence-fakes.pth"
# Where the real torch (and transformers) of this test run is seen in a pod that asks for it:
# this interpreter's site-packages, mounted read-only, on the pod's python3 (the same 3.11).
POD_REAL_SITE = "/opt/computefence-real/site-packages"
POD_REAL_PTH = "/usr/lib/python3/dist-packages/computefence-real.pth"
# Connection-dropping default of OpenSSH ("10:30:100") unless a spec asks otherwise.
BUSY_MAX_STARTUPS = "200:30:400"


def fleet_unavailable_reason() -> str | None:
    """Why real sshd pods cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "sshd pods need root (mount namespaces, overlayfs, loop devices)"
    for tool in ("unshare", "nsenter", "chroot", "mkfs.ext4", "fallocate"):
        if shutil.which(tool) is None:
            return f"sshd pods need `{tool}` on PATH"
    if not os.access(SSHD, os.X_OK):
        return f"sshd pods need openssh-server ({SSHD} is missing)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "sshd pods need overlayfs"
    return None


@dataclass
class PodSpec:
    name: str
    # computefence.demo.fakes scenarios; None leaves the pod without nvidia-smi / torch.
    nvidia_smi: str | None = None
    torch: str | None = None
    # What the fake torch's --perf canary measures (computefence.demo.fakes.write_fake_torch).
    canary: dict | None = None
    # SetEnv for every session on the pod.
    env: dict[str, str] = field(default_factory=dict)
    # Apparent size of an ext4 image mounted at /workspace ("50G"); None: no /workspace mount.
    workspace_size: str | None = None
    # Leave only this many bytes free on /workspace (fallocate'd filler file).
    workspace_free_bytes: int | None = None
    # Absolute paths hidden in the pod (overlay whiteouts), e.g. "/usr/bin/python3".
    hide: list[str] = field(default_factory=list)
    # Extra files in the pod: absolute path -> text; paths under a bin/ dir are made executable.
    files: dict[str, str] = field(default_factory=dict)
    bashrc: str | None = None
    max_startups: str | None = BUSY_MAX_STARTUPS
    # True: the real torch and transformers of this test run (and torchrun) in the pod.
    real_torch: bool = False
    # False: the client key is not authorized (auth failure).
    authorize_client: bool = True
    shm_size: str = "64m"


@dataclass
class Pod:
    spec: PodSpec
    host: str
    port: int
    dir: Path
    host_key: asyncssh.SSHKey
    process: subprocess.Popen | None = None
    sshd_pid: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def log(self) -> Path:
        return self.dir / "sshd.log"

    @property
    def upper(self) -> Path:
        """The overlay upper layer, as seen inside the pod's mount namespace."""
        return self.dir / "fs" / "upper"

    @property
    def merged(self) -> Path:
        return self.dir / "fs" / "merged"

    def known_hosts_line(self, key: asyncssh.SSHKey | None = None) -> str:
        key = key or self.host_key
        public = key.export_public_key("openssh").decode().split()
        return f"[{self.host}]:{self.port} {public[0]} {public[1]}\n"

    def in_namespace(self, argv: list[str], timeout: float = 10) -> str:
        """Run a command in the pod's mount namespace (root: the host's /, with the pod's mounts)."""
        assert self.sshd_pid is not None
        result = subprocess.run(
            ["nsenter", "-t", str(self.sshd_pid), "-m", "--", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return result.stdout

    def filesystem_snapshot(self) -> list[str]:
        """Every writable place of the pod: names, types, sizes, modes and mtimes."""
        roots = [str(self.upper), str(self.merged / "tmp"), str(self.merged / "dev/shm")]
        if self.spec.workspace_size:
            roots.append(str(self.merged / "workspace"))
        out = self.in_namespace(["find", *roots, "-printf", r"%p\t%y\t%s\t%m\t%T@\n"])
        return sorted(out.splitlines())

    def pid_namespace_processes(self) -> list[tuple[int, str]]:
        """(host pid, command line) of every process in the pod's PID namespace."""
        assert self.sshd_pid is not None
        ns = os.readlink(f"/proc/{self.sshd_pid}/ns/pid")
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                    continue
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            found.append((int(entry), cmdline.strip()))
        return found

    def session_processes(self) -> list[int]:
        """Per-connection sshd processes (children of the listening sshd)."""
        return [pid for pid, cmd in self.pid_namespace_processes() if pid != self.sshd_pid and cmd.startswith("sshd:")]

    def wait_for_process(self, needle: str, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid, cmd in self.pid_namespace_processes():
                if needle in cmd:
                    return pid
            time.sleep(0.05)
        raise AssertionError(f"no process matching {needle!r} appeared in pod {self.name}")

    def stop(self) -> None:
        """Stop the pod: its sshd is PID 1 of the namespace; when it exits, the namespace goes."""
        if self.process is None:
            return
        if self.sshd_pid is not None:
            _signal(self.sshd_pid, signal.SIGKILL)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None
        self.sshd_pid = None


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class SshFleet:
    """Starts and stops pods under one base directory, all reachable with one client key."""

    def __init__(self, base: Path):
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.client_key = asyncssh.generate_private_key("ssh-ed25519", comment="computefence-tests")
        self.identity_file = base / "id_ed25519"
        self.client_key.write_private_key(str(self.identity_file))
        self.identity_file.chmod(0o600)
        self.pods: list[Pod] = []
        self._lock = threading.Lock()
        self._count = 0

    # ------------------------------------------------------------ lifecycle

    def start(self, specs: list[PodSpec], *, host: str = "127.0.0.1") -> list[Pod]:
        """Start pods together and wait until each answers with an SSH banner.

        A pod dies with the thread that started it (so a killed test run leaves no pods
        behind): start pods from a thread that outlives them, as the main thread does.
        """
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(specs)))) as pool:
            pods = list(pool.map(lambda spec: self._prepare(spec, host=host), specs))
        self._launch(pods)
        return pods

    def restart(self, pod: Pod, *, new_host_key: bool = False) -> Pod:
        """The same pod on the same address and port, optionally with a new host key (a recycled pod)."""
        pod.stop()
        if new_host_key:
            pod.host_key = asyncssh.generate_private_key("ssh-ed25519")
            self._write_stage(pod)
        self._launch([pod])
        return pod

    def stop(self, pod: Pod) -> None:
        pod.stop()
        with self._lock:
            if pod in self.pods:
                self.pods.remove(pod)

    def stop_all(self) -> None:
        errors = []
        for pod in list(self.pods):
            try:
                self.stop(pod)
            except Exception as exc:  # keep stopping the others
                errors.append(f"{pod.name}: {exc}")
        if errors:
            raise RuntimeError("pods did not stop cleanly: " + "; ".join(errors))

    # ------------------------------------------------------------ building a pod

    def _prepare(
        self, spec: PodSpec, *, host: str, port: int | None = None, host_key: asyncssh.SSHKey | None = None
    ) -> Pod:
        with self._lock:
            self._count += 1
            pod_dir = self.base / f"pod-{self._count:03d}-{spec.name}"
        (pod_dir / "fs").mkdir(parents=True)
        pod = Pod(
            spec=spec,
            host=host,
            port=port or free_port(host),
            dir=pod_dir,
            host_key=host_key or asyncssh.generate_private_key("ssh-ed25519"),
        )
        self._write_stage(pod)
        if spec.workspace_size:
            image = pod_dir / "workspace.img"
            with open(image, "wb") as fh:
                fh.truncate(_parse_size(spec.workspace_size))
            subprocess.run(
                ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", str(image)],
                check=True,
                capture_output=True,
            )
        with self._lock:
            self.pods.append(pod)
        return pod

    def _write_stage(self, pod: Pod) -> None:
        spec = pod.spec
        stage = pod.dir / "stage"

        def put(path: str, text: str, mode: int = 0o644) -> Path:
            target = stage / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            target.chmod(mode)
            return target

        for directory in ("etc/ssh", "run/sshd", "root/.ssh", "usr/local/bin", "workspace"):
            (stage / directory).mkdir(parents=True, exist_ok=True)
        (stage / "root").chmod(0o700)
        (stage / "root/.ssh").chmod(0o700)
        # An opaque /root: nothing of the machine's own /root (slow .bashrc, pyenv) shows in the pod.
        os.setxattr(stage / "root", "trusted.overlay.opaque", b"y")

        key = pod.host_key.export_private_key("openssh").decode()
        put(POD_HOST_KEY, key, 0o600)
        put(POD_HOST_KEY + ".pub", pod.host_key.export_public_key("openssh").decode())
        authorized = self.client_key if spec.authorize_client else asyncssh.generate_private_key("ssh-ed25519")
        put("/root/.ssh/authorized_keys", authorized.export_public_key("openssh").decode(), 0o600)
        put("/root/.bashrc", spec.bashrc or "")
        put(POD_SSHD_CONFIG, self._sshd_config(pod))
        put("/etc/hostname", spec.name + "\n")

        if spec.nvidia_smi or spec.torch:
            from computefence.demo import fakes

            if spec.nvidia_smi:
                script = fakes.write_fake_nvidia_smi(stage / "usr/local/bin", spec.nvidia_smi)
                # The pod's own interpreter, not this process's (which may live under the hidden /root).
                _, _, body = script.read_text().partition("\n")
                script.write_text("#!/usr/bin/python3\n" + body)
            if spec.torch:
                site = stage / POD_FAKES_SITE.lstrip("/")
                site.mkdir(parents=True, exist_ok=True)
                fakes.write_fake_torch(site, spec.torch, spec.canary)
                put(POD_PTH, POD_FAKES_SITE + "\n")
        if spec.real_torch:
            (stage / POD_REAL_SITE.lstrip("/")).mkdir(parents=True, exist_ok=True)
            put(POD_REAL_PTH, POD_REAL_SITE + "\n")
            put(
                "/usr/local/bin/torchrun", "#!/usr/bin/python3\nfrom torch.distributed.run import main\nmain()\n", 0o755
            )
        for path, text in spec.files.items():
            put(path, text, 0o755 if "/bin/" in path else 0o644)
        for path in spec.hide:
            whiteout = stage / path.lstrip("/")
            whiteout.parent.mkdir(parents=True, exist_ok=True)
            if not whiteout.exists():
                os.mknod(whiteout, stat.S_IFCHR | 0o600, os.makedev(0, 0))

    def _sshd_config(self, pod: Pod) -> str:
        spec = pod.spec
        lines = [
            f"ListenAddress {pod.host}:{pod.port}",
            f"HostKey {POD_HOST_KEY}",
            "PidFile none",
            "AuthorizedKeysFile /root/.ssh/authorized_keys",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "LogLevel INFO",
            "MaxSessions 50",
        ]
        if spec.max_startups:
            lines.append(f"MaxStartups {spec.max_startups}")
        if spec.env:
            lines.append("SetEnv " + " ".join(f'{k}="{v}"' for k, v in spec.env.items()))
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------ running a pod

    def _launch(self, pods: list[Pod], attempts: int = 3) -> None:
        waiting = pods
        for _attempt in range(attempts):
            for pod in waiting:
                self._spawn(pod)
            waiting = self._not_ready(waiting)
            if not waiting:
                return
            for pod in waiting:
                pod.stop()
                # Most likely the port was taken between choosing it and binding it.
                pod.port = free_port(pod.host)
                (pod.dir / "stage" / POD_SSHD_CONFIG.lstrip("/")).write_text(self._sshd_config(pod))
        logs = "\n".join(f"--- {pod.name}:\n{pod.log.read_text(errors='replace')[-2000:]}" for pod in waiting)
        raise RuntimeError(f"pods did not start: {', '.join(p.name for p in waiting)}\n{logs}")

    def _spawn(self, pod: Pod) -> None:
        # --kill-child: the pod's namespace dies with unshare, and unshare with this thread.
        pod.process = subprocess.Popen(
            ["unshare", "--mount", "--uts", "--pid", "--kill-child", "--", "/bin/sh", "-c", self._pod_script(pod)],
            stdin=subprocess.DEVNULL,
            stdout=open(pod.log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        pod.sshd_pid = None

    def _pod_script(self, pod: Pod) -> str:
        spec = pod.spec
        q = shlex.quote
        fs = q(str(pod.dir / "fs"))
        merged = q(str(pod.merged))
        steps = [
            "set -e",
            f"mount -t tmpfs -o mode=755 computefence-pod {fs}",
            f"mkdir {fs}/upper {fs}/work {fs}/merged",
            f"cp -a {q(str(pod.dir / 'stage'))}/. {fs}/upper/",
            f"mount -t overlay computefence-pod -o lowerdir=/,upperdir={fs}/upper,workdir={fs}/work {merged}",
            f"mount -t proc proc {merged}/proc",
            f"mount --rbind /dev {merged}/dev",
            f"mount -t tmpfs -o size={q(spec.shm_size)},mode=1777 shm {merged}/dev/shm",
            f"mount --rbind /sys {merged}/sys",
            f"mount -t tmpfs -o mode=1777 tmp {merged}/tmp",
            f"hostname {q(spec.name)}",
        ]
        if spec.real_torch:
            site = sysconfig.get_paths()["purelib"]
            steps.append(f"mount --bind -o ro {q(site)} {merged}{POD_REAL_SITE}")
        if spec.workspace_size:
            steps.append(f"mount -o loop {q(str(pod.dir / 'workspace.img'))} {merged}/workspace")
            if spec.workspace_free_bytes is not None:
                steps.append(
                    f"avail=$(df --output=avail -B1 {merged}/workspace | tail -n 1); "
                    f"fill=$((avail - {int(spec.workspace_free_bytes)})); "
                    f"if [ $fill -gt 0 ]; then fallocate -l $fill {merged}/workspace/.filler; fi"
                )
        steps.append(f"exec chroot {merged} {SSHD} -D -e -f {POD_SSHD_CONFIG}")
        return "\n".join(steps)

    def _not_ready(self, pods: list[Pod], timeout: float = 20) -> list[Pod]:
        """The pods that exited or did not answer SSH within `timeout`."""
        pending, failed = list(pods), []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for pod in list(pending):
                assert pod.process is not None
                if pod.process.poll() is not None:
                    pending.remove(pod)
                    failed.append(pod)
                    continue
                if pod.sshd_pid is None:
                    pod.sshd_pid = _only_child(pod.process.pid)
                if pod.sshd_pid is not None and _answers_ssh(pod.host, pod.port):
                    pending.remove(pod)
            time.sleep(0.02)
        return failed + pending


_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _only_child(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def _answers_ssh(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.settimeout(2)
            return sock.recv(8).startswith(b"SSH-2.0")
    except OSError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper()
    if text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


class SilentTcpServer:
    """A TCP port that accepts connections and never says a word (a stuck service, not SSH)."""

    def __init__(self, host: str = "127.0.0.1"):
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        # The kernel completes handshakes into the backlog; nobody ever accepts or writes.
        self.sock.listen(64)
        self.host, self.port = self.sock.getsockname()[:2]

    def close(self) -> None:
        self.sock.close()


def closed_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on (connections are refused)."""
    return free_port(host)


if __name__ == "__main__":  # manual smoke run: python3 tests/sshfleet.py
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        fleet = SshFleet(Path(tmp))
        started = time.monotonic()
        pods = fleet.start(
            [PodSpec(f"smoke-{i}", workspace_size="20G") for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4)]
        )
        print(f"{len(pods)} pods up in {time.monotonic() - started:.2f}s")
        for pod in pods:
            print(pod.name, pod.host, pod.port, pod.sshd_pid)
        fleet.stop_all()
