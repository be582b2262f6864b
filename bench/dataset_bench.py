"""Benchmark: the probe's dataset scan against the pandas code a user would otherwise write.

Generates a realistic dataset (natural-language review text, a label, a source column; 5% of
rows exact duplicates of earlier rows, 1% earlier inputs repeated with a different label) as
JSON Lines and as CSV, then measures, each in its own subprocess:

- scan:   the probe's own code (the script computefence sends, run as a stdlib script in a fresh
          interpreter, `python3 -I`), calling its dataset collector alone: with pyarrow where it
          imports (the fast path; the output names the engine that counted);
- scan-stdlib: the same with `import pyarrow` made to fail, as on a pod without it;
- pandas: read_json(lines=True) / read_csv, then duplicated(), duplicated(subset=[input])
          and groupby(input)[label].nunique().

Wall time, CPU time and peak RSS (getrusage(RUSAGE_CHILDREN).ru_maxrss of a per-measurement
intermediate process, so one measurement's peak never leaks into the next) are printed side
by side with the counts; the counts must be identical. Targets: the scan at least 2x faster
and at most a fifth of pandas' peak memory. With --repeat N each figure is the best of N runs.
pandas 3 stores strings with Arrow when pyarrow is installed, and is then markedly faster
than with its Python string storage; the output names the storage used.

    pip install pandas   # for the benchmark only; not a dependency of computefence
    pip install polars duckdb   # optional: compared too when installed
    python3 bench/dataset_bench.py [--rows 2000000] [--repeat 1] [--dir DIR] [--keep] [--baseline GITREV]
                                   [--formats jsonl,csv] [--no-pandas]

--baseline GITREV also times the scan of that revision's probe (stdlib only, pyarrow made to
fail), for before/after figures of the stdlib path (target: 1.4x less CPU). With pyarrow the
scan targets 1.5x duckdb's wall time at no more than its peak memory.

Exit status: 0 counts identical and targets met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LABELS = ["positive", "negative", "neutral"]
SOURCES = ["imdb", "yelp", "amazon", "forum"]
OPENERS = ["I", "We", "My family", "Honestly, I", "The kids", "Everyone I know", "My partner and I", "Our group"]
VERBS = [
    "loved",
    "liked",
    "enjoyed",
    "hated",
    "could not stand",
    "was bored by",
    "was surprised by",
    "did not expect much from",
    "went twice to see",
    "would recommend",
]
SUBJECTS = [
    "the film",
    "this movie",
    "the sequel",
    "the new series",
    "the documentary",
    "the show",
    "the restaurant",
    "the service",
    "the product",
    "the update",
    "the book",
    "the album",
]
REASONS = [
    "the acting was superb",
    "the plot made no sense",
    "the pacing dragged in the middle",
    "the soundtrack stayed with me for days",
    "the ending felt rushed",
    "the staff were friendly",
    "the price was far too high",
    "it broke after a week",
    "the dialogue was sharp and funny",
    "the photography was stunning",
    "nothing really happened",
    "the characters felt real",
    "it was exactly what the reviews promised",
    "the second half fell apart",
]
TAILS = [
    "",
    "",
    " Worth it.",
    " Never again.",
    " Five stars.",
    " Meh.",
    " Maybe next time.",
    " Would not watch it again.",
    " Bring tissues.",
    " Skip the trailers, they spoil everything.",
]
ADVERBS = ["really", "honestly", "absolutely", "somewhat", "frankly", "genuinely", "kind of", "totally"]


def sentence(rng: random.Random) -> str:
    text = (
        f"{rng.choice(OPENERS)} {rng.choice(ADVERBS)} {rng.choice(VERBS)} {rng.choice(SUBJECTS)}, "
        f"because {rng.choice(REASONS)}"
    )
    if rng.random() < 0.6:
        text += f" and {rng.choice(REASONS)}"
    if rng.random() < 0.3:
        text += f"; {rng.choice(ADVERBS)}, {rng.choice(REASONS)}"
    # A number makes most texts distinct, as real reviews are.
    return f"{text}.{rng.choice(TAILS)} ({rng.randrange(1, 100000)})"


def generate(directory: Path, rows: int, seed: int = 7) -> tuple[Path, Path]:
    rng = random.Random(seed)
    jsonl, csv_path = directory / "train.jsonl", directory / "train.csv"
    recent: list[tuple[str, str, str]] = []
    with open(jsonl, "w", encoding="utf-8") as jf, open(csv_path, "w", encoding="utf-8", newline="") as cf:
        writer = csv.writer(cf)
        writer.writerow(["text", "label", "source"])
        for _ in range(rows):
            roll = rng.random()
            if recent and roll < 0.05:
                row = rng.choice(recent)  # an exact duplicate
            elif recent and roll < 0.06:
                text, label, source = rng.choice(recent)  # the same input, another label
                row = (text, rng.choice([other for other in LABELS if other != label]), source)
            else:
                row = (sentence(rng), rng.choices(LABELS, weights=(5, 4, 1))[0], rng.choice(SOURCES))
                if len(recent) < 100000:
                    recent.append(row)
                else:
                    recent[rng.randrange(len(recent))] = row
            jf.write(json.dumps({"text": row[0], "label": row[1], "source": row[2]}) + "\n")
            writer.writerow(row)
    return jsonl, csv_path


SCAN_WORKER = """
import json, runpy, sys
if sys.argv[3] == "stdlib":
    sys.modules["pyarrow"] = None  # `import pyarrow` raises ImportError, as where it is not installed
