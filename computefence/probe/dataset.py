# Probe part: the dataset scan's detection and entry points: what the file is, which way to
# read it (dataset_arrow where pyarrow can show parity, else dataset_rows), and the
# collector. The definitions are at the top of dataset_counts.

import codecs
import gzip
import json
import os
import stat
import time
import zlib

from .core import DEFAULT_TIMEOUTS, _read_text
from .dataset_arrow import _ds_arrow_scan
from .dataset_counts import _DatasetScan
from .dataset_rows import (
    _ds_array_objects,
    _ds_csv_rows,
    _ds_delimiter,
    _ds_jsonl_objects,
    _ds_object_columns,
    _ds_object_rows,
)

_DS_SAMPLE_BYTES = 65536

# Measured peak memory per scanned row at 10M rows, tables and interpreter included.
_DS_BYTES_PER_ROW = 64

# Columns of JSON rows: keys seen in this many first rows (they also decide the guesses).
_DS_COLUMNS_ROWS = 1000

_DS_OTHER_MAGIC = (
    (b"BZh", "bzip2", "bunzip2 -k"),
    (b"\xfd7zXZ\x00", "xz", "unxz -k"),
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d"),
    (b"PK\x03\x04", "zip", "unzip"),
)


class _DatasetProblem(Exception):
    """The file cannot be scanned at all; `kind` names the problem for the evaluator."""

    def __init__(self, kind, message):
        Exception.__init__(self, message)
        self.kind = kind


def _ds_memory_available(proc="/proc"):
    """MemAvailable in bytes, None where unknown."""
    try:
        meminfo = _read_text(os.path.join(proc, "meminfo"))
    except OSError:
        return None
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


def _ds_read_sample(opener):
    """The first bytes of the (decompressed) content; a truncated gzip gives what it has."""
    pieces = []
    total = 0
    stream = opener()
    try:
        while total < _DS_SAMPLE_BYTES:
            try:
                piece = stream.read(8192)
            except (EOFError, OSError, zlib.error):
                break
            if not piece:
                break
            pieces.append(piece)
            total += len(piece)
    finally:
        stream.close()
    return b"".join(pieces)


def _ds_text_format(sample, ext):
    """jsonl, json-array, csv or tsv from the content, the suffix only breaking ties."""
    body = sample.lstrip()
    first = body[:1]
    if first == b"[":
        return "json-array"
    if first == b"{":
        if ext not in (".csv", ".tsv"):
            return "jsonl"
        try:
            json.loads(body.split(b"\n", 1)[0].decode("utf-8"))
            return "jsonl"
        except ValueError:
            pass
    if ext in (".json", ".jsonl", ".ndjson"):
        header = body.split(b"\n", 1)[0]
        if not any(c in header for c in (b",", b"\t", b";", b"|")):
            return "jsonl"
    return "csv"


