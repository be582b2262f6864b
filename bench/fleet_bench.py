"""Fleet benchmark: the same probe on the same real sshd pods, four ways.

    computefence   `computefence fleet check -i inventory.yaml --format json -o report.json`
    ansible        ansible-core's ad-hoc `script` module, forks = N
    pssh           the parallel-ssh library (ParallelSSHClient), the probe on stdin
    asyncssh       a bare asyncssh gather of the probe (the lower bound)

Each tool runs as its own process, timed from spawn to exit, its CPU (its own and its
children's) from wait4, its peak RSS from wait4 (largest single process) and its peak
PSS summed over its whole process tree (sampled; this is what counts for Ansible's forks).
Every run must bring back a parsable probe answer from every pod or it is marked invalid.

Needs root (the pods are real sshd in namespaces; see tests/sshfleet.py), and for the
comparison tools ansible-core and parallel-ssh (see bench/README.md). Results go to
bench/results/fleet-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = ("computefence", "ansible", "pssh", "asyncssh")
PROBE_LIMIT_S = 120


# ---------------------------------------------------------------- workers (run as their own process)


def worker_asyncssh(spec: dict) -> dict:
    import asyncio

    import asyncssh

    command, payload = spec["command"], Path(spec["payload"]).read_bytes()
    ciphers = {"encryption_algs": [spec["cipher"]]} if spec.get("cipher") else {}

    async def main() -> dict:
        known_hosts = asyncssh.read_known_hosts(spec["known_hosts"])
        keys = asyncssh.load_keypairs([spec["identity_file"]])

        async def one(pod: dict) -> str | None:
            try:
                async with asyncssh.connect(
                    pod["host"],
                    pod["port"],
                    username="root",
                    known_hosts=known_hosts,
                    client_keys=keys,
                    agent_path=None,
                    **ciphers,
                ) as conn:
                    result = await conn.run(command, input=payload, encoding=None)
                return _answer_error(result.stdout)
            except (OSError, asyncssh.Error) as exc:
                return f"{type(exc).__name__}: {exc}"

        errors = await asyncio.gather(*(one(pod) for pod in spec["pods"]))
        return _tally(spec["pods"], errors)

    return asyncio.run(main())


def worker_pssh(spec: dict) -> dict:
    from pssh.clients import ParallelSSHClient
    from pssh.config import HostConfig

    payload = Path(spec["payload"]).read_bytes()
    pods = spec["pods"]
    # parallel-ssh does not verify host keys (libssh2 without a known_hosts check): noted in the README.
    client = ParallelSSHClient(
        [pod["host"] for pod in pods],
        host_config=[
            HostConfig(port=pod["port"], user="root", private_key=spec["identity_file"], allow_agent=False)
            for pod in pods
        ],
        pool_size=len(pods),
        num_retries=1,
        allow_agent=False,
    )
    output = client.run_command(spec["command"], stop_on_errors=False)
    for host_out in output:
        if host_out.exception is None:
            host_out.stdin.write(payload)
            host_out.stdin.flush()
            host_out.client.eagain(host_out.channel.send_eof)
    client.join(output)
    errors = []
    for host_out in output:
        if host_out.exception is not None:
            errors.append(f"{type(host_out.exception).__name__}: {host_out.exception}")
        else:
            errors.append(_answer_error("\n".join(host_out.stdout).encode()))
    return _tally(pods, errors)


def _answer_error(stdout: bytes) -> str | None:
    lines = stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        document = json.loads(lines[-1])
    except (IndexError, ValueError):
        return f"no probe answer: {stdout[:120]!r}"
    return None if isinstance(document, dict) and "collectors" in document else "not a probe answer"


def _tally(pods: list[dict], errors: list[str | None]) -> dict:
    failed = {pod["name"]: err for pod, err in zip(pods, errors) if err}
    return {"ok": len(pods) - len(failed), "failed": failed}


# ---------------------------------------------------------------- measuring one run


def _tree_pss_kib(root_pid: int) -> int:
    """PSS of root_pid and all its descendants (shared pages counted once, split fairly)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total


