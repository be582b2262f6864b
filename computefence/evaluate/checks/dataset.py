"""dataset.*: is the training file fit to train on?

The probe streams the file on the pod and counts (see the "dataset scan" section of
computefence/probe/dataset_counts.py for the exact definitions); the verdicts are made here:

- dataset.unreadable: a missing file, an unknown format or unparsable rows above 1% block; a
  few unparsable rows warn (pandas and datasets' loaders stop at the first one).
- dataset.columns: a named column no row has blocks, listing the columns that exist.
- dataset.duplicates, dataset.conflicting-labels, dataset.missing-values: any warn.
- dataset.label-skew: warns when the majority class holds 90% or more of the labelled rows, or
  a class holds less than a tenth of its balanced share 1/k. Every message states the loss
  plateau: a model that ignores its input and predicts the label frequencies p has
  cross-entropy H = -sum(p ln p) (ln 2 = 0.693 for two balanced classes), so a loss stuck
  there means nothing was learned; with heavy skew H is small and looks like progress.

Fixes are commands for the pod, mostly `computefence dataset dedupe IN OUT [flags]`, with
advice for what a command cannot do (weighting the loss, fixing the export).
"""

from __future__ import annotations

import difflib
import math
import posixpath
from typing import Any

from computefence.evaluate.context import Context, block, collector_error, passed, q, skipped, warn
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import CheckOptions, DatasetFacts, Facts, Finding, Fix, FixStep, StepKind
from computefence.text import one_line

CHECKS: dict[str, CheckSpec] = {
    "dataset.unreadable": CheckSpec("the dataset exists, has a known format and its rows parse", Remedy.CONFIG),
    "dataset.columns": CheckSpec("the named input and label columns exist", Remedy.CONFIG),
    "dataset.duplicates": CheckSpec("no row is an exact duplicate of an earlier row", Remedy.CONFIG),
    "dataset.conflicting-labels": CheckSpec("no input carries more than one label", Remedy.CONFIG),
    "dataset.missing-values": CheckSpec("no row lacks its input or label", Remedy.CONFIG),
    "dataset.label-skew": CheckSpec(
        "the labels are not so skewed that predicting the majority looks like learning", Remedy.CONFIG
    ),
}

# Above this share of unparsable rows the file is broken, not just untidy.
UNREADABLE_BLOCK_SHARE = 0.01
# The majority class share from which always predicting it already scores this accuracy.
SKEW_MAJORITY_SHARE = 0.9
# A class below this fraction of its balanced share (1/k) is too rare to be learned.
RARE_CLASS_FRACTION = 0.1
# More distinct labels than this is a free-form target, not classes.
MAX_CLASSES = 50

INSTALL_NOTE = (
    "it needs ComputeFence where it runs: install it from its checkout or wheel "
    "(the computefence package on PyPI is another project)"
)