probe = runpy.run_path(sys.argv[1])
facts = probe["collect_dataset"]({"dataset": sys.argv[2], "dataset_max_rows": 10**9, "dataset_max_seconds": 3600,
                                  "timeouts": {"dataset": 4000}})
if facts["error"]:
    sys.exit("scan error: " + facts["error"])
print(json.dumps({"rows": facts["rows"], "duplicate_rows": facts["duplicate_rows"],
                  "duplicate_inputs": facts["duplicate_inputs"], "conflicting_inputs": facts["conflicting_inputs"],
                  "label_counts": facts["label_counts"], "engine": facts.get("engine", "stdlib"),
                  "engine_note": facts.get("engine_note")}))
"""

PANDAS_WORKER = """
import json, sys
import pandas as pd
path = sys.argv[1]
df = pd.read_json(path, lines=True) if path.endswith(".jsonl") else pd.read_csv(path)
print(json.dumps({"pandas": pd.__version__, "strings": str(getattr(df["text"].dtype, "storage", df["text"].dtype)),
                  "rows": int(len(df)), "duplicate_rows": int(df.duplicated().sum()),
                  "duplicate_inputs": int(df.duplicated(subset=["text"]).sum()),
                  "conflicting_inputs": int((df.groupby("text")["label"].nunique() > 1).sum()),
                  "label_counts": {str(k): int(v) for k, v in df["label"].value_counts().items()}}))
"""


def measure_child(argv: list[str]) -> None:
    """Run argv, then print its output's counts with wall time, CPU time and peak RSS."""
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"worker failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update(wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime, peak_rss_mb=usage.ru_maxrss / 1024)
    print(json.dumps(result))


POLARS_WORKER = """
import json, sys
import polars as pl
path = sys.argv[1]
df = pl.read_ndjson(path) if path.endswith(".jsonl") else pl.read_csv(path)
rows = df.height
print(json.dumps({"rows": rows, "duplicate_rows": rows - df.unique().height,
                  "duplicate_inputs": rows - df["text"].n_unique(),
                  "conflicting_inputs": df.group_by("text").agg(pl.col("label").n_unique().alias("n"))
                                          .filter(pl.col("n") > 1).height,
                  "label_counts": {str(k): int(v) for k, v in df["label"].value_counts().iter_rows()}}))
"""