def _machine_busy_s() -> float:
    with open("/proc/stat") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def user_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with bytecode caching on, as where a user runs an
    installed tool. pip writes every module's .pyc at install; PYTHONDONTWRITEBYTECODE=1 (set
    in some sandboxes, this one included) makes each run of an editable install compile
    computefence's ~75 modules from source again: 0.12 CPU-s a run that no user pays, and that
    the tools measured beside it, installed with their .pyc, never pay."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(
    argv: list[str], env: dict[str, str] | None = None, stdout_path: Path | None = None, timeout: float = 600
) -> dict:
    """Run argv to completion; wall, CPU and memory of it and everything it started.

    The run is launched from a small forkserver process, not from this one: Linux charges a
    process's pre-exec memory to the new program's ru_maxrss, so a child of this (large)
    process would report at least this process's size.
    """
    context = multiprocessing.get_context("forkserver")
    with context.Pool(1) as pool:
        return pool.apply(_measure, (argv, user_env(env), stdout_path, timeout))


def _measure(argv: list[str], env: dict[str, str] | None, stdout_path: Path | None, timeout: float) -> dict:
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    peak = [0]
    busy_before = _machine_busy_s()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE)
    done = threading.Event()
    stderr_chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read()), daemon=True)
    reader.start()

    def sample() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], _tree_pss_kib(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
        done.set()
    wall = time.perf_counter() - started
    machine_cpu = _machine_busy_s() - busy_before
    proc.returncode = os.waitstatus_to_exitcode(status)
    sampler.join()
    reader.join(5)
    if stdout_path:
        out.close()
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "maxrss_mib": round(usage.ru_maxrss / 1024, 1),
        "tree_pss_peak_mib": round(peak[0] / 1024, 1),
        # Every CPU second the machine spent meanwhile: the tool, its pods' sshd and probes
        # (and anything else running), the floor under wall time x cores.
        "machine_cpu_s": round(machine_cpu, 2),
        "returncode": proc.returncode,
        "stderr_tail": b"".join(stderr_chunks)[-2000:].decode("utf-8", "replace"),
    }


# ---------------------------------------------------------------- one tool on one fleet


class Fleet:
    """N real sshd pods and every file the four tools need to reach them."""

    def __init__(self, n: int, work: Path):
        sys.path.insert(0, str(REPO / "tests"))
        from sshfleet import PodSpec, SshFleet

        from computefence.connectors.payload import probe_params
        from computefence.connectors.ssh import probe_command
        from computefence.models import CheckOptions
        from computefence.probe.assemble import probe_payload, probe_wire

        self.n, self.work = n, work
        self.harness = SshFleet(work / "pods")
        started = time.perf_counter()
        specs = [PodSpec(f"pod-{i:03d}", nvidia_smi="h100x1", torch="cu124") for i in range(n)]
        self.pods = self.harness.start(specs)
        self.startup_s = round(time.perf_counter() - started, 2)
        self.identity_file = str(self.harness.identity_file)
        self.known_hosts = work / "known_hosts"
        self.checks = checks = CheckOptions(output_dir="/workspace/checkpoints")
        # The payload computefence would send (its per-pod deadline aside): compressed, for the
        # tools that run probe_command; Ansible's `script` module runs the plain script instead.
        params = probe_params(checks, "python3", deadline_s=PROBE_LIMIT_S - 10)
        self.payload = work / "probe.zlib"
        self.payload.write_bytes(probe_wire(params))
        self.script = work / "probe.py"
        self.script.write_text(probe_payload(params))
        self.command = probe_command(PROBE_LIMIT_S)
        self.reach_pods_at([(pod.host, pod.port) for pod in self.pods])

    def reach_pods_at(self, addresses: list[tuple[str, int]]) -> None:
        """Point every tool's files (known_hosts, inventories) at these addresses, one per pod:
        the pods' own, or a delay relay's in front of them."""
        self.known_hosts.write_text(
            "".join(
                pod.known_hosts_line().replace(f"[{pod.host}]:{pod.port} ", f"[{host}]:{port} ", 1)
                for pod, (host, port) in zip(self.pods, addresses)
            )
        )
        hosts = [{"name": pod.name, "host": host, "port": port} for pod, (host, port) in zip(self.pods, addresses)]
        checks = self.checks
        self.spec = self.work / "spec.json"
        self.spec.write_text(
            json.dumps(
                {
                    "pods": hosts,
                    "identity_file": self.identity_file,
                    "known_hosts": str(self.known_hosts),
                    "command": self.command,
                    "payload": str(self.payload),
                }
            )
        )
        import yaml

        self.inventory = self.work / "inventory.yaml"
        self.inventory.write_text(
            yaml.safe_dump(
                {
                    "known_hosts": str(self.known_hosts),
                    "defaults": {
                        "user": "root",
                        "identity_file": self.identity_file,
                        "python": "python3",
                        "checks": checks.model_dump(exclude_defaults=True),
                    },
                    "hosts": hosts,
                },
                sort_keys=False,
            )
        )
        ssh_args = (
            f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes "
            "-o IdentitiesOnly=yes -o PreferredAuthentications=publickey"
        )
        lines = ["[pods]"]
        lines += [f"{h['name']} ansible_host={h['host']} ansible_port={h['port']}" for h in hosts]
        lines += [
            "",
            "[pods:vars]",
            "ansible_user=root",
            f"ansible_ssh_private_key_file={self.identity_file}",
            f"ansible_ssh_common_args='{ssh_args}'",
        ]
        self.ansible_inventory = self.work / "ansible.ini"
        self.ansible_inventory.write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        self.harness.stop_all()