def check_dataset(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    data = facts.dataset
    if data is None:
        if not checks.dataset:
            return []
        reason = collector_error(facts, "dataset") or "the probe returned no dataset facts"
        return [_warn_unchecked(checks.dataset, reason)]
    findings = [_readability(data)]
    if data.error or not data.rows:
        return findings
    findings.append(_columns(data))
    findings.append(_duplicates(data))
    absent = set(data.absent_columns)
    has_input = data.input_column is not None and data.input_column not in absent
    has_label = data.label_column is not None and data.label_column not in absent
    if has_input and has_label:
        findings.append(_conflicts(data))
    if has_input or has_label:
        findings.append(_missing(data, has_input, has_label))
    if has_label:
        findings.append(_skew(data))
    return findings


RULES = [check_dataset]


# ---------------------------------------------------------------- dataset.unreadable


def _warn_unchecked(path: str, reason: str) -> Finding:
    return warn(
        "dataset.unreadable",
        f"dataset {path} was not scanned: {one_line(reason, 200)}",
        Fix(
            commands=[f"computefence dataset check {q(path)}"],
            advice=f"scans without the probe's time budget; {INSTALL_NOTE}",
        ),
        subject=path,
    )


def _readability(data: DatasetFacts) -> Finding:
    cid, path = "dataset.unreadable", data.path
    if data.error:
        return block(cid, f"dataset {path}: {one_line(data.error, 300)}", _error_fix(data), subject=path)
    total = data.rows + data.unreadable_rows
    if not data.rows:
        message = f"dataset {path} has no rows" if not total else f"no row of {path} can be read"
        if data.unreadable_reason:
            message += f" ({one_line(data.unreadable_reason, 200)})"
        return block(
            cid,
            message,
            Fix(
                commands=[_show_lines_command(data, data.unreadable_lines or [1, 2, 3])],
                advice="look at what the file holds",
            ),
            subject=path,
        )
    if data.unreadable_rows:
        share = data.unreadable_rows / total
        message = (
            f"{data.unreadable_rows:,} of {total:,} rows of {path} cannot be read ({_pct(share)}), "
            f"first at line{'s' if len(data.unreadable_lines) > 1 else ''} "
            f"{', '.join(map(str, data.unreadable_lines[:5]))}; {one_line(data.unreadable_reason, 200)}"
        )
        if share > UNREADABLE_BLOCK_SHARE:
            fix = Fix(
                commands=[_show_lines_command(data, data.unreadable_lines[:3])],
                advice="see what is wrong with them, then fix the export that wrote the file",
            )
            return block(cid, message + _partial_note(data), fix, subject=path)
        fix = Fix(
            steps=[FixStep.local(_dedupe_command(data), StepKind.SAFE)],
            advice=f"writes a copy without them (and without duplicates); {INSTALL_NOTE}",
        )
        return warn(
            cid,
            message + "; pandas and datasets stop at the first unreadable row" + _partial_note(data),
            fix,
            subject=path,
        )
    if data.partial:
        return warn(
            cid,
            f"only part of {path} was scanned ({data.partial_reason}): {data.rows:,} rows; "
            "the dataset checks cover those rows only",
            Fix(
                commands=[f"computefence dataset check {q(path)}"],
                advice=f"scans the whole file without the probe's time budget; {INSTALL_NOTE}",
            ),
            subject=path,
        )
    kind = data.format or "data"
    if data.compression:
        kind += f", {data.compression}"
    if data.engine == "pyarrow":
        kind += ", counted with pyarrow"
    return passed(cid, f"{data.rows:,} rows of {path} read ({kind})", subject=path)


def _error_fix(data: DatasetFacts) -> Fix:
    path = data.path
    kind = data.error_kind
    if kind == "not_found":
        parent = posixpath.dirname(path.rstrip("/")) or "."
        return Fix(
            commands=[f"ls -la {q(parent)}"],
            advice="a relative path starts at the login directory; pass the file's real path",
        )
    if kind == "not_a_file":
        return Fix(
            commands=[f"ls -la {q(path)}"], advice="name one data file in it (.jsonl, .json, .csv, .tsv, .parquet)"
        )
    if kind == "unreadable_file":
        return Fix(
            commands=[f"ls -la {q(path)}"], advice="the checking user cannot read it: chmod a+r, or check as its owner"
        )
    if kind == "compressed":
        commands = {
            "bzip2": f"bunzip2 -k {q(path)}",
            "xz": f"unxz -k {q(path)}",
            "zstd": f"zstd -d {q(path)}",
            "zip": f"unzip {q(path)} -d {q(posixpath.dirname(path) or '.')}",
        }
        return Fix(
            steps=[
                FixStep.local(commands[data.compression], StepKind.SAFE)
                if data.compression in commands
                else FixStep.inspect(f"file {q(path)}")
            ],
            advice="then point training and this check at the decompressed file",
        )
    if kind == "utf16":
        return Fix(
            steps=[
                FixStep.local(f"iconv -f UTF-16 -t UTF-8 {q(path)} > {q(_derived_path(path, 'utf8'))}", StepKind.SAFE)
            ]
        )
    if kind == "needs_pyarrow":
        return Fix(
            steps=[FixStep.local("python3 -m pip install pyarrow", StepKind.SAFE)],
            advice="in the pod's interpreter, or convert the file to JSON Lines",
        )
    if kind == "truncated":
        look = f"gzip -t {q(path)}" if data.compression == "gzip" else f"tail -c 300 {q(path)}"
        return Fix(commands=[look], advice="the file is cut off: copy it to the pod again")
    if kind in ("invalid_json", "invalid_csv") and data.unreadable_lines:
        return Fix(commands=[_show_lines_command(data, data.unreadable_lines[:3])], advice="see what is wrong there")
    return Fix(
        commands=[f"file {q(path)}"],
        advice="datasets must be JSON Lines, a JSON array, CSV, TSV or Parquet (gzip allowed)",
    )


# ---------------------------------------------------------------- dataset.columns


def _columns(data: DatasetFacts) -> Finding:
    cid, path = "dataset.columns", data.path
    existing = ", ".join(data.columns) or "none"
    if data.absent_columns:
        fixes = []
        for name in data.absent_columns:
            flag = "--input-column" if name == data.input_column else "--label-column"
            close = difflib.get_close_matches(name, data.columns, n=1, cutoff=0.0)
            fixes.append(f"{flag} {q(close[0] if close else '<column>')}")
        names = ", ".join(repr(n) for n in data.absent_columns)
        return block(
            cid,
            f"{path} has no column {names}; its columns: {existing}",
            Fix(
                commands=[f"computefence dataset check {q(path)} {' '.join(fixes)}"],
                advice="name the columns the training script reads; doctor and fleet check take the same "
                "flags (input_column:/label_column: under checks: in an inventory)",
            ),
            subject=path,
        )
    parts = []
    for role, column, guessed in (
        ("input", data.input_column, data.input_column_guessed),
        ("label", data.label_column, data.label_column_guessed),
    ):
        if column is None:
            parts.append(f"no {role} column named or recognised (name it with --{role}-column)")
        else:
            parts.append(f"{role} column {column!r}" + (" (recognised by name)" if guessed else ""))
    skipped = []
    if data.input_column is None:
        skipped.append("duplicate inputs")
    if data.input_column is None or data.label_column is None:
        skipped.append("label conflicts")
    if data.label_column is None:
        skipped.append("label skew")
    message = "; ".join(parts) + f"; columns: {existing}"
    if skipped:
        message += f"; not checked: {', '.join(skipped)}"
    return passed(cid, message, subject=path)


# ---------------------------------------------------------------- duplicates, conflicts, missing values


def _duplicates(data: DatasetFacts) -> Finding:
    cid, path = "dataset.duplicates", data.path
    repeated_inputs = data.duplicate_inputs
    if data.duplicate_rows:
        message = (
            f"{data.duplicate_rows:,} of {data.rows:,} rows ({_pct(data.duplicate_rows / data.rows)}) repeat an "
            "earlier row exactly (a row present 3 times counts 2), over-weighting those examples"
        )
        if repeated_inputs > data.duplicate_rows:
            message += f"; {repeated_inputs:,} rows repeat an earlier input"
        return warn(
            cid,
            message + _partial_note(data),
            Fix(
                steps=[FixStep.local(_dedupe_command(data), StepKind.SAFE)],
                advice=f"keeps each row's first occurrence; {INSTALL_NOTE}",
            ),
            subject=path,
        )
    message = f"no duplicate rows among {data.rows:,}"
    if repeated_inputs:
        message += (
            f"; {repeated_inputs:,} rows repeat an earlier input with other fields differing "
            f"(`computefence dataset dedupe --by-input` keeps one row per input)"
        )
    return passed(cid, message + _partial_note(data), subject=path)


def _conflicts(data: DatasetFacts) -> Finding:
    cid, path = "dataset.conflicting-labels", data.path
    if not data.conflicting_inputs:
        return passed(
            cid,
            f"no input carries more than one label ({data.distinct_inputs:,} distinct inputs)" + _partial_note(data),
            subject=path,
        )
    share = f" of {data.distinct_inputs:,} distinct inputs" if data.distinct_inputs else ""
    examples = "; ".join(
        f"{ex.input!r} labelled {', '.join(ex.labels)} (lines {', '.join(map(str, ex.lines[:5]))})"
        for ex in data.conflict_examples[:3]
    )
    message = (
        f"{data.conflicting_inputs:,}{share} {'inputs carry' if not share else 'carry'} more than one label; "
        "the model is trained to answer both ways"
    )
    if examples:
        message += f", e.g. {examples}"
    return warn(
        cid,
        message + _partial_note(data),
        Fix(
            steps=[FixStep.local(_dedupe_command(data, "--drop-conflicts"), StepKind.SAFE)],
            advice=f"drops every row of those inputs (or fix their labels at the lines shown); {INSTALL_NOTE}",
        ),
        subject=path,
    )


def _missing(data: DatasetFacts, has_input: bool, has_label: bool) -> Finding:
    cid, path = "dataset.missing-values", data.path
    parts = []
    if has_input and data.missing_inputs:
        parts.append(
            f"{_rows(data.missing_inputs)} ({_pct(data.missing_inputs / data.rows)}) without input "
            f"{data.input_column!r}"
        )
    if has_label and data.missing_labels:
        parts.append(
            f"{_rows(data.missing_labels)} ({_pct(data.missing_labels / data.rows)}) without label "
            f"{data.label_column!r}"
        )
    if not parts:
        return passed(
            cid, f"every row has its {' and '.join(_roles(has_input, has_label))}" + _partial_note(data), subject=path
        )
    return warn(
        cid,
        "; ".join(parts) + " (absent, null or blank): tokenizers and collators fail on them or train on "
        "empty text" + _partial_note(data),
        Fix(
            steps=[FixStep.local(_dedupe_command(data, "--drop-missing"), StepKind.SAFE)],
            advice=f"drops those rows and duplicates; {INSTALL_NOTE}",
        ),
        subject=path,
    )


def _roles(has_input: bool, has_label: bool) -> list[str]:
    return [role for role, present in (("input", has_input), ("label", has_label)) if present]


# ---------------------------------------------------------------- dataset.label-skew


def entropy(counts: list[int]) -> float:
    """Cross-entropy, in nats, of always predicting the label frequencies: -sum(p ln p)."""
    total = sum(counts)
    return -sum(c / total * math.log(c / total) for c in counts if c) if total else 0.0


def _skew(data: DatasetFacts) -> Finding:
    cid, path = "dataset.label-skew", data.path
    distinct = data.distinct_labels
    if not data.label_counts:
        return skipped(cid, "no labelled rows to weigh", subject=path)
    if data.distinct_labels_capped or distinct > MAX_CLASSES:
        more = "more than " if data.distinct_labels_capped else ""
        return skipped(
            cid,
            f"{more}{distinct:,} distinct labels: a free-form target rather than classes; skew not checked",
            subject=path,
        )
    counts = sorted(data.label_counts.items(), key=lambda item: -item[1])
    k = len(counts)  # labels that print alike (1 and "1") count as one here
    labelled = sum(count for _, count in counts)
    shares = {name: count / labelled for name, count in counts}
    top = counts[0][0]
    h = entropy([count for _, count in counts])
    plateau = (
        f"a model that ignores its input and predicts these frequencies has loss H = -Σ p ln p = {h:.3f} nats "
        f"(ln 2 = 0.693 for two balanced classes)"
    )
    spread = ", ".join(f"{name!r} {_pct(share)}" for name, share in list(shares.items())[:6])
    if k == 1:
        return warn(
            cid,
            f"every labelled row has label {top!r}: there is nothing to learn (loss plateau 0)" + _partial_note(data),
            Fix(
                commands=[_show_lines_command(data, [1, 2, 3])],
                advice="check --label-column names the label and the export kept every class",
            ),
            subject=path,
        )
    rare = [name for name, share in shares.items() if share < RARE_CLASS_FRACTION / k]
    if shares[top] < SKEW_MAJORITY_SHARE and not rare:
        return passed(
            cid,
            f"{k} labels ({spread}); {plateau}: a loss stuck there means nothing was learned" + _partial_note(data),
            subject=path,
        )
    if shares[top] >= SKEW_MAJORITY_SHARE:
        why = (
            f"{top!r} holds {_pct(shares[top])} of {labelled:,} labelled rows, so always predicting it already "
            f"scores {_pct(shares[top])} accuracy"
        )
    else:
        why = (
            f"{', '.join(map(repr, rare[:5]))} {'holds' if len(rare) == 1 else 'hold'} under a tenth of a "
            f"balanced share (1/{k}) of {labelled:,} labelled rows"
        )
    return warn(
        cid,
        f"labels are skewed: {why} ({spread}); {plateau}: a loss flattening near {h:.3f} has learned "
        "only the label frequencies" + _partial_note(data),
        _weights_fix(counts, labelled),
        subject=path,
    )


def _weights_fix(counts: list[tuple[str, int]], labelled: int) -> Fix:
    # Python for the training script, not a shell line: advice.
    k = len(counts)
    names = sorted((name for name, _ in counts), key=_label_order)
    by_name = dict(counts)
    weights = ", ".join(f"{labelled / (k * by_name[name]):.3g}" for name in names)
    return Fix(
        advice=f"weight the loss by inverse class frequency in the training script: "
        f"torch.nn.CrossEntropyLoss(weight=torch.tensor([{weights}])), classes in the order "
        f"{', '.join(names)}; or oversample the rare classes"
    )


def _label_order(name: str) -> tuple[Any, ...]:
    try:
        return (0, float(name), "")
    except ValueError:
        return (1, 0.0, name)


# ---------------------------------------------------------------- commands and wording


def _dedupe_command(data: DatasetFacts, *flags: str) -> str:
    parts = ["computefence dataset dedupe", q(data.path), q(_derived_path(data.path, "dedup"))]
    if data.input_column and not data.input_column_guessed:
        parts.append(f"--input-column {q(data.input_column)}")
    if data.label_column and not data.label_column_guessed:
        parts.append(f"--label-column {q(data.label_column)}")
    parts.extend(flags)
    return " ".join(parts)


def _derived_path(path: str, tag: str) -> str:
    """/data/train.jsonl.gz -> /data/train.dedup.jsonl.gz"""
    directory, name = posixpath.split(path)
    gz = name.endswith(".gz")
    stem = name[:-3] if gz else name
    base, ext = posixpath.splitext(stem)
    return posixpath.join(directory, f"{base}.{tag}{ext}{'.gz' if gz else ''}")


def _show_lines_command(data: DatasetFacts, lines: list[int]) -> str:
    if data.format == "parquet":
        script = f"import pyarrow.parquet as p; print(p.read_table({data.path!r}).slice({lines[0] - 1}, 3).to_pylist())"
        return f"python3 -c {q(script)}"
    select = ";".join(f"{n}p" for n in lines)
    reader = (
        f"zcat {q(data.path)} | sed -n '{select}'"
        if data.compression == "gzip"
        else f"sed -n '{select}' {q(data.path)}"
    )
    return f"{reader} | cut -c1-300"


def _partial_note(data: DatasetFacts) -> str:
    return f" (partial scan: {data.partial_reason})" if data.partial else ""


def _rows(n: int) -> str:
    return f"{n:,} row" if n == 1 else f"{n:,} rows"


def _pct(share: float) -> str:
    if 0 < share < 0.001:
        return "<0.1%"
    return f"{share * 100:.1f}%"