DUCKDB_WORKER = """
import json, sys
import duckdb
path = sys.argv[1]
reader = "read_json_auto(?, format='newline_delimited')" if path.endswith(".jsonl") else "read_csv_auto(?)"
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # its bar would share stdout with the counts
con.execute("CREATE TABLE t AS SELECT * FROM " + reader, [path])
one = lambda sql: con.execute(sql).fetchone()[0]
rows = one("SELECT count(*) FROM t")
print(json.dumps({"rows": rows, "duplicate_rows": rows - one("SELECT count(*) FROM (SELECT DISTINCT * FROM t)"),
                  "duplicate_inputs": rows - one("SELECT count(DISTINCT text) FROM t"),
                  "conflicting_inputs": one("SELECT count(*) FROM (SELECT text FROM t GROUP BY text "
                                            "HAVING count(DISTINCT label) > 1)"),
                  "label_counts": {str(k): int(v) for k, v in
                                   con.execute("SELECT label, count(*) FROM t GROUP BY label").fetchall()}}))
"""

WORKERS = {"pandas": PANDAS_WORKER, "polars": POLARS_WORKER, "duckdb": DUCKDB_WORKER}


def measure(method: str, path: Path, probe: Path) -> dict:
    if method.startswith("scan"):
        # "scan-before": the probe of --baseline, written next to the current one.
        script = probe.with_name("probe_before.py") if method == "scan-before" else probe
        engine = "auto" if method == "scan" else "stdlib"
        worker = [sys.executable, "-I", "-c", SCAN_WORKER, str(script), str(path), engine]
    else:
        worker = [sys.executable, "-c", WORKERS[method], str(path)]
    proc = subprocess.run([sys.executable, __file__, "_measure", "--", *worker], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{method} on {path.name} failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best(method: str, path: Path, repeat: int, probe: Path) -> dict:
    runs = [measure(method, path, probe) for _ in range(repeat)]
    result = dict(min(runs, key=lambda r: r["wall_s"]))
    result["cpu_s"] = min(r["cpu_s"] for r in runs)
    result["peak_rss_mb"] = min(r["peak_rss_mb"] for r in runs)
    return result


def write_probe(directory: Path, baseline: str | None) -> Path:
    """The probe script exactly as computefence sends it, for the scan worker to run; with a
    baseline git revision, that revision's script too (probe_before.py)."""
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo))
    from computefence.probe.assemble import probe_source

    script = directory / "probe.py"
    script.write_text(probe_source(), encoding="utf-8")
    if baseline:
        tree = directory / "baseline"
        shutil.rmtree(tree, ignore_errors=True)  # a --dir reused from an earlier run
        tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", baseline, "computefence"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        code = "from computefence.probe.assemble import probe_source; import sys; sys.stdout.write(probe_source())"
        before = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tree,
            capture_output=True,
            text=True,
            check=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        ).stdout
        script.with_name("probe_before.py").write_text(before, encoding="utf-8")
    return script