def _ds_detect(scan, path):
    """Find the file, its compression and its format (recorded in scan.facts). Returns how
    to read it: {"full", "opener", "sample", "estimated_bytes", "delimiter"}, or None when
    there is nothing to read row by row (Parquet, an empty file)."""
    facts = scan.facts
    full = os.path.expanduser(path)
    if not os.path.exists(full):
        raise _DatasetProblem("not_found", "%s does not exist" % path)
    facts["exists"] = True
    if os.path.isdir(full):
        raise _DatasetProblem("not_a_file", "%s is a directory; name a data file in it" % path)
    try:
        regular = stat.S_ISREG(os.stat(full).st_mode)
    except OSError:
        regular = True  # the open below says why not
    if not regular:  # a FIFO would block the open, a device never end
        raise _DatasetProblem("not_a_file", "%s is not a regular file (a FIFO, device or socket)" % path)
    try:
        with open(full, "rb") as handle:
            magic = handle.read(8)
            size = os.fstat(handle.fileno()).st_size
            if magic[:2] == b"\x1f\x8b" and size >= 18:
                handle.seek(-4, 2)
                isize = int.from_bytes(handle.read(4), "little")
            else:
                isize = 0
    except OSError as exc:
        raise _DatasetProblem("unreadable_file", "cannot read %s: %s" % (path, exc.strerror or exc))
    name = os.path.basename(full).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    ext = os.path.splitext(name)[1]
    if magic[:4] == b"PAR1":
        facts["format"] = "parquet"
        return None
    for prefix, compression, command in _DS_OTHER_MAGIC:
        if magic.startswith(prefix):
            facts["compression"] = compression
            raise _DatasetProblem("compressed", "%s-compressed; decompress it first (%s)" % (compression, command))
    if magic[:2] == b"\x1f\x8b":
        facts["compression"] = "gzip"
        # The gzip trailer holds the uncompressed size modulo 4 GiB.
        estimated_bytes = isize if isize >= size else size * 4

        def opener():
            return gzip.open(full, "rb")
    else:
        estimated_bytes = size

        def opener():
            return open(full, "rb")

    sample = _ds_read_sample(opener)
    if sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # UTF-32's marks start the same way
        raise _DatasetProblem(
            "utf16", "UTF-16/32 text; training loaders expect UTF-8 (iconv -f UTF-16 -t UTF-8 converts it)"
        )
    if sample.startswith(codecs.BOM_UTF8):
        sample = sample[3:]
    if b"\x00" in sample:
        what = "an Arrow file (datasets' save_to_disk?)" if sample.startswith(b"ARROW1") else "binary data"
        raise _DatasetProblem("unknown_format", "%s holds %s, not JSON Lines, JSON, CSV, TSV or Parquet" % (path, what))
    if not sample.strip():
        facts["format"] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}.get(ext)
        return None
    fmt = _ds_text_format(sample, ext)
    delimiter = None
    if fmt == "csv":
        text = sample.decode("utf-8", "replace")
        if len(sample) >= _DS_SAMPLE_BYTES and "\n" in text:
            text = text[: text.rindex("\n")]
        delimiter = _ds_delimiter(text, ext)
        fmt = "tsv" if delimiter == "\t" else "csv"
    facts["format"] = fmt
    return {
        "full": full,
        "opener": opener,
        "sample": sample,
        "estimated_bytes": estimated_bytes,
        "delimiter": delimiter,
    }


def _ds_scan_file(scan, path, sink, memory_available, row_by_row):
    facts = scan.facts
    source = _ds_detect(scan, path)
    if facts["format"] == "parquet":
        _ds_scan_parquet(scan, os.path.expanduser(path), sink, memory_available, row_by_row)
        return
    if source is None:
        scan.choose_columns([])
        return
    sample = source["sample"]
    lines = sample.count(b"\n")
    if lines:
        estimated = source["estimated_bytes"] * lines // len(sample)
        facts["estimated_rows"] = max(estimated, lines)
    if not row_by_row:
        facts["engine_note"] = _ds_arrow_scan(scan, source, memory_available)
        if facts["engine_note"] is None:
            return
    if lines:
        scan.presize(facts["estimated_rows"])
    fmt = facts["format"]
    stream = source["opener"]()
    try:
        if fmt in ("csv", "tsv"):
            _ds_csv_rows(scan, stream, source["delimiter"], sink)
            return
        if fmt == "jsonl":
            objects = _ds_jsonl_objects(scan, stream)
        else:
            objects = _ds_array_objects(scan, stream, sink is not None)
        head = []
        for item in objects:
            head.append(item)
            if len(head) >= _DS_COLUMNS_ROWS:
                break
        icol, lcol = scan.choose_columns(_ds_object_columns(obj for _, obj, _ in head))
        scan.consume(_ds_object_rows(scan, head, objects, icol, lcol), sink)
        if fmt == "jsonl" and not facts["rows"] and facts["unreadable_rows"]:
            scan.fail("invalid_json", "no line is a JSON object (a pretty-printed JSON document is not JSON Lines)")
    finally:
        stream.close()


