"""Client-side cost at fleet scale: `computefence fleet check` against a bare asyncssh gather.

Real pods spend most of a fleet check's CPU on their own side (sshd, the probe), so on one
machine they hide the client's cost. Here the pods are canned-answer SSH servers running in
other processes: each accepts the same probe command, reads the probe from stdin and
answers with one recorded probe output (recorded at start from a demo pod running the real
probe). What is left to measure is the client: its CPU (wait4, user + system) and peak RSS,
for ComputeFence and for the least a user could write (an asyncio.gather of
asyncssh.connect(...).run(...)), at 1,000 targets by default.

    python3 bench/client_bench.py --targets 1000 --repeat 3
    python3 bench/client_bench.py --targets 1000 --cipher chacha20-poly1305@openssh.com --profile

--cipher restricts what the servers offer, so both clients negotiate that cipher; --profile
also runs ComputeFence once under cProfile and prints its top functions. Results go to
bench/results/client-<time>.json. No root needed.

Exits 1 when ComputeFence's median client CPU is over 1.2x the bare gather's (--max-ratio),
its median peak RSS over 150 MiB (--max-rss-mib), or a run was invalid (#35).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from fleet_bench import PROBE_LIMIT_S, measure  # noqa: E402
from server_processes import HOST, ServerProcesses, free_ports, until_stopped  # noqa: E402

TOOLS = ("computefence", "asyncssh")
# With --before CHECKOUT: that checkout's computefence (on PYTHONPATH), run beside today's.
BEFORE = "before"


# ---------------------------------------------------------------- the canned-answer servers


def serve(
    ports: list[int],
    host_key_path: str,
    client_key_path: str,
    answer_path: str,
    ciphers: list[str] | None,
    ready: multiprocessing.Event,
    stop: multiprocessing.Event,
) -> None:
    """One server process: listens on `ports` and answers every exec with the recorded output."""
    import asyncssh

    answer = Path(answer_path).read_bytes()
    client_key = asyncssh.read_private_key(client_key_path)

    async def answer_one(process: asyncssh.SSHServerProcess) -> None:
        # Read the whole probe as sshd would hand it to python3, then answer as the probe did.
        while await process.stdin.read(65536):
            pass
        process.stdout.write(answer)
        process.exit(0)

    async def main() -> None:
        options = {} if not ciphers else {"encryption_algs": ciphers}
        authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
        acceptors = [
            await asyncssh.listen(
                HOST,
                port,
                server_host_keys=[host_key_path],
                authorized_client_keys=authorized,
                process_factory=answer_one,
                encoding=None,
                backlog=4096,
                **options,
            )
            for port in ports
        ]
        ready.set()
        await until_stopped(stop)
        for acceptor in acceptors:
            acceptor.close()

    asyncio.run(main())


# ---------------------------------------------------------------- the recorded answer


def record_answer(path: Path) -> int:
    """Run the real probe once on a demo pod (fake H100, fake torch cu124) and keep its stdout."""
    import asyncssh

    from computefence.connectors.payload import probe_params
    from computefence.connectors.ssh import probe_command
    from computefence.demo.fleet import DEMO_PODS, demo_fleet
    from computefence.probe.assemble import probe_wire

    with demo_fleet(DEMO_PODS[:1]) as fleet:
        target = fleet.targets[0]
        payload = probe_wire(probe_params(target.checks, "python3", deadline_s=PROBE_LIMIT_S - 10))

        async def run() -> bytes:
            async with asyncssh.connect(
                target.host,
                target.port,
                username="root",
                known_hosts=fleet.known_hosts_path,
                client_keys=[fleet.client_key_path],
                agent_path=None,
            ) as conn:
                result = await conn.run(probe_command(PROBE_LIMIT_S), input=payload, encoding=None, check=True)
            return result.stdout

        path.write_bytes(asyncio.run(run()))
    return path.stat().st_size


# ---------------------------------------------------------------- the benchmark


class CannedFleet:
    def __init__(self, args: argparse.Namespace, work: Path):
        import asyncssh
        import yaml

        from computefence.connectors.payload import probe_params
        from computefence.connectors.ssh import probe_command
        from computefence.models import CheckOptions
        from computefence.probe.assemble import probe_wire

        self.n = args.targets
        self.answer = work / "answer.json"
        self.answer_bytes = record_answer(self.answer)
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.host_key_path, self.client_key_path = work / "host_key", work / "client_key"
        host_key.write_private_key(str(self.host_key_path))
        client_key.write_private_key(str(self.client_key_path))
        os.chmod(self.client_key_path, 0o600)
        ports = free_ports(args.servers * args.ports_per_server)
        self.known_hosts = work / "known_hosts"
        public = host_key.export_public_key().decode().strip()
        self.known_hosts.write_text("".join(f"[{HOST}]:{port} {public}\n" for port in ports))
        self.servers = ServerProcesses()
        ciphers = [args.cipher] if args.cipher else None
        for i in range(args.servers):
            mine = ports[i * args.ports_per_server : (i + 1) * args.ports_per_server]
            self.servers.start(
                serve, mine, str(self.host_key_path), str(self.client_key_path), str(self.answer), ciphers
            )
        pods = [{"name": f"pod-{i:04d}", "host": HOST, "port": ports[i % len(ports)]} for i in range(self.n)]
        checks = CheckOptions(output_dir="/workspace/checkpoints")
        # What computefence sends (its per-pod deadline aside), for the bare gather too.
        self.payload = work / "probe.zlib"
        self.payload.write_bytes(probe_wire(probe_params(checks, "python3", deadline_s=PROBE_LIMIT_S - 10)))
        self.spec = work / "spec.json"
        self.spec.write_text(
            json.dumps(
                {
                    "pods": pods,
                    "identity_file": str(self.client_key_path),
                    "known_hosts": str(self.known_hosts),
                    "command": probe_command(PROBE_LIMIT_S),
                    "payload": str(self.payload),
                }
            )
        )
        self.inventory = work / "inventory.yaml"
        self.inventory.write_text(
            yaml.safe_dump(
                {
                    "known_hosts": str(self.known_hosts),
                    "defaults": {
                        "user": "root",
                        "identity_file": str(self.client_key_path),
                        "python": "python3",
                        "checks": checks.model_dump(exclude_defaults=True),
                    },
                    "hosts": pods,
                },
                sort_keys=False,
            )
        )

    def close(self) -> None:
        self.servers.close()


def has_workers_option(checkout: str) -> bool:
    """Whether the checkout's `fleet check` takes --workers (code older than #35 item 3 does not)."""
    return "--workers" in (Path(checkout) / "computefence" / "cli" / "fleet.py").read_text()