def installed(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


COUNTS = ("rows", "duplicate_rows", "duplicate_inputs", "conflicting_inputs")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "_measure" and sys.argv[2] == "--":
        measure_child(sys.argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs for each figure")
    parser.add_argument("--dir", type=Path, help="where to write the data (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument(
        "--baseline",
        metavar="GITREV",
        help="also time the scan of this revision's probe (e.g. a commit before a change)",
    )
    parser.add_argument("--formats", default="jsonl,csv", help="which files to measure (default: jsonl,csv)")
    parser.add_argument("--no-pandas", action="store_true", help="leave pandas out (its targets then not judged)")
    args = parser.parse_args()
    if not args.no_pandas and not installed("pandas"):
        print("the benchmark compares against pandas: pip install pandas (or --no-pandas)", file=sys.stderr)
        return 2
    others = [name for name in ("polars", "duckdb") if installed(name)]
    formats = set(args.formats.split(","))
    directory = args.dir or Path(tempfile.mkdtemp(prefix="cf-dataset-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    ok = True
    try:
        started = time.perf_counter()
        stamp = directory / "rows.txt"  # with --dir, files of the same size are generated once
        if stamp.exists() and stamp.read_text() == str(args.rows):
            files = (directory / "train.jsonl", directory / "train.csv")
        else:
            files = generate(directory, args.rows)
            stamp.write_text(str(args.rows))
        print(
            f"generated {args.rows:,} rows as {', '.join(f'{p.name} ({p.stat().st_size / 1e6:.0f} MB)' for p in files)}"
            f" in {time.perf_counter() - started:.0f}s under {directory}"
        )
        probe = write_probe(directory, args.baseline)
        methods = (
            ["scan", "scan-stdlib"]
            + (["scan-before"] if args.baseline else [])
            + ([] if args.no_pandas else ["pandas"])
            + others
        )
        header = f"{'file':<12} {'method':<11} {'wall s':>7} {'cpu s':>7} {'peak MB':>8}  " + "  ".join(
            f"{c:>18}" for c in COUNTS
        )
        print(header)
        for path in files:
            if path.suffix.lstrip(".") not in formats:
                continue
            results = {method: best(method, path, args.repeat, probe) for method in methods}
            for method, r in results.items():
                print(
                    f"{path.name:<12} {method:<11} {r['wall_s']:>7.2f} {r['cpu_s']:>7.2f} {r['peak_rss_mb']:>8.0f}  "
                    + "  ".join(f"{r[c]:>18,}" for c in COUNTS)
                )
            scan, stdlib = results["scan"], results["scan-stdlib"]
            print(
                f"{path.name:<12} scan counted with {scan['engine']}"
                + (f" ({scan['engine_note']})" if scan["engine_note"] else "")
            )
            same = all(
                all(r[c] == scan[c] for c in COUNTS) and r["label_counts"] == scan["label_counts"]
                for r in results.values()
            )
            print(f"{path.name:<12} counts {'identical' if same else 'DIFFER'} across {', '.join(results)}")
            met = same
            if "pandas" in results:
                pandas_ = results["pandas"]
                print(f"{path.name:<12} pandas {pandas_['pandas']}, strings stored as {pandas_['strings']}")
                speed = pandas_["wall_s"] / stdlib["wall_s"]
                memory = pandas_["peak_rss_mb"] / stdlib["peak_rss_mb"]
                met = met and speed >= 2 and memory >= 5
                print(
                    f"{path.name:<12} scan-stdlib {speed:.2f}x faster than pandas (target 2x), "
                    f"{memory:.1f}x less peak memory (target 5x)"
                )
            if args.baseline:
                before = results["scan-before"]
                gain = before["cpu_s"] / stdlib["cpu_s"]
                met = met and gain >= 1.4
                print(
                    f"{path.name:<12} scan-stdlib {gain:.2f}x less CPU than at {args.baseline} "
                    f"({before['cpu_s']:.2f} -> {stdlib['cpu_s']:.2f} s; target 1.4x)"
                )
            if "duckdb" in results:
                duck = results["duckdb"]
                time_ratio, memory_ratio = scan["wall_s"] / duck["wall_s"], scan["peak_rss_mb"] / duck["peak_rss_mb"]
                if scan["engine"] == "pyarrow":
                    met = met and time_ratio <= 1.5 and memory_ratio <= 1
                print(
                    f"{path.name:<12} scan takes {time_ratio:.2f}x duckdb's wall time ({scan['cpu_s'] / duck['cpu_s']:.2f}x "
                    f"its CPU) at {memory_ratio:.2f}x its peak memory (target with pyarrow: 1.5x at 1x)"
                )
            print(f"{path.name:<12} targets {'met' if met else 'NOT MET'}")
            ok = ok and met
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