def _ds_scan_parquet(scan, path, sink, memory_available, row_by_row):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise _DatasetProblem(
            "needs_pyarrow", "parquet needs pyarrow on the pod (pip install pyarrow), or convert the file to JSON Lines"
        )
    try:
        handle = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own error types for corrupt files
        raise _DatasetProblem("unknown_format", "not a readable Parquet file: %s" % exc)
    metadata = handle.metadata
    scan.facts["estimated_rows"] = metadata.num_rows
    if not row_by_row:
        source = {
            "full": path,
            "estimated_bytes": sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)),
        }
        scan.facts["engine_note"] = _ds_arrow_scan(scan, source, memory_available)
        if scan.facts["engine_note"] is None:
            return
    icol, lcol = scan.choose_columns(list(handle.schema_arrow.names))
    scan.presize(metadata.num_rows)

    def objects():
        index = 0
        try:
            for batch in handle.iter_batches(batch_size=65536):
                for obj in batch.to_pylist():
                    index += 1
                    yield index, obj, index - 1
        except (OSError, ValueError) as exc:  # pyarrow's errors for corrupt data derive from these
            scan.fail("io", "reading stopped after row %d: %s" % (index, exc))

    scan.consume(_ds_object_rows(scan, [], objects(), icol, lcol), sink)


def run_dataset_scan(
    path,
    input_column=None,
    label_column=None,
    max_rows=None,
    max_seconds=None,
    sink=None,
    memory_available=None,
    row_by_row=False,
):
    """Scan the dataset at `path`; returns the finished _DatasetScan (its .facts dict is
    shaped like models.DatasetFacts). Problems with the file end up in the facts.
    `memory_available` (bytes; default this machine's MemAvailable) bounds the pyarrow path;
    `row_by_row` (implied by a sink) keeps to the stdlib path, whose input table
    conflicting_input_fingerprints() reads."""
    started = time.time()
    deadline = started + float(max_seconds) if max_seconds else float("inf")
    scan = _DatasetScan(path, input_column or None, label_column or None, max_rows, deadline)
    if memory_available is None:
        memory_available = _ds_memory_available()
    try:
        _ds_scan_file(scan, path, sink, memory_available, row_by_row or sink is not None)
    except _DatasetProblem as exc:
        scan.fail(exc.kind, str(exc))
    scan.finish()
    scan.facts["duration_s"] = round(time.time() - started, 3)
    return scan


def detect_dataset(path):
    """Where and what the dataset is, without reading its rows: the facts keys path, exists,
    format, compression, error and error_kind."""
    scan = _DatasetScan(path, None, None, None, float("inf"))
    try:
        _ds_detect(scan, path)
    except _DatasetProblem as exc:
        scan.fail(exc.kind, str(exc))
    return {key: scan.facts[key] for key in ("path", "exists", "format", "compression", "error", "error_kind")}


def _ds_row_budget(params, memory_available):
    """Rows the scan may keep fingerprints of: the parameter when set, else what a quarter of
    the memory available right now holds at _DS_BYTES_PER_ROW (20M where that is unknown)."""
    if params.get("dataset_max_rows"):
        return int(params["dataset_max_rows"])
    if memory_available is None:
        return 20000000
    return max(1000000, memory_available // 4 // _DS_BYTES_PER_ROW)


def collect_dataset(params):
    path = params.get("dataset")
    if not path:
        return None
    timeouts = params.get("timeouts") if isinstance(params.get("timeouts"), dict) else {}
    collector_limit = float(timeouts.get("dataset", DEFAULT_TIMEOUTS["dataset"]))
    # Stop early enough to answer with a partial scan before the collector's own timeout.
    max_seconds = min(float(params.get("dataset_max_seconds") or collector_limit), collector_limit * 0.9)
    memory_available = _ds_memory_available((params.get("roots") or {}).get("proc", "/proc"))
    return run_dataset_scan(
        path,
        params.get("input_column"),
        params.get("label_column"),
        max_rows=_ds_row_budget(params, memory_available),
        max_seconds=max_seconds,
        memory_available=memory_available,
    ).facts