def run_tool(tool: str, fleet: Fleet, run_dir: Path, args: argparse.Namespace) -> dict:
    pods_cpu_before = _pods_cpu_s(fleet)
    result = _run_tool(tool, fleet, run_dir, args)
    # Sessions are reaped by the time the tool has its answers: the pods' side of this run.
    result["pod_cpu_s"] = round(_pods_cpu_s(fleet) - pods_cpu_before, 2)
    return result


def _run_tool(tool: str, fleet: Fleet, run_dir: Path, args: argparse.Namespace) -> dict:
    run_dir.mkdir(parents=True)
    if tool == "computefence":
        report = run_dir / "report.json"
        argv = [
            args.computefence,
            "fleet",
            "check",
            "-i",
            str(fleet.inventory),
            "--format",
            "json",
            "-o",
            str(report),
            "--timeout",
            str(PROBE_LIMIT_S + 20),
        ]
        # HOME for the run: nothing of the user's ~/.ssh or ComputeFence state leaks into the timing.
        env = {**os.environ, "HOME": str(run_dir)}
        result = measure(argv, env=env)
        result.update(_check_computefence(report, fleet.n))
    elif tool == "ansible":
        result = _run_ansible(fleet, run_dir, args)
    else:
        python = args.pssh_python if tool == "pssh" else sys.executable
        answer = run_dir / "answer.json"
        argv = [python, __file__, "--worker", tool, "--spec", str(fleet.spec)]
        result = measure(argv, stdout_path=answer)
        try:
            result.update(json.loads(answer.read_text()))
        except ValueError:
            result.update(ok=0, failed={"*": "worker printed no tally"})
    result["valid"] = result.get("ok") == fleet.n
    return result


def _check_computefence(report: Path, n: int) -> dict:
    try:
        document = json.loads(report.read_text())
    except (OSError, ValueError) as exc:
        return {"ok": 0, "failed": {"*": f"no report: {exc}"}}
    failed = {h["name"]: f"{h['status']}: {h.get('reason')}" for h in document["hosts"] if h["status"] != "ok"}
    return {"ok": len(document["hosts"]) - len(failed), "failed": failed}