def run_tool(
    tool: str, fleet: CannedFleet, run_dir: Path, args: argparse.Namespace, counted: Path | None = None
) -> dict:
    """One run of `tool` on the canned fleet; with `counted`, under callgrind, its instruction
    count written there (a run ~50 times slower: the handshake timeouts are raised to match)."""
    run_dir.mkdir(parents=True)
    env = {**os.environ, "HOME": str(run_dir)}
    slow = counted is not None
    if tool == BEFORE:
        env["PYTHONPATH"] = args.before
    if tool in ("computefence", BEFORE):
        report = run_dir / "report.json"
        argv = [
            args.python,
            # -P: `-m` would put the working directory (a checkout's root) before PYTHONPATH.
            *(["-P"] if tool == BEFORE else []),
            "-m",
            "computefence",
            "fleet",
            "check",
            "-i",
            str(fleet.inventory),
            "--format",
            "json",
            "-o",
            str(report),
            "--timeout",
            str(PROBE_LIMIT_S + 20 + (400 if slow else 0)),
            # The bare gather has no handshake timeout; two loaded cores may need long for 1,000.
            "--connect-timeout",
            "300" if slow else "60",
        ]
        if tool == "computefence" or has_workers_option(args.before):
            # One process against the bare gather's one (workers_bench.py measures --workers).
            argv += ["--workers", "1"]
        if args.concurrency:
            argv += ["--concurrency", str(args.concurrency)]
        result = measure(_counting(argv, counted), env=env, timeout=3600 if slow else 600)
        try:
            hosts = json.loads(report.read_text())["hosts"]
            result["ok"] = sum(1 for h in hosts if h["status"] == "ok")
            result["failed"] = {h["name"]: h.get("reason") for h in hosts if h["status"] != "ok"}
        except (OSError, ValueError, KeyError) as exc:
            result.update(ok=0, failed={"*": f"no report: {exc}"})
    else:
        answer = run_dir / "answer.json"
        argv = [args.python, str(BENCH / "fleet_bench.py"), "--worker", "asyncssh", "--spec", str(fleet.spec)]
        if args.cipher:
            argv += ["--cipher", args.cipher]
        result = measure(_counting(argv, counted), env=env, stdout_path=answer, timeout=3600 if slow else 600)
        try:
            result.update(json.loads(answer.read_text()))
        except ValueError:
            result.update(ok=0, failed={"*": "worker printed no tally"})
    result["valid"] = result.get("ok") == fleet.n
    if counted is not None:
        result["instructions"] = _instructions(counted)
    if not result["valid"]:
        first = next(iter(result.get("failed", {}).items()), None)
        result["first_failure"] = first
    result.pop("failed", None)
    return result