def _run_ansible(fleet: Fleet, run_dir: Path, args: argparse.Namespace) -> dict:
    tree = run_dir / "tree"
    control = run_dir / "cp"
    control.mkdir()
    env = {
        **os.environ,
        "HOME": str(run_dir),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        # The pods' sshd has no sftp subsystem; "smart" would try sftp and scp first on every pod.
        "ANSIBLE_SSH_TRANSFER_METHOD": "piped",
        # Ansible's default multiplexing, with masters of this run only (stopped after it).
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.tree",
        "ANSIBLE_CALLBACK_TREE_DIR": str(tree),
        "ANSIBLE_LOCAL_TEMP": str(run_dir / "tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    argv = [
        args.ansible,
        "pods",
        "-i",
        str(fleet.ansible_inventory),
        "-m",
        "ansible.builtin.script",
        "-a",
        f"{fleet.script} executable=python3",
        "-f",
        str(fleet.n),
    ]
    try:
        result = measure(argv, env=env, stdout_path=run_dir / "stdout.txt")
    finally:
        masters_cpu = _stop_control_masters(control)
    result["control_master_cpu_s"] = round(masters_cpu, 3)
    result["cpu_s"] = round(result["cpu_s"] + masters_cpu, 3)
    failed = {}
    for pod in fleet.pods:
        try:
            answer = json.loads((tree / pod.name).read_text())
        except (OSError, ValueError) as exc:
            failed[pod.name] = f"no result: {exc}"
            continue
        if answer.get("rc") != 0:
            failed[pod.name] = f"rc={answer.get('rc')}: {str(answer.get('msg') or answer.get('stderr'))[:200]}"
            continue
        error = _answer_error((answer.get("stdout") or "").encode())
        if error:
            failed[pod.name] = error
    result.update(ok=fleet.n - len(failed), failed=failed)
    return result


def _stop_control_masters(control: Path) -> float:
    """Kill this run's ssh ControlPersist masters; returns the CPU seconds they had used.

    The masters detach from ansible, so wait4 never counts them, yet they do the encryption
    for every session of their pod: their CPU belongs to Ansible's.
    """
    marker = str(control).encode()
    cpu = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if marker not in cmdline or not cmdline.startswith(b"ssh"):
                continue
            fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            os.kill(int(entry), 9)
        except (OSError, ValueError):
            continue
        # utime and stime, fields 14 and 15 of stat (11 and 12 after the command name).
        cpu += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return cpu


# ---------------------------------------------------------------- the benchmark


FIGURES = ("wall_s", "cpu_s", "maxrss_mib", "tree_pss_peak_mib", "machine_cpu_s", "pod_cpu_s")


def _summary(runs: list[dict]) -> dict:
    """Each figure's own median and min over the valid runs, not the figures of one median run."""
    valid = [r for r in runs if r["valid"]]
    out = {"runs": runs, "valid": bool(valid), "ok": max((r["ok"] for r in runs), default=0)}
    for key in FIGURES:
        values = [r[key] for r in valid if r.get(key) is not None]
        if values:
            out[key] = statistics.median(values)
            out[key + "_min"] = min(values)
    return out


def _pods_cpu_s(fleet: Fleet) -> float:
    """CPU the pods' sshd have used so far: each sshd's own plus that of its reaped sessions
    (the per-connection sshd, the shell, the probe's interpreter and everything it ran)."""
    total = 0
    for pod in fleet.pods:
        try:
            fields = Path(f"/proc/{pod.sshd_pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, TypeError):
            continue
        # utime, stime, cutime, cstime: fields 14-17 of stat (11-14 after the command name).
        total += sum(int(v) for v in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def bench(args: argparse.Namespace) -> dict:
    results: dict = {"machine": _machine(args), "rtt_ms": args.rtt, "delay": args.rtt and args.delay, "sizes": {}}
    for n in args.pods:
        with tempfile.TemporaryDirectory(prefix=f"cf-bench-{n}-") as tmp:
            print(f"== {n} pods: starting ...", file=sys.stderr, flush=True)
            fleet = Fleet(n, Path(tmp))
            relay = None
            try:
                print(f"== {n} pods up in {fleet.startup_s}s", file=sys.stderr, flush=True)
                if args.rtt and args.delay == "relay":
                    from delay_relay import DelayRelay
                    from server_processes import HOST

                    relay = DelayRelay([(pod.host, pod.port) for pod in fleet.pods])
                    fleet.reach_pods_at([(HOST, port) for port in relay.ports])
                for rtt in args.rtt or [None]:
                    key = str(n) if rtt is None else f"{n}@{rtt}ms"
                    if relay is not None:
                        relay.set_rtt(rtt)
                    elif rtt is not None:
                        set_loopback_rtt(rtt)
                    if rtt is not None:
                        print(
                            f"== {n} pods behind {rtt} ms RTT ({args.delay}); warming up", file=sys.stderr, flush=True
                        )
                    results["sizes"][key] = {
                        "pods": n,
                        "rtt_ms": rtt,
                        "startup_s": fleet.startup_s,
                        "tools": _runs(fleet, Path(tmp) / "runs" / key, args),
                    }
            finally:
                if relay is not None:
                    relay.close()
                fleet.close()
    return results


def _runs(fleet: Fleet, runs_dir: Path, args: argparse.Namespace) -> dict:
    # Every tool once, untimed: page cache, imports, the pods' first python3 start.
    for tool in args.tools:
        run_tool(tool, fleet, runs_dir / f"warm-{tool}", args)
    runs: dict[str, list[dict]] = {tool: [] for tool in args.tools}
    for round_ in range(args.repeat):
        # Alternating order so no tool always runs right after the heaviest one.
        order = args.tools if round_ % 2 == 0 else list(reversed(args.tools))
        for tool in order:
            result = run_tool(tool, fleet, runs_dir / f"{tool}-{round_}", args)
            runs[tool].append(result)
            status = "ok" if result["valid"] else f"INVALID ({result['ok']}/{fleet.n} ok)"
            print(f"   {tool:13s} {result['wall_s']:7.2f}s  {status}", file=sys.stderr, flush=True)
    return {tool: _summary(r) for tool, r in runs.items()}


# ---------------------------------------------------------------- --rtt: the run in its own network namespace

_IN_NETNS = "COMPUTEFENCE_BENCH_NETNS"


def enter_private_network(argv: list[str]) -> int | None:
    """Re-run this benchmark in a network namespace of its own, or None when already inside.

    Tools and pods then talk over that namespace's loopback (127.0.0.1, nothing else exists
    there), and netem delay on its `lo` adds latency to every packet of every tool alike;
    the machine's own network and addresses are never touched, and it all goes with the run.
    """
    if os.environ.get(_IN_NETNS) == "1":
        return None
    command = ["unshare", "--net", "--", sys.executable, __file__, *argv]
    return subprocess.call(command, env={**os.environ, _IN_NETNS: "1"})


def loopback_delay_unavailable(need_netem: bool) -> str | None:
    """Why loopback cannot carry the run with netem delay (checked inside the private namespace)."""
    up = subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if up.returncode != 0:
        return f"cannot bring up lo in the benchmark's namespace: {up.stderr.strip()}"
    if not need_netem:
        return None
    probe = subprocess.run(
        ["tc", "qdisc", "replace", "dev", "lo", "root", "netem", "delay", "1ms"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return (
            f"tc netem is not available ({probe.stderr.strip() or probe.returncode}); the kernel needs "
            "CONFIG_NET_SCH_NETEM (module sch_netem)"
        )
    subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True)
    return None


def set_loopback_rtt(rtt_ms: int) -> None:
    """Every packet crosses lo once each way: half the round trip on each crossing."""
    if rtt_ms == 0:
        subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True)
        return
    # limit: packets held in the delay line; the default 1000 would drop bursts of 100 pods.
    subprocess.run(
        ["tc", "qdisc", "replace", "dev", "lo", "root", "netem", "delay", f"{rtt_ms / 2:g}ms", "limit", "100000"],
        check=True,
        capture_output=True,
    )


def _machine(args: argparse.Namespace) -> dict:
    versions = {}
    for name, argv in (
        ("ansible", [args.ansible, "--version"]),
        ("pssh", [args.pssh_python, "-c", "from importlib.metadata import version; print(version('parallel-ssh'))"]),
        ("asyncssh", [sys.executable, "-c", "import asyncssh; print(asyncssh.__version__)"]),
        ("computefence", [args.computefence, "--version"]),
    ):
        try:
            versions[name] = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            versions[name] = None
    return {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "versions": versions,
        "loadavg_at_start": os.getloadavg(),
        # What `true` reports: the launcher's size, which Linux counts into every ru_maxrss.
        "maxrss_floor_mib": measure(["/bin/true"])["maxrss_mib"],
    }


def table(results: dict) -> str:
    rows = [
        "each figure's median over the valid runs (mins in the results JSON)",
        f"{'pods RTT':>10} {'tool':13s} {'wall s':>8} {'x bare':>7} {'CPU s':>7} {'CPU ms/pod':>10} "
        f"{'maxRSS MiB':>10} {'tree PSS MiB':>12} {'pod CPU s':>9} {'machine CPU s':>13}  valid",
    ]
    for key, size in results["sizes"].items():
        n = str(size["pods"])
        label = key if size.get("rtt_ms") is None else f"{n} {size['rtt_ms']}ms"
        bare = size["tools"].get("asyncssh", {}).get("wall_s")
        for tool, r in size["tools"].items():
            if "wall_s" not in r:
                rows.append(f"{label:>10} {tool:13s} no valid run ({r['ok']}/{n} ok at best)")
                continue
            ratio = f"{r['wall_s'] / bare:7.2f}" if bare else f"{'-':>7}"
            rows.append(
                f"{label:>10} {tool:13s} {r['wall_s']:8.2f} {ratio} {r['cpu_s']:7.2f} "
                f"{1000 * r['cpu_s'] / int(n):10.1f} {r['maxrss_mib']:10.1f} {r['tree_pss_peak_mib']:12.1f} "
                f"{r['pod_cpu_s']:9.1f} {r['machine_cpu_s']:13.1f}"
                f"  {sum(x['valid'] for x in r['runs'])}/{len(r['runs'])}"
            )
        tools = size["tools"]
        if "wall_s" in tools.get("ansible", {}) and "wall_s" in tools.get("computefence", {}):
            speedup = tools["ansible"]["wall_s"] / tools["computefence"]["wall_s"]
            rows.append(f"{'':>10} computefence is {speedup:.1f}x faster than ansible at {label}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", default="20,50,100", help="fleet sizes, comma-separated (default: 20,50,100)")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"subset of {','.join(TOOLS)}")
    parser.add_argument(
        "--rtt",
        metavar="MS[,MS...]",
        help="round-trip times to run at, e.g. 0,50,150: the whole run moves into a network "
        "namespace of its own, delayed as --delay says",
    )
    parser.add_argument(
        "--delay",
        choices=("auto", "netem", "relay"),
        default="auto",
        help="how --rtt delays packets: netem on the namespace's loopback, or a userspace relay "
        "in front of each pod (bench/delay_relay.py); auto: netem where the kernel has it",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool and size; the median is reported")
    parser.add_argument("--ansible", default=shutil.which("ansible") or str(Path(sys.executable).parent / "ansible"))
    parser.add_argument("--pssh-python", default=sys.executable, help="an interpreter with parallel-ssh installed")
    parser.add_argument("--computefence", default=shutil.which("computefence") or "computefence")
    parser.add_argument("--results", default=str(REPO / "bench" / "results"))
    parser.add_argument("--worker", choices=("asyncssh", "pssh"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--cipher", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        spec = {**json.loads(Path(args.spec).read_text()), "cipher": args.cipher}
        tally = worker_asyncssh(spec) if args.worker == "asyncssh" else worker_pssh(spec)
        print(json.dumps(tally))
        return 0
    try:
        args.pods = [int(n) for n in args.pods.split(",")]
    except ValueError:
        parser.error(f"--pods {args.pods!r}: expected numbers like 20,50,100")
    try:
        args.rtt = [int(ms) for ms in args.rtt.split(",")] if args.rtt else None
    except ValueError:
        parser.error(f"--rtt {args.rtt!r}: expected milliseconds like 0,50,150")
    args.tools = [t.strip() for t in args.tools.split(",")]
    unknown = [t for t in args.tools if t not in TOOLS]
    if unknown:
        parser.error(f"--tools: unknown {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    if pods_unavailable("fleet_bench"):
        return 2
    if args.rtt:
        outer = enter_private_network(sys.argv[1:] if argv is None else argv)
        if outer is not None:
            return outer
        reason = loopback_delay_unavailable(need_netem=any(args.rtt) and args.delay != "relay")
        if reason and args.delay == "auto" and "netem" in reason:
            print(f"fleet_bench: --rtt: {reason}; delaying in a userspace relay instead", file=sys.stderr)
            args.delay = "relay"
        elif reason:
            print(f"fleet_bench: --rtt: {reason}", file=sys.stderr)
            return 2
        elif args.delay == "auto":
            args.delay = "netem"
    results = bench(args)
    print(table(results))
    save_results(results, args.results, "fleet")
    return 0


def pods_unavailable(bench_name: str) -> bool:
    """True (and why, on stderr) when real sshd pods cannot run here."""
    sys.path.insert(0, str(REPO / "tests"))
    from sshfleet import fleet_unavailable_reason

    reason = fleet_unavailable_reason()
    if reason:
        print(f"{bench_name}: {reason}", file=sys.stderr)
    return reason is not None


def save_results(results: dict, directory: str, kind: str) -> None:
    """bench/results/<kind>-<time>.json, and where it went on stderr."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"results: {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