def two_sizes(text: str) -> tuple[int, int]:
    """--instructions: two different positive fleet sizes, smaller first."""
    try:
        small, large = sorted(int(n) for n in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not two fleet sizes, e.g. 50,300") from None
    if small < 1 or small == large:
        raise argparse.ArgumentTypeError(f"{text!r}: two different sizes of at least 1 target, e.g. 50,300")
    return small, large


def _counting(argv: list[str], counted: Path | None) -> list[str]:
    if counted is None:
        return argv
    # The interpreter itself, not a wrapper script (pyenv's shim) that valgrind would count instead.
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={counted}", os.path.realpath(argv[0]), *argv[1:]]


def _instructions(counted: Path) -> int | None:
    """The instructions callgrind counted (its `totals:` line), None when it wrote none."""
    try:
        for line in counted.read_text(errors="replace").splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def count_instructions(args: argparse.Namespace, tools: list[str], work: Path) -> dict:
    """Each tool's instructions at the two fleet sizes of --instructions, and what a straight
    line through them (a fixed cost, and a cost per target) gives at --targets."""
    small, large = args.instructions
    counts: dict[str, dict[int, int | None]] = {tool: {} for tool in tools}
    for size in (small, large):
        (work / f"fleet-{size}").mkdir()
        fleet = CannedFleet(argparse.Namespace(**{**vars(args), "targets": size}), work / f"fleet-{size}")
        try:
            for tool in tools:
                out = work / f"{tool}-{size}.callgrind"
                result = run_tool(tool, fleet, work / "runs" / f"{tool}-{size}", args, counted=out)
                counts[tool][size] = result["instructions"] if result["valid"] else None
                print(f"   {tool:13s} {size:5d} targets  {_giga(counts[tool][size])} instructions", file=sys.stderr)
        finally:
            fleet.close()
    fitted: dict[str, dict] = {}
    for tool, by_size in counts.items():
        a, b = by_size[small], by_size[large]
        if a is None or b is None:
            fitted[tool] = {"counts": by_size}
            continue
        per_target = (b - a) / (large - small)
        fixed = a - per_target * small
        fitted[tool] = {
            "counts": by_size,
            "fixed": round(fixed),
            "per_target": round(per_target),
            "at_targets": round(fixed + per_target * args.targets),
        }
    return fitted


def _giga(value: float | None) -> str:
    return "(no valid run)" if value is None else f"{value / 1e9:7.3f} G"


def instructions_table(fitted: dict, targets: int) -> str:
    bare = fitted.get("asyncssh", {}).get("at_targets")
    rows = [f"{'tool':13s} {'fixed':>9} {'per target':>11} {f'at {targets}':>10} {'x bare':>7}"]
    for tool, f in fitted.items():
        if "at_targets" not in f:
            rows.append(f"{tool:13s} (no valid run at one of the sizes)")
            continue
        ratio = f"{f['at_targets'] / bare:7.3f}" if bare else f"{'-':>7}"
        rows.append(f"{tool:13s} {_giga(f['fixed'])} {f['per_target'] / 1e6:9.2f} M {_giga(f['at_targets'])} {ratio}")
    return "\n".join(rows)


def profile(fleet: CannedFleet, work: Path, args: argparse.Namespace, top: int = 25) -> str:
    stats = work / "cf.prof"
    argv = [
        args.python,
        "-m",
        "cProfile",
        "-o",
        str(stats),
        "-m",
        "computefence",
        "fleet",
        "check",
        "-i",
        str(fleet.inventory),
        "--format",
        "json",
        "-o",
        str(work / "profiled.json"),
        "--connect-timeout",
        "60",
        "--workers",
        "1",
    ] + (["--concurrency", str(args.concurrency)] if args.concurrency else [])
    subprocess.run(argv, env={**os.environ, "HOME": str(work)}, stdout=subprocess.DEVNULL, check=False)
    code = "import pstats, sys; s = pstats.Stats(sys.argv[1]); s.sort_stats('tottime').print_stats(int(sys.argv[2]))"
    return subprocess.run([args.python, "-c", code, str(stats), str(top)], capture_output=True, text=True).stdout


def summarise(runs: list[dict], n: int) -> dict:
    """Each figure's own min and median over the valid runs (not the figures of one run)."""
    valid = [r for r in runs if r["valid"]]
    out: dict = {"runs": runs, "valid_runs": len(valid)}
    for key in ("wall_s", "cpu_s", "maxrss_mib"):
        values = [r[key] for r in valid]
        if values:
            out[key] = {"min": min(values), "median": statistics.median(values)}
    if valid:
        out["cpu_ms_per_target"] = {k: round(1000 * v / n, 2) for k, v in out["cpu_s"].items()}
    return out


def table(results: dict) -> str:
    rows = [
        f"{'tool':13s} {'valid':>5} {'wall s min/med':>15} {'CPU s min/med':>14} {'ms/target med':>13} "
        f"{'maxRSS MiB min/med':>18} {'x bare CPU':>10}"
    ]
    tools = results["tools"]
    bare = tools.get("asyncssh", {}).get("cpu_s", {}).get("median")
    for tool, s in tools.items():
        if "cpu_s" not in s:
            rows.append(f"{tool:13s} {s['valid_runs']:>5} (no valid run)")
            continue
        ratio = f"{s['cpu_s']['median'] / bare:10.2f}" if bare else f"{'-':>10}"
        rows.append(
            f"{tool:13s} {s['valid_runs']:>5} {s['wall_s']['min']:7.2f}/{s['wall_s']['median']:<7.2f} "
            f"{s['cpu_s']['min']:6.2f}/{s['cpu_s']['median']:<7.2f} {s['cpu_ms_per_target']['median']:13.2f} "
            f"{s['maxrss_mib']['min']:8.1f}/{s['maxrss_mib']['median']:<9.1f} {ratio}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per tool, interleaved (default 3)")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--servers", type=int, default=2, help="canned-answer server processes (default 2)")
    parser.add_argument("--ports-per-server", type=int, default=4)
    parser.add_argument("--cipher", help="the only cipher the servers offer, e.g. aes128-gcm@openssh.com")
    parser.add_argument("--concurrency", type=int, help="computefence --concurrency (default: its own, 256)")
    parser.add_argument("--profile", action="store_true", help="also profile one computefence run (cProfile)")
    parser.add_argument("--python", default=sys.executable, help="interpreter with computefence and asyncssh")
    parser.add_argument("--results", default=str(BENCH / "results"))
    parser.add_argument("--max-ratio", type=float, default=1.2, help="fail above this CPU x bare (default 1.2)")
    parser.add_argument("--max-rss-mib", type=float, default=150.0, help="fail above this peak RSS (default 150)")
    parser.add_argument(
        "--before", metavar="CHECKOUT", help="also time this checkout's computefence (its tree on PYTHONPATH)"
    )
    parser.add_argument(
        "--instructions",
        metavar="SMALL,LARGE",
        type=two_sizes,
        help="count each tool's instructions under callgrind at these two fleet sizes instead of timing it, "
        "and extrapolate to --targets (exact on a shared machine; sizes above ~300 outlast the bare gather's "
        "login timeout under valgrind)",
    )
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",")]
    if unknown := [t for t in tools if t not in TOOLS]:
        parser.error(f"--tools: unknown {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    if args.before:
        tools.append(BEFORE)
    results: dict = {
        "targets": args.targets,
        "cipher": args.cipher or "negotiated",
        "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "tools": {},
    }
    if args.instructions:
        with tempfile.TemporaryDirectory(prefix="cf-client-bench-") as tmp:
            results["instructions"] = count_instructions(args, tools, Path(tmp))
        print(instructions_table(results["instructions"], args.targets))
        _save(results, args)
        return instructions_verdict(results["instructions"], args.max_ratio)
    with tempfile.TemporaryDirectory(prefix="cf-client-bench-") as tmp:
        work = Path(tmp)
        fleet = CannedFleet(args, work)
        results["answer_bytes"] = fleet.answer_bytes
        results["payload_bytes"] = fleet.payload.stat().st_size
        try:
            print(
                f"== {args.targets} targets on {args.servers}x{args.ports_per_server} canned ports; warming up",
                file=sys.stderr,
                flush=True,
            )
            for tool in tools:  # every tool once, untimed: page cache, imports, the servers' first handshakes
                run_tool(tool, fleet, work / "runs" / f"warm-{tool}", args)
            runs: dict[str, list[dict]] = {tool: [] for tool in tools}
            for round_ in range(args.repeat):
                for tool in tools if round_ % 2 == 0 else list(reversed(tools)):
                    result = run_tool(tool, fleet, work / "runs" / f"{tool}-{round_}", args)
                    runs[tool].append(result)
                    status = (
                        "ok"
                        if result["valid"]
                        else f"INVALID ({result.get('ok')}/{args.targets}: {result.get('first_failure')})"
                    )
                    print(
                        f"   {tool:13s} wall {result['wall_s']:6.2f}s cpu {result['cpu_s']:6.2f}s "
                        f"rss {result['maxrss_mib']:6.1f} MiB  {status}",
                        file=sys.stderr,
                        flush=True,
                    )
            results["tools"] = {tool: summarise(r, args.targets) for tool, r in runs.items()}
            if args.profile:
                results["profile"] = profile(fleet, work, args)
        finally:
            fleet.close()
    print(table(results))
    if args.profile:
        print(results["profile"])
    _save(results, args)
    return verdict(results, args.max_ratio, args.max_rss_mib)


def instructions_verdict(fitted: dict, max_ratio: float) -> int:
    """As `verdict`, on the instructions at --targets. They are exact run to run, but they
    understate the CPU ratio (the client's Python runs fewer instructions a cycle than the
    handshake's C), so a regression shows here first and the limit may be set tighter."""
    cf, bare = (fitted.get(tool, {}).get("at_targets") for tool in ("computefence", "asyncssh"))
    if cf is None or bare is None:
        print("FAILED: a tool brought back no valid run", file=sys.stderr)
        return 1
    ratio = cf / bare
    if ratio > max_ratio:
        print(f"REGRESSED: {ratio:.3f}x the bare gather's instructions (limit {max_ratio}x)", file=sys.stderr)
        return 1
    print(f"within limits: {ratio:.3f}x the bare gather's instructions")
    return 0


def _save(results: dict, args: argparse.Namespace) -> None:
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"client-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"results: {path}", file=sys.stderr)


def verdict(results: dict, max_ratio: float, max_rss_mib: float) -> int:
    """1, with the reason, when ComputeFence's median CPU is over `max_ratio` times the bare
    gather's, its median peak RSS over `max_rss_mib`, or a run was invalid: so a change that
    costs the client CPU fails this benchmark loudly instead of moving a figure in a README."""
    tools = results["tools"]
    if "computefence" not in tools or "asyncssh" not in tools:
        return 0
    cf, bare = tools["computefence"], tools["asyncssh"]
    if not cf["valid_runs"] or not bare["valid_runs"]:
        print("FAILED: a tool brought back no valid run", file=sys.stderr)
        return 1
    ratio = cf["cpu_s"]["median"] / bare["cpu_s"]["median"]
    rss = cf["maxrss_mib"]["median"]
    problems = [f"CPU {ratio:.2f}x the bare gather (limit {max_ratio}x)"] if ratio > max_ratio else []
    problems += [f"peak RSS {rss:.0f} MiB (limit {max_rss_mib:.0f})"] if rss > max_rss_mib else []
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if problems:
        print(f"REGRESSED: {'; '.join(problems)} (load average {load})", file=sys.stderr)
        return 1
    print(f"within limits: CPU {ratio:.2f}x the bare gather, peak RSS {rss:.0f} MiB (load average {load})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
