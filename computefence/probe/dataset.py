# Probe part: the dataset scan.
# Reads a training file once and counts what poisons fine-tuning: unreadable rows, duplicate
# rows, inputs carrying several labels, missing values and the label distribution.
#
# Memory grows with the number of distinct rows, never with the file size: each row is
# reduced to 64-bit fingerprints (the interpreter's SipHash of the normalised value; two
# different rows collide with probability ~n^2/2^65, 1e-7 at two million rows), kept in flat
# open-addressing arrays at most 60% full: 24 bytes a slot per distinct input (its row and
# first label ride along), 8 per other distinct row. The input table starts sized for the
# row count estimated from the file size (at most 4M slots) and doubles as it fills. With the
# interpreter and the tables' growth steps, the whole process peaks at about 55-65 bytes per
# row (117 MB at 2M rows, 620 MB at 10M); the row budget assumes _DS_BYTES_PER_ROW. (The
# pyarrow fast path further down holds the file's tables instead, about 2.5 bytes per byte of
# file, and runs only where they fit a quarter of the memory available.)
#
# The laptop-side `computefence dataset` commands import this module: one reader, one set
# of definitions.
#
# Definitions, so users can check the counts:
# - rows are compared after normalisation: JSON objects with key order ignored at every
#   depth, surrounding whitespace of every string stripped, other values compared with their
#   type (1, 1.0, true and "1" are four different values); CSV/TSV rows cell by cell,
#   each cell stripped. A duplicate row is identical to an earlier row: a row present three
#   times counts two.
# - an input or label is missing when its key or cell is absent, null or blank. A duplicate
#   input is a present input equal to an earlier row's; a conflicting input is a distinct
#   present input seen with more than one distinct present label.
# - unreadable: a line that is not a JSON object, is not UTF-8, is longer than 64 MiB, or a
#   CSV record with more cells than the header (pandas refuses those files).
# - line numbers are 1-based physical lines where the row starts (Parquet: row numbers).

import codecs
import csv
import gzip
import io
import json
import os
import re
import stat
import time
import zlib
from array import array
from operator import itemgetter

from .core import _CHILDREN, _CHILDREN_LOCK, DEFAULT_TIMEOUTS, _kill_group, _read_text

_DS_LINE_CAP = 64 * 1024 * 1024
_DS_SAMPLE_BYTES = 65536
_DS_CHUNK = 1024 * 1024
_DS_BATCH_BYTES = 65536
# Measured peak memory per scanned row at 10M rows, tables and interpreter included.
_DS_BYTES_PER_ROW = 64
_DS_EXAMPLES = 5
_DS_EXAMPLE_CHARS = 120
_DS_EXAMPLE_LINES = 10
_DS_UNREADABLE_LINES = 10
_DS_LABELS_REPORTED = 50
# Beyond this many distinct labels the column is free text: names are no longer kept (label
# identity falls back to a 24-bit fingerprint, enough to notice conflicts).
_DS_LABELS_TRACKED = 10000
# Columns of JSON rows: keys seen in this many first rows (they also decide the guesses).
_DS_COLUMNS_ROWS = 1000
_DS_COLUMNS_MAX = 200
_DS_CHECK_EVERY = 4096
# First match wins: "instruction" before "input", which instruction datasets use for optional context.
_DS_INPUT_NAMES = (
    "text",
    "prompt",
    "instruction",
    "sentence",
    "question",
    "input",
    "inputs",
    "content",
    "review",
    "document",
    "query",
    "utterance",
)
_DS_LABEL_NAMES = ("label", "labels", "target", "class", "category", "sentiment", "y")
# Packed per-input value: (line << 24) | label id. Id 0 is "no label", the top id marks an
# input already counted as conflicting.
_DS_LID_MASK = 0xFFFFFF
_DS_CONFLICT = 0xFFFFFF
_DS_NO_LABEL = 0
_DS_JSON_WS = re.compile(r"[ \t\n\r]*")
_DS_BAD_CHAR = re.compile("[\udc80-\udcff]")
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


# Values are fingerprinted with hash(), which is SipHash for strings but structured for the
# rest (hash(0) == hash(""), hash(-1) == hash(-2)): other scalars enter as tagged strings.
_DS_TAG = "\x00"
_DS_SCALAR_TAGS = {int: _DS_TAG, float: _DS_TAG, bool: _DS_TAG, type(None): _DS_TAG}


_DS_TOO_DEEP = "nested too deep to read"


def _ds_freeze(value):
    """A hashable form of a JSON value: strings stripped, other scalars as tagged reprs,
    objects as frozensets of items, arrays as tuples."""
    kind = value.__class__
    if kind is str:
        return value.strip()
    if kind is dict:
        return frozenset([(k, _ds_freeze(v)) for k, v in value.items()])
    if kind is list or kind is tuple:
        return tuple([_ds_freeze(v) for v in value])
    return _DS_TAG + repr(value)


def _ds_thaw(value):
    """The frozen value back as JSON-like data, for showing it."""
    kind = value.__class__
    if kind is frozenset:
        return {str(k): _ds_thaw(v) for k, v in value}
    if kind is tuple:
        return [_ds_thaw(v) for v in value]
    if kind is str and value.startswith(_DS_TAG):
        text = value[1:]
        if text in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[text]
        for number in (int, float):
            try:
                return number(text)
            except ValueError:
                pass
        return text
    return value


def _ds_show(value, limit=None):
    """A frozen value as users wrote it (strings as is, anything else as JSON), optionally cut."""
    if value.__class__ is str and not value.startswith(_DS_TAG):
        text = value
    else:
        text = json.dumps(_ds_thaw(value), ensure_ascii=False, sort_keys=True, default=str)
    text = text.encode("utf-8", "replace").decode("utf-8")
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


class _DsFingerprints:
    """A growable set of nonzero 64-bit ints in one flat array (linear probing)."""

    def __init__(self, bits=10):
        self.keys = array("q", [0]) * (1 << bits)
        self.mask = (1 << bits) - 1
        self.used = 0

    def add(self, h):
        """True when h is new."""
        keys = self.keys
        mask = self.mask
        i = h & mask
        k = keys[i]
        while k:
            if k == h:
                return False
            i = (i + 1) & mask
            k = keys[i]
        keys[i] = h
        self.used += 1
        if self.used * 2 > mask:
            old = self.keys
            self.keys = array("q", [0]) * (2 * len(old))
            self.mask = 2 * len(old) - 1
            self.used = 0
            for k in old:
                if k:
                    self.add(k)
        return True


class _DatasetScan:
    """Counts over a stream of prepared rows (line, row fingerprint, input, label, raw)."""

    def __init__(self, path, input_column, label_column, max_rows, deadline):
        self.path = path
        self.given_input = input_column
        self.given_label = label_column
        self.max_rows = max_rows
        self.deadline = deadline
        self.facts = {
            "path": path,
            "exists": False,
            "format": None,
            "compression": None,
            "error": None,
            "error_kind": None,
            "columns": [],
            "input_column": None,
            "label_column": None,
            "input_column_guessed": False,
            "label_column_guessed": False,
            "absent_columns": [],
            "rows": 0,
            "unreadable_rows": 0,
            "unreadable_lines": [],
            "unreadable_reason": None,
            "duplicate_rows": 0,
            "duplicate_inputs": 0,
            "conflicting_inputs": 0,
            "conflict_examples": [],
            "missing_inputs": 0,
            "missing_labels": 0,
            "label_counts": {},
            "distinct_labels": 0,
            "distinct_labels_capped": False,
            "distinct_inputs": 0,
            "partial": False,
            "partial_reason": None,
            "estimated_rows": None,
            "duration_s": 0.0,
            "engine": "stdlib",
            "engine_note": None,
        }
        # Key-absent counts, bumped by the row preparers; a named column absent from every
        # row is reported as absent rather than as all-missing.
        self.absent = [0, 0]
        # label value -> id -> name and count; None (a missing label) is id 0, so the hot loop
        # needs no test for it.
        self.label_ids = {None: _DS_NO_LABEL}
        self.label_names = [None]
        self.label_counts = [0]
        self.examples = {}
        self.plain_rows = _DsFingerprints()
        self.extra_rows = _DsFingerprints()
        self.used = 0
        self._alloc(1 << 12)
        # Undecodable bytes read through text_reader() become lone surrogates (as with
        # surrogateescape) and are counted here, so the rows holding them can be found.
        self.bad_bytes = [0]

    def text_reader(self, stream):
        """`stream` as UTF-8 text whose undecodable bytes are kept as lone surrogates and counted."""
        bad = self.bad_bytes

        def count_bad_bytes(exc):
            if isinstance(exc, UnicodeDecodeError):
                bad[0] += exc.end - exc.start
            return codecs.lookup_error("surrogateescape")(exc)

        # Handler names are process-wide: the scan reading now owns this one (scans run one
        # after another, in the probe and in the dataset commands alike).
        codecs.register_error("computefence-dataset", count_bad_bytes)
        return io.TextIOWrapper(stream, encoding="utf-8-sig", errors="computefence-dataset", newline="")

    # -- the input table: per slot, three consecutive words (one cache line, which matters
    # more than anything else in the hot loop): the input's fingerprint, the fingerprint of
    # its first row, and (line of that row << 24) | its label id.

    def _alloc(self, cap):
        self.table = array("q", [0]) * (3 * cap)
        self.mask = cap - 1
        self.size = 3 * cap
        self.limit = int(cap * 0.6)

    def presize(self, estimated_rows):
        cap = 1 << 12
        while cap * 0.6 < estimated_rows and cap < (1 << 22):
            cap <<= 1
        if 3 * cap > self.size:
            self._alloc(cap)

    def _grow(self):
        old = self.table
        self._alloc(2 * (self.mask + 1))
        table, mask, size = self.table, self.mask, self.size
        for j in range(0, len(old), 3):
            h = old[j]
            if h:
                i = (h & mask) * 3
                while table[i]:
                    i += 3
                    if i == size:
                        i = 0
                table[i : i + 3] = old[j : j + 3]

    # -- columns

    def choose_columns(self, columns):
        facts = self.facts
        facts["columns"] = [c[:120] for c in columns[:_DS_COLUMNS_MAX]]
        lowered = {c.lower(): c for c in reversed(columns)}
        for slot, given, names in (
            ("input", self.given_input, _DS_INPUT_NAMES),
            ("label", self.given_label, _DS_LABEL_NAMES),
        ):
            if given:
                facts[slot + "_column"] = given
                continue
            for name in names:
                if name in lowered:
                    facts[slot + "_column"] = lowered[name]
                    facts[slot + "_column_guessed"] = True
                    break
        if facts["input_column"] is not None and facts["input_column"] == facts["label_column"]:
            facts["label_column"] = None
            facts["label_column_guessed"] = False
        return facts["input_column"], facts["label_column"]

    # -- per-row bookkeeping off the hot path

    def unreadable(self, line, reason):
        facts = self.facts
        facts["unreadable_rows"] += 1
        if len(facts["unreadable_lines"]) < _DS_UNREADABLE_LINES:
            facts["unreadable_lines"].append(line)
        if facts["unreadable_reason"] is None:
            facts["unreadable_reason"] = "line %d: %s" % (line, reason[:200])

    def fail(self, kind, message):
        if self.facts["error"] is None:
            self.facts["error"] = message
            self.facts["error_kind"] = kind

    def _new_label(self, value):
        if len(self.label_names) <= _DS_LABELS_TRACKED:
            lid = len(self.label_names)
            self.label_ids[value] = lid
            self.label_names.append(value)
            self.label_counts.append(1)
            return lid
        self.facts["distinct_labels_capped"] = True
        return _DS_LABELS_TRACKED + 1 + hash(value) % (_DS_CONFLICT - _DS_LABELS_TRACKED - 1)

    def _label_name(self, lid):
        if lid < len(self.label_names):
            return _ds_show(self.label_names[lid], _DS_EXAMPLE_CHARS)
        return "(one of more than %d labels)" % _DS_LABELS_TRACKED

    def _labels_differ(self, i, ih, iv, lv, lid, line):
        """The row's label differs from what the input table holds for its input (slot i)."""
        packed = self.table[i + 2]
        first = packed & _DS_LID_MASK
        if first == _DS_NO_LABEL:
            # The input's earlier rows had no label: this is its first label.
            self.table[i + 2] = (line << 24) | lid
            return
        if first != _DS_CONFLICT:
            self.facts["conflicting_inputs"] += 1
            self.table[i + 2] = packed | _DS_CONFLICT
            if len(self.examples) < _DS_EXAMPLES:
                self.examples[ih] = {
                    "input": _ds_show(iv, _DS_EXAMPLE_CHARS),
                    "labels": [self._label_name(first)],
                    "lines": [packed >> 24],
                }
        example = self.examples.get(ih)
        if example is not None:
            name = _ds_show(lv, _DS_EXAMPLE_CHARS)
            if name not in example["labels"]:
                example["labels"].append(name)
            if len(example["lines"]) < _DS_EXAMPLE_LINES:
                example["lines"].append(line)

    # -- the hot loop

    def consume(self, rows, sink=None):
        """Count `rows`, an iterable of (line, row fingerprint, input, label, raw) where input
        and label are normalised hashable values, None when missing. `sink.row(raw, duplicate row,
        input fingerprint, input or label missing)` sees every readable row (dedupe uses it)."""
        facts = self.facts
        table, mask, size, limit = self.table, self.mask, self.size, self.limit
        used = self.used
        label_ids = self.label_ids
        label_counts = self.label_counts
        new_label = self._new_label
        has_input = facts["input_column"] is not None
        has_label = facts["label_column"] is not None
        plain_add = self.plain_rows.add
        extra_add = self.extra_rows.add
        max_rows = self.max_rows or (1 << 62)
        next_check = min(_DS_CHECK_EVERY, max_rows)
        n = dup_rows = dup_inputs = missing_inputs = 0
        # Per row this is the whole cost of the scan beyond parsing: keep it lean.
        for n, (line, rh, iv, lv, raw) in enumerate(rows, 1):
            try:
                lid = label_ids[lv]
            except KeyError:
                lid = new_label(lv)
            else:
                label_counts[lid] += 1
            if iv is None:
                missing_inputs += 1
                ih = None
                dup = not plain_add(rh or 1)
                if dup:
                    dup_rows += 1
            else:
                ih = hash(iv) or 1
                i = (ih & mask) * 3
                k = table[i]
                while k:
                    if k == ih:
                        break
                    i += 3
                    if i == size:
                        i = 0
                    k = table[i]
                if k:
                    dup_inputs += 1
                    dup = table[i + 1] == rh or not extra_add(rh or 1)
                    if dup:
                        dup_rows += 1
                    if lid and table[i + 2] & 0xFFFFFF != lid:
                        self._labels_differ(i, ih, iv, lv, lid, line)
                else:
                    table[i] = ih
                    table[i + 1] = rh
                    table[i + 2] = (line << 24) | lid
                    dup = False
                    used += 1
                    if used > limit:
                        self._grow()
                        table, mask, size, limit = self.table, self.mask, self.size, self.limit
            if sink is not None:
                sink.row(raw, dup, ih, (has_input and iv is None) or (has_label and lv is None))
            if n >= next_check:
                if n >= max_rows:
                    facts["partial"] = True
                    facts["partial_reason"] = "stopped at the row budget of %d rows%s" % (max_rows, self._of_estimate())
                    break
                if time.time() > self.deadline:
                    facts["partial"] = True
                    facts["partial_reason"] = "stopped at the time budget after %d rows%s" % (
                        facts["rows"] + n,
                        self._of_estimate(),
                    )
                    break
                next_check = min(n + _DS_CHECK_EVERY, max_rows)
        self.used = used
        facts["rows"] += n
        facts["duplicate_rows"] += dup_rows
        facts["duplicate_inputs"] += dup_inputs
        if has_input:
            facts["missing_inputs"] += missing_inputs
        if has_label:
            facts["missing_labels"] = label_counts[_DS_NO_LABEL]

    def _of_estimate(self):
        estimated = self.facts["estimated_rows"]
        return " of about %d" % estimated if estimated else ""

    def conflicting_input_fingerprints(self):
        """Fingerprints of the inputs seen with several labels (dedupe --drop-conflicts)."""
        table = self.table
        return {table[j] for j in range(0, len(table), 3) if table[j] and table[j + 2] & _DS_LID_MASK == _DS_CONFLICT}

    def finish(self):
        facts = self.facts
        rows = facts["rows"]
        for slot, absent in (("input", self.absent[0]), ("label", self.absent[1])):
            name = facts[slot + "_column"]
            if name is not None and rows and absent == rows and name not in facts["absent_columns"]:
                facts["absent_columns"].append(name)
            if name in facts["absent_columns"]:
                facts["missing_%ss" % slot] = 0
        names = {}  # labels shown alike (1 and "1") are counted together
        for lid in range(1, len(self.label_names)):
            name = _ds_show(self.label_names[lid], _DS_EXAMPLE_CHARS)
            names[name] = names.get(name, 0) + self.label_counts[lid]
        ranked = sorted(names.items(), key=lambda item: (-item[1], item[0]))
        facts["label_counts"] = dict(ranked[:_DS_LABELS_REPORTED])
        facts["distinct_labels"] = len(self.label_names) - 1
        facts["distinct_inputs"] = self.used
        facts["conflict_examples"] = list(self.examples.values())
        return facts


# -- readers: each turns a file into prepared rows for _DatasetScan.consume


def _ds_object_columns(objects):
    seen = {}
    for obj in objects:
        for key in obj:
            if key not in seen and len(seen) < _DS_COLUMNS_MAX:
                seen[key] = True
    return list(seen)


def _ds_stream_failed(scan, exc, line):
    """A read error (a truncated gzip, an I/O error) ends the scan where it happened."""
    if isinstance(exc, EOFError):
        scan.fail("truncated", "the gzip data ends early, after line %d: the file is truncated" % line)
        scan.unreadable(line + 1, "the file ends in the middle of this row")
    else:
        scan.fail("io", "reading stopped after line %d: %s: %s" % (line, type(exc).__name__, exc))


_DS_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _ds_json_kind(value):
    """The JSON name of a parsed value's type (a line that is `null` is "a JSON null")."""
    return _DS_JSON_KINDS.get(value.__class__, "value")


def _ds_jsonl_objects(scan, stream):
    """(line, object, raw) for each JSON Lines row; blank lines are skipped.

    Lines are parsed about 64 KiB at a time by one json.loads call (each line wrapped in its
    own array, so a line can never merge with the next); a batch that does not come out as
    one value per line is parsed again line by line, so what is reported unreadable, and
    why, is what the line-by-line parse says."""
    readline = stream.readline
    cap = _DS_LINE_CAP
    line = 0
    batch = []
    size = 0
    while True:
        try:
            raw = readline(cap + 1)
            if len(raw) > cap:
                yield from _ds_jsonl_batch(scan, batch, line - len(batch))
                batch, size = [], 0
                line += 1
                scan.unreadable(line, "line longer than %d MiB" % (cap >> 20))
                while raw and not raw.endswith(b"\n"):
                    raw = readline(cap)
                continue
        except (EOFError, OSError, zlib.error) as exc:
            yield from _ds_jsonl_batch(scan, batch, line - len(batch))
            _ds_stream_failed(scan, exc, line)
            return
        if not raw:
            yield from _ds_jsonl_batch(scan, batch, line - len(batch))
            return
        line += 1
        if line == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[3:]
        batch.append(raw)
        size += len(raw)
        if size >= _DS_BATCH_BYTES:
            yield from _ds_jsonl_batch(scan, batch, line - len(batch))
            batch, size = [], 0


def _ds_jsonl_batch(scan, batch, before):
    """The rows of `batch`, consecutive raw lines of which the first is line before + 1."""
    rows = []
    if not batch:
        return rows
    try:
        values = json.loads((b"[[" + b"],[".join(batch) + b"]]").decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError included; a deep row is read alone
        values = None
    if values is None or len(values) != len(batch) or any(len(value) > 1 for value in values):
        for i, raw in enumerate(batch):
            obj = _ds_jsonl_line(scan, before + 1 + i, raw)
            if obj is not None:
                rows.append((before + 1 + i, obj, raw))
        return rows
    for i, value in enumerate(values):
        if value:  # [] is a blank line
            obj = value[0]
            if obj.__class__ is dict:
                rows.append((before + 1 + i, obj, batch[i]))
            else:
                scan.unreadable(before + 1 + i, "a JSON %s, not an object" % _ds_json_kind(obj))
    return rows


def _ds_jsonl_line(scan, line, raw):
    """One line's object, or None (blank, or counted as unreadable)."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        scan.unreadable(line, "not UTF-8 (byte 0x%02x at column %d)" % (raw[exc.start], exc.start + 1))
        return None
    except RecursionError:
        scan.unreadable(line, _DS_TOO_DEEP)
        return None
    except ValueError as exc:
        if raw.strip():
            reason = "not JSON: %s" % exc
            if not raw.endswith(b"\n"):
                reason = "the last line is cut off (%s)" % exc
            scan.unreadable(line, reason)
        return None
    if obj.__class__ is not dict:
        scan.unreadable(line, "a JSON %s, not an object" % _ds_json_kind(obj))
        return None
    return obj


def _ds_array_objects(scan, stream, want_raw):
    """(line, object, raw text) for each element of a JSON array, streamed in chunks."""
    text = scan.text_reader(stream)
    decode = json.JSONDecoder().raw_decode
    skip_ws = _DS_JSON_WS.match
    bad = scan.bad_bytes
    buf = ""
    pos = 0
    line = 1  # line number at buf[mark]
    mark = 0
    eof = False
    chunk = _DS_CHUNK
    started = False
    expect_value = True
    elements = 0
    while True:
        pos = skip_ws(buf, pos).end()
        if pos >= len(buf):
            if eof:
                break
            line += buf.count("\n", mark, pos)
            buf = ""
            pos = mark = 0
            try:
                more = text.read(chunk)
            except (EOFError, OSError, zlib.error) as exc:
                _ds_stream_failed(scan, exc, line + buf.count("\n", mark, pos))
                return
            if more:
                buf += more
            else:
                eof = True
            continue
        char = buf[pos]
        if not started:
            if char != "[":
                scan.fail("invalid_json", "the file starts with %r, not a JSON array" % char)
                return
            started = True
            pos += 1
            continue
        if not expect_value:
            if char == ",":
                expect_value = True
                pos += 1
                continue
            if char == "]":
                return
            line += buf.count("\n", mark, pos)
            mark = pos
            scan.unreadable(line, "expected ',' or ']' between array elements")
            scan.fail("invalid_json", "the JSON array is malformed at line %d" % line)
            return
        if char == "]" and elements == 0:
            return
        try:
            obj, end = decode(buf, pos)
        except RecursionError:
            # Where such an element ends is unknown without parsing it: the scan stops here.
            line += buf.count("\n", mark, pos)
            scan.unreadable(line, _DS_TOO_DEEP)
            scan.fail("invalid_json", "a JSON array element at line %d is %s" % (line, _DS_TOO_DEEP))
            return
        except ValueError as exc:
            line += buf.count("\n", mark, pos)
            mark = pos
            if not eof and len(buf) - pos <= _DS_LINE_CAP:
                # Most likely the element continues in the next chunk: keep only its start.
                buf = buf[pos:]
                pos = mark = 0
                more = None
                try:
                    more = text.read(chunk)
                except (EOFError, OSError, zlib.error):
                    pass
                if more:
                    buf += more
                    chunk = min(chunk * 2, _DS_LINE_CAP)
                    continue
                eof = True
                continue
            if not eof:
                scan.unreadable(line, "element larger than %d MiB" % (_DS_LINE_CAP >> 20))
                scan.fail(
                    "invalid_json", "a JSON array element at line %d is larger than %d MiB" % (line, _DS_LINE_CAP >> 20)
                )
            elif buf.rstrip().endswith("]"):
                scan.unreadable(line, "not JSON: %s" % exc)
                scan.fail("invalid_json", "the JSON array is malformed at line %d: %s" % (line, exc))
            else:
                scan.unreadable(line, "the file ends inside this element (%s)" % exc)
                scan.fail("truncated", "the JSON array is cut off at line %d: the file is truncated" % line)
            return
        chunk = _DS_CHUNK
        line += buf.count("\n", mark, pos)
        mark = pos
        expect_value = False
        elements += 1
        raw = buf[pos:end] if want_raw or bad[0] else None
        pos = end
        if bad[0]:
            found = len(_DS_BAD_CHAR.findall(raw))
            if found:
                bad[0] = max(0, bad[0] - found)
                scan.unreadable(line, "not UTF-8")
                continue
        if obj.__class__ is not dict:
            scan.unreadable(line, "a JSON %s, not an object" % _ds_json_kind(obj))
            continue
        yield line, obj, raw
    if started:
        scan.fail("truncated", "the JSON array has no closing ']': the file is truncated")
    else:
        scan.fail("invalid_json", "the file holds no JSON array")


def _ds_object_rows(scan, head, objects, icol, lcol):
    """Prepared rows from (line, object, raw): the rows in `head`, then the rest."""
    freeze = _ds_freeze
    absent = scan.absent
    tags = _DS_SCALAR_TAGS
    # Rows with the first row's keys (most rows) are fingerprinted as a tuple of their values in
    # that key order, cheaper than a frozenset of items; only rows with those same keys can
    # equal each other, and every one of them is fingerprinted the same way.
    getter = None
    for source in (head, objects):
        for line, obj, raw in source:
            if getter is None:
                keys = list(obj)
                width = len(keys)
                # itemgetter of one key returns the value itself, not a 1-tuple
                getter = itemgetter(*keys) if width > 1 else lambda row, key=(keys or [None])[0]: (row[key],)
            try:
                values = getter(obj) if len(obj) == width else None
            except KeyError:
                values = None
            if values is not None:
                try:
                    rh = hash(tuple([v.strip() if v.__class__ is str else tags[v.__class__] + repr(v) for v in values]))
                except KeyError:  # nested lists or objects
                    try:
                        rh = hash(tuple([freeze(v) for v in values]))
                    except RecursionError:
                        scan.unreadable(line, _DS_TOO_DEEP)
                        continue
            else:
                try:
                    # freeze(obj), inlined for flat rows
                    rh = hash(
                        frozenset(
                            [
                                (k, v.strip() if v.__class__ is str else tags[v.__class__] + repr(v))
                                for k, v in obj.items()
                            ]
                        )
                    )
                except KeyError:  # nested lists or objects
                    try:
                        rh = hash(freeze(obj))
                    except RecursionError:
                        scan.unreadable(line, _DS_TOO_DEEP)
                        continue
            iv = lv = None
            if icol is not None:
                try:
                    iv = obj[icol]
                except KeyError:
                    absent[0] += 1
                else:
                    if iv.__class__ is str:
                        iv = iv.strip() or None
                    elif iv is not None:
                        iv = freeze(iv)
            if lcol is not None:
                try:
                    lv = obj[lcol]
                except KeyError:
                    absent[1] += 1
                else:
                    if lv.__class__ is str:
                        lv = lv.strip() or None
                    elif lv is not None:
                        lv = freeze(lv)
            yield line, rh, iv, lv, raw


def _ds_delimiter(sample, suffix):
    header = sample.split("\n", 1)[0]
    if suffix == ".tsv" and "\t" in header:
        return "\t"
    cut = sample[:16384]
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    try:
        delimiter = csv.Sniffer().sniff(cut, delimiters=",\t;|").delimiter
    except csv.Error:
        delimiter = None
    if delimiter is None or delimiter not in header:
        counts = [(header.count(c), c) for c in ",\t;|"]
        best = max(counts)
        delimiter = best[1] if best[0] else ","
    return delimiter


class _DsLineCapture:
    """Hands lines to csv.reader and keeps them, so dedupe can copy records byte for byte."""

    def __init__(self, text):
        self.text = text
        self.lines = []

    def __iter__(self):
        for line in self.text:
            self.lines.append(line)
            yield line

    def take(self):
        record = "".join(self.lines)
        del self.lines[:]
        return record


def _ds_csv_rows(scan, stream, delimiter, sink):
    """Read the header, choose the columns, and yield prepared rows."""
    text = scan.text_reader(stream)
    capture = _DsLineCapture(text) if sink is not None else None
    reader = csv.reader(
        capture if capture is not None else text, delimiter=delimiter, quotechar='"', doublequote=True, strict=False
    )
    csv.field_size_limit(_DS_LINE_CAP)
    header = []
    try:
        while not header:  # blank lines before the header are skipped, as pandas does
            header = next(reader)
    except StopIteration:
        scan.choose_columns([])
        return
    except csv.Error as exc:
        scan.fail("invalid_csv", "the header line cannot be read: %s" % exc)
        return
    except (EOFError, OSError, zlib.error) as exc:
        _ds_stream_failed(scan, exc, 0)
        return
    bad = scan.bad_bytes
    if bad[0]:
        bad[0] = max(0, bad[0] - len(_DS_BAD_CHAR.findall("".join(header))))
    header = [cell.strip().encode("utf-8", "replace").decode("utf-8") for cell in header]
    if capture is not None:
        sink.header(capture.take())
    icol, lcol = scan.choose_columns(header)
    ncols = len(header)
    ic = header.index(icol) if icol in header else 1 << 30
    lc = header.index(lcol) if lcol in header else 1 << 30
    for name in (icol, lcol):
        if name is not None and name not in header:
            scan.facts["absent_columns"].append(name)
    scan.consume(_ds_csv_prepared(scan, reader, capture, ncols, ic, lc), sink)


def _ds_csv_prepared(scan, reader, capture, ncols, ic, lc):
    strip = str.strip
    bad = scan.bad_bytes
    prev = reader.line_num
    raw = None
    while True:
        try:
            for row in reader:
                line = prev + 1
                prev = reader.line_num
                if capture is not None:
                    raw = capture.take()
                m = len(row)
                if m > ncols or not m or bad[0]:
                    if not m or _ds_bad_record(scan, row, m, ncols, line):
                        continue
                t = tuple(map(strip, row))
                yield (line, hash(t), (t[ic] if ic < m else None) or None, (t[lc] if lc < m else None) or None, raw)
            return
        except csv.Error as exc:
            line = prev + 1
            prev = reader.line_num
            if capture is not None:
                capture.take()
            scan.unreadable(line, "CSV: %s" % exc)
        except (EOFError, OSError, zlib.error) as exc:
            _ds_stream_failed(scan, exc, prev)
            return


def _ds_bad_record(scan, row, cells, ncols, line):
    """True (and counted) when a CSV record is unreadable."""
    bad = scan.bad_bytes
    if bad[0]:
        found = len(_DS_BAD_CHAR.findall("".join(row)))
        if found:
            bad[0] = max(0, bad[0] - found)
            scan.unreadable(line, "not UTF-8")
            return True
    if cells > ncols:
        scan.unreadable(line, "%d cells, the header has %d (an unquoted delimiter in the text?)" % (cells, ncols))
        return True
    return False


# -- the pyarrow fast path
#
# When pyarrow imports and the file fits the memory budget, JSON Lines, CSV/TSV and Parquet are
# counted on Arrow tables (group_by, unique) instead of row by row. The counts must be
# the stdlib path's, so this path runs only where it can show they are, and otherwise hands the
# whole file to the stdlib path with the reason (facts "engine_note"):
# - any row the stdlib would call unreadable: Arrow refuses it (parse errors, bad UTF-8, a
#   line or record Arrow cuts differently), and JSON Lines must give one object per non-blank
#   line (the rows must equal those lines, no line may hold "}" then "{", be null or start with
#   a byte order mark, and every row has the first row's keys, which give the column order);
# - values the stdlib keeps apart and Arrow would not: null (Arrow cannot tell it from an
#   absent key) except in Parquet, double columns (1 == 1.0 there), nested values, and
#   columns of any type but string, integer or boolean (Arrow reads date-like JSON strings as
#   timestamps: those are read again as strings);
# - more than _DS_LABELS_TRACKED distinct labels (the stdlib then tells labels apart by a
#   24-bit fingerprint).
# Strings are stripped of exactly the characters str.strip() strips and compared by their
# hash(), as the stdlib path compares inputs; rows are compared column by column where the
# stdlib path hashes the whole row, so the two can differ only on a 64-bit fingerprint
# collision (see the top of this file).

# Peak memory per byte of (decompressed) file beyond the interpreter's ~150 MB, measured with
# bench/dataset_bench.py (JSON Lines 2.1 at 2M rows, 1.8 at 10M; CSV 2.3), with margin: tables,
# read buffers, hashes and the two groupings' hash tables (built at the same time).
_DS_ARROW_BYTES_PER_BYTE = {"jsonl": 2.5, "csv": 3, "tsv": 3, "parquet": 3}
_DS_ARROW_READ = 64 * 1024 * 1024
# Arrow parses a read in blocks on its threads, and a line or record must fit one: in blocks of
# _DS_ARROW_PARSE_BLOCK (a third less CPU than 16 MiB: more blocks than threads, and they stay in
# the caches), again in _DS_ARROW_BLOCK where a line or record does not fit.
_DS_ARROW_BLOCK = 16 * 1024 * 1024
_DS_ARROW_PARSE_BLOCK = 2 * 1024 * 1024
# Searched with Arrow's RE2 (as bytes, without holding the GIL; twice as fast as `re`).
_DS_TWO_OBJECTS = r"\}[ \t\r]*\{"
# pyarrow 26 crashes (SIGSEGV) where one of its blocks starts with a `null` line, and skips a
# byte order mark that starts a block; the stdlib path reports either line as unreadable, so
# any of them sends the file to the stdlib path before Arrow sees it.
_DS_LINE_HAZARD = re.compile(rb"[ \t\r]*(?:null[ \t\r]*(?:\n|$)|\xef\xbb\xbf)")
_DS_LATER_LINE_HAZARD = r"\n[ \t\r]*(?:null[ \t\r]*(?:\n|$)|\xef\xbb\xbf)"  # RE2, as above
# The first line with more than whitespace.
_DS_FIRST_ROW = re.compile(rb"[^\n]*[^ \t\r\n][^\n]*")


class _DsNoParity(Exception):
    """The fast path cannot show its counts would equal the stdlib path's; says why."""


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


def _ds_arrow_scan(scan, source, memory_available):
    """Count the file with pyarrow. Returns None when done, else why the stdlib path must
    count it (scan untouched then).

    pyarrow runs in a child process: a crash in it (pyarrow 26 has at least one SIGSEGV on
    bad input, see _DS_LINE_HAZARD) would otherwise take the whole probe down, and a child
    that outlives the time budget can be killed. The child sends the scan's state back."""
    fmt = scan.facts["format"]
    if fmt not in ("jsonl", "csv", "tsv", "parquet"):
        return "pyarrow has no reader for %s" % fmt
    needed = int(source["estimated_bytes"] * _DS_ARROW_BYTES_PER_BYTE[fmt])
    if memory_available is None or needed > memory_available // 4:
        return (
            "the file needs about %d MB in tables, more than a quarter of the memory available" % (needed >> 20)
            if memory_available is not None
            else "the memory available is unknown"
        )
    if not hasattr(os, "fork"):
        return "no os.fork here to keep pyarrow in a process of its own"
    import warnings

    try:
        read_fd, write_fd = os.pipe()
        with warnings.catch_warnings():  # Python 3.12+ warns about forking with threads running
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as exc:
        return "cannot start a process for pyarrow (%s)" % exc
    if pid == 0:
        _ds_arrow_child(scan, source, read_fd, write_fd)  # never returns
    os.close(write_fd)
    with _CHILDREN_LOCK:
        _CHILDREN[pid] = None
    data, ended = b"", False
    try:
        try:
            os.setpgid(pid, pid)  # the child does it too: whichever comes first
        except OSError:
            pass
        # The child stops reading at the deadline and then counts what it read: it gets a
        # little beyond it (within the collector's own timeout), then is killed.
        budget = scan.deadline - time.time()
        data, ended = _ds_read_until(read_fd, time.time() + budget * 1.05 + 1 if budget < float("inf") else None)
    finally:
        os.close(read_fd)
        if not ended:
            _kill_group(pid)
        _, status = os.waitpid(pid, 0)
        with _CHILDREN_LOCK:
            _CHILDREN.pop(pid, None)
    if not ended:
        return "pyarrow did not finish within the time budget"
    if os.WIFSIGNALED(status):
        return "pyarrow crashed (signal %d)" % os.WTERMSIG(status)
    try:
        result = json.loads(data.decode("utf-8"))
    except ValueError:
        return "pyarrow's process ended without an answer (exit status %d)" % os.WEXITSTATUS(status)
    if result["note"] is not None:
        return result["note"]
    state = result["state"]
    scan.facts.clear()
    scan.facts.update(state["facts"])
    scan.label_names = state["label_names"]
    scan.label_counts = state["label_counts"]
    scan.used = state["used"]
    scan.examples = dict(enumerate(state["examples"]))
    return None


def _ds_read_until(fd, deadline):
    """Everything `fd` gives until its end, or until `deadline` (time.time(); None: no limit).
    Returns (bytes, whether the end came)."""
    import select

    pieces = []
    while True:
        wait = None if deadline is None else deadline - time.time()
        if wait is not None and wait <= 0:
            return b"".join(pieces), False
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            piece = os.read(fd, 1 << 16)
            if not piece:
                return b"".join(pieces), True
            pieces.append(piece)


def _ds_arrow_child(scan, source, read_fd, write_fd):
    """In the forked child: count with pyarrow, send the outcome through write_fd, exit."""
    code = 0
    try:
        os.close(read_fd)
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        note = _ds_arrow_counts(scan, source)
        state = None
        if note is None:
            state = {
                "facts": scan.facts,
                "label_names": scan.label_names,
                "label_counts": scan.label_counts,
                "used": scan.used,
                "examples": list(scan.examples.values()),
            }
        view = memoryview(json.dumps({"note": note, "state": state}).encode("utf-8"))
        while view:
            view = view[os.write(write_fd, view) :]
    except BaseException:  # the parent reads no answer and counts row by row
        code = 1
    finally:
        os._exit(code)


def _ds_arrow_counts(scan, source):
    """_ds_arrow_scan's work, in the child: None when scan holds the counts, else why not."""
    facts = scan.facts
    fmt = facts["format"]
    try:
        import pyarrow
        import pyarrow.compute
        import pyarrow.csv
        import pyarrow.json  # here: nothing else is imported while pyarrow.acero is (_ds_arrow_count)
    except Exception as exc:  # absent, or broken in any way: the stdlib path needs none of it
        return "pyarrow does not import (%s)" % (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    # Arrow's default allocator (mimalloc in the wheels) hands memory back to the system and
    # faults it in again as the tables grow: 2.3 of 5.3 CPU-s in the kernel at 2M rows,
    # against 0.7 with jemalloc or the C library's.
    try:
        pyarrow.set_memory_pool(pyarrow.jemalloc_memory_pool())
    except NotImplementedError:  # a build without jemalloc
        pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    read = {"jsonl": _ds_arrow_jsonl, "parquet": _ds_arrow_parquet}.get(fmt, _ds_arrow_csv)
    try:
        _ds_arrow_count(scan, read, source, _ds_arrow_preparer(scan, fmt == "parquet"))
    except _DsNoParity as exc:
        return str(exc)
    except Exception as exc:  # pyarrow's own errors: a row it reads differently, memory, ...
        return "pyarrow: %s" % (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return None


def _ds_arrow_partial(scan, rows):
    """Whether to stop reading after `rows` rows (the budgets), marking the scan partial."""
    facts = scan.facts
    if scan.max_rows and rows >= scan.max_rows:
        facts["partial"] = True
        facts["partial_reason"] = "stopped at the row budget of %d rows%s" % (scan.max_rows, scan._of_estimate())
        return True
    if time.time() > scan.deadline:
        facts["partial"] = True
        facts["partial_reason"] = "stopped at the time budget after %d rows%s" % (rows, scan._of_estimate())
        return True
    return False


def _ds_arrow_jsonl(scan, source, prepare):
    """The JSON Lines file as one table, read in blocks of whole lines, and row -> line. The
    next block is read and parsed on a second thread (Arrow lets go of the GIL) while this
    one is prepared."""
    from concurrent.futures import ThreadPoolExecutor

    stream = source["opener"]()
    blocks = _ds_jsonl_blocks(stream, source["estimated_bytes"])
    tables = []
    # Where lines and rows part ways (blank lines): (first row, its line) from there on.
    steps = [(0, 1)]
    rows = lines = 0
    try:
        current = _ds_arrow_parsed(blocks, None)
        with ThreadPoolExecutor(1) as pool:
            while current is not None:
                chunk, (buffer, start, end), table = current
                upcoming = pool.submit(_ds_arrow_parsed, blocks, table.schema)
                # Checked here, not before parsing: the parsing thread has the longer way.
                if _ds_bytes_hold(chunk, _DS_TWO_OBJECTS):
                    raise _DsNoParity("a line may hold more than one JSON value")
                chunk_lines = buffer.count(b"\n", start, end) + (end > start and buffer[end - 1] != 10)
                if table.num_rows != chunk_lines:
                    blank = [
                        i for i, text in enumerate(bytes(chunk).split(b"\n")[:chunk_lines]) if not text.strip(b" \t\r")
                    ]
                    if table.num_rows != chunk_lines - len(blank):
                        raise _DsNoParity("a JSON object spans several lines")
                    for n, i in enumerate(blank):
                        steps.append((rows + i - n, lines + i + 2))
                tables.append(prepare(table))
                rows += table.num_rows
                lines += chunk_lines
                current = chunk = table = None
                if _ds_arrow_partial(scan, rows):
                    break
                current = upcoming.result()
    finally:
        stream.close()
    if not tables:
        raise _DsNoParity("the file holds no rows")
    return _ds_arrow_concat(scan, tables), _ds_jsonl_lines_of(steps)


def _ds_jsonl_blocks(stream, estimated_bytes):
    """(whole lines, (buffer, start, end)) up to _DS_ARROW_READ bytes at a time, free of the
    lines Arrow must not see. The lines are a memoryview of buffer[start:end], one of two
    buffers used in turn, so no block costs fresh memory: it stays valid until the next but
    one is read. A line longer than a buffer goes to the stdlib path."""
    size = min(_DS_ARROW_READ, max(estimated_bytes, 1 << 16) * 2)  # gzip's estimate can fall short
    buffers = [bytearray(size), bytearray(size)]
    carry = b""  # the start of the line the last buffer cut off
    first = True
    while True:
        buffer = buffers[0]
        buffers.reverse()
        view = memoryview(buffer)
        view[: len(carry)] = carry
        filled = len(carry)
        while filled < size:
            got = stream.readinto(view[filled:])
            if not got:
                break
            filled += got
        if not filled:
            return
        end = filled if filled < size else buffer.rfind(b"\n") + 1
        if not end:
            raise _DsNoParity("a line is longer than pyarrow's read buffer (%d bytes)" % size)
        carry = buffer[end:filled]
        start = 3 if first and buffer.startswith(codecs.BOM_UTF8) else 0
        first = False
        chunk = view[start:end]
        if _DS_LINE_HAZARD.match(chunk) or _ds_bytes_hold(chunk, _DS_LATER_LINE_HAZARD):
            raise _DsNoParity("a line is null or starts with a byte order mark")
        yield chunk, (buffer, start, end)


def _ds_bytes_hold(data, pattern):
    """Whether the RE2 `pattern` matches somewhere in the bytes-like `data`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = pa.py_buffer(array("q", [0, len(data)]))
    value = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])
    return pc.match_substring_regex(value, pattern)[0].as_py()


def _ds_arrow_parsed(blocks, schema):
    """The next block: (lines, where, table) (see _ds_jsonl_blocks), None after the last. The first block sets the
    schema of the rest; columns Arrow took for timestamps are read again as the strings they are."""
    import pyarrow as pa
    import pyarrow.json as pj

    block = next(blocks, None)
    if block is None:
        return None
    chunk, where = block
    if schema is None:
        table = _ds_arrow_read_json(chunk)
        # Columns in the order of the first row's keys, as the stdlib path lists them (Arrow's
        # order depends on which of its blocks is done first). Every row has every key, else
        # there are nulls and the stdlib path counts the file.
        first = _DS_FIRST_ROW.search(chunk)
        try:  # its first value: a line holding two is found out (and said so) later
            text = first.group().decode("utf-8", "surrogateescape").lstrip()
            keys = list(json.JSONDecoder().raw_decode(text)[0].keys())
        except (AttributeError, ValueError, TypeError):  # none, not JSON, not an object
            raise _DsNoParity("the first row is not a JSON object")
        if sorted(keys) != sorted(table.column_names):
            raise _DsNoParity("rows have different keys")
        table = table.select(keys)
        strings = [
            field.name
            for field in table.schema
            if pa.types.is_timestamp(field.type) or pa.types.is_date(field.type) or pa.types.is_time(field.type)
        ]
        if not strings:
            return chunk, where, table
        schema = pa.schema([pa.field(f.name, pa.string() if f.name in strings else f.type) for f in table.schema])
    return (
        chunk,
        where,
        _ds_arrow_read_json(
            chunk, parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
        ),
    )


def _ds_arrow_read_json(chunk, **options):
    """Arrow's table of the lines in `chunk`, in blocks of _DS_ARROW_PARSE_BLOCK, or of
    _DS_ARROW_BLOCK where that fails, as a line longer than a small block does."""
    import pyarrow as pa
    import pyarrow.json as pj

    data = pa.py_buffer(chunk)
    try:
        return pj.read_json(data, read_options=pj.ReadOptions(block_size=_DS_ARROW_PARSE_BLOCK), **options)
    except pa.ArrowInvalid:
        return pj.read_json(data, read_options=pj.ReadOptions(block_size=_DS_ARROW_BLOCK), **options)


def _ds_jsonl_lines_of(steps):
    """rows -> {row index: line}, from the (first row, its line) points where the two part ways."""
    from bisect import bisect_right

    firsts = [row for row, _ in steps]

    def lines_of(rows):
        found = {}
        for row in rows:
            first, line = steps[bisect_right(firsts, row) - 1]
            found[row] = line + row - first
        return found

    return lines_of


def _ds_arrow_concat(scan, tables):
    import pyarrow as pa

    table = pa.concat_tables(tables)
    if scan.max_rows and table.num_rows > scan.max_rows:
        table = table.slice(0, scan.max_rows)
    return table


def _ds_arrow_csv(scan, source, prepare):
    """The CSV/TSV file as one table of strings, and row -> line."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    text = source["sample"].decode("utf-8", "replace")
    header = next(
        (row for row in csv.reader(io.StringIO(text, newline=""), delimiter=source["delimiter"], strict=False) if row),
        [],
    )
    if not header or len(set(header)) != len(header) or len({c.strip() for c in header}) != len(header):
        raise _DsNoParity("the header has no cells or repeats a name")

    def tables_of(block_size):
        stream = pa.input_stream(source["full"], compression="gzip" if scan.facts["compression"] else None)
        try:
            reader = pcsv.open_csv(
                stream,
                read_options=pcsv.ReadOptions(block_size=block_size),
                parse_options=pcsv.ParseOptions(
                    delimiter=source["delimiter"],
                    quote_char='"',
                    double_quote=True,
                    escape_char=False,
                    newlines_in_values=True,
                    ignore_empty_lines=True,
                ),
                convert_options=pcsv.ConvertOptions(
                    column_types={name: pa.string() for name in header}, strings_can_be_null=False
                ),
            )
            if reader.schema.names != header:
                raise _DsNoParity("pyarrow reads the header differently")
            names = [name.strip() for name in header]
            tables = []
            rows = 0
            for batch in reader:
                tables.append(prepare(pa.Table.from_batches([batch]).rename_columns(names)))
                rows += batch.num_rows
                if _ds_arrow_partial(scan, rows):
                    break
            return tables
        finally:
            stream.close()

    # Small blocks as for JSON Lines (a third less CPU); a record longer than one is read again
    # from the start in larger ones.
    try:
        tables = tables_of(_DS_ARROW_PARSE_BLOCK)
    except pa.ArrowInvalid as exc:
        if "straddl" not in str(exc):
            raise
        tables = tables_of(_DS_ARROW_BLOCK)
    if not tables:
        raise _DsNoParity("the file holds no rows")
    table = _ds_arrow_concat(scan, tables)
    return table, _ds_csv_lines_of(scan, source, table.num_rows)


def _ds_csv_lines_of(scan, source, rows):
    """rows -> {row index: line} for CSV rows, worked out when asked (conflict examples): row + 2
    when the whole file was read and its line breaks say every record is one line after a
    one-line header, else by counting records with the csv module, as the stdlib path does."""

    def one_line_records():
        if scan.facts["partial"]:
            return False
        breaks = 0
        last = b""
        stream = source["opener"]()
        try:
            while True:
                data = stream.read(_DS_CHUNK)
                if not data:
                    break
                breaks += data.count(b"\n")
                if b"\r" in data or last == b"\r":  # newline="" reading also ends lines at a lone \r
                    breaks += data.count(b"\r") - data.count(b"\r\n") - (last == b"\r" and data[:1] == b"\n")
                last = data[-1:]
        finally:
            stream.close()
        return breaks + (bool(last) and last not in b"\r\n") == rows + 1

    def lines_of(wanted):
        if one_line_records():
            return {row: row + 2 for row in wanted}
        wanted = set(wanted)
        last = max(wanted) if wanted else -1
        found = {}
        stream = source["opener"]()
        try:
            reader = csv.reader(
                scan.text_reader(stream), delimiter=source["delimiter"], quotechar='"', doublequote=True, strict=False
            )
            index = -1  # the header
            prev = 0
            for record in reader:
                start = prev + 1
                prev = reader.line_num
                if record:
                    if index in wanted:
                        found[index] = start
                    index += 1
                    if index > last:
                        break
        finally:
            stream.close()
        return found

    return lines_of


def _ds_arrow_parquet(scan, source, prepare):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    rows = 0
    for batch in pq.ParquetFile(source["full"]).iter_batches(batch_size=65536):
        tables.append(prepare(pa.Table.from_batches([batch])))
        rows += batch.num_rows
        if _ds_arrow_partial(scan, rows):
            break
    if not tables:
        raise _DsNoParity("the file holds no rows")
    return _ds_arrow_concat(scan, tables), lambda wanted: {row: row + 1 for row in wanted}


def _ds_arrow_preparer(scan, nulls_are_values):
    """A function that turns each block of rows read into what _ds_arrow_count needs: a key
    column per column ("#0", "#1", ...: strings as their 64-bit hash(), the fingerprint the
    stdlib path uses too, other values as they are) and the input and label values and keys
    ("input", "input#", "label"), strings stripped as str.strip() strips them.

    Hashing strings in Python, a block at a time, is cheaper than Arrow's hash tables of
    strings and keeps no second copy of them; a column that repeats its values (labels,
    sources) is dictionary-encoded first, so each distinct value is stripped and hashed once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    whitespace = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
    chosen = []
    repeats = {}  # column name -> whether its values repeat (decided on the first block)

    def fingerprints(column):
        values = column.to_pylist()
        if column.null_count:
            return pa.array([None if value is None else hash(value) for value in values], type=pa.int64())
        hashes = array("q", map(hash, values))
        if not hashes:  # an empty array's buffer need not be aligned, and Acero warns about it
            return pa.array([], pa.int64())
        return pa.Array.from_buffers(pa.int64(), len(hashes), [None, pa.py_buffer(hashes)])

    def prepare(table):
        names = table.column_names
        if not chosen:
            if not names or len(set(names)) != len(names):
                raise _DsNoParity("no columns, or a column name twice")
            chosen.extend(scan.choose_columns(names))
        columns = {}
        for index, (name, column) in enumerate(zip(names, table.columns)):
            kind = column.type
            if not nulls_are_values and column.null_count:
                raise _DsNoParity("column %r has null values (pyarrow cannot tell them from absent keys)" % name[:120])
            if pa.types.is_string(kind) or pa.types.is_large_string(kind):
                if name not in repeats:
                    sample = column.slice(0, 1000)
                    repeats[name] = len(pc.unique(sample)) * 2 < len(sample)
                if repeats[name]:  # one dictionary for the block: a few calls, not a few per Arrow chunk
                    encoded = pc.dictionary_encode(column.combine_chunks())
                    words = pc.utf8_trim(encoded.dictionary, characters=whitespace)
                    key = pc.take(fingerprints(words), encoded.indices)
                    column = pc.take(words, encoded.indices) if name in chosen else None
                else:  # chunk by chunk as read: combining them would copy every string
                    column = pa.chunked_array(
                        [pc.utf8_trim(chunk, characters=whitespace) for chunk in column.chunks], type=kind
                    )
                    key = pa.chunked_array([fingerprints(chunk) for chunk in column.chunks], type=pa.int64())
            elif pa.types.is_integer(kind) or pa.types.is_boolean(kind):
                key = column
            else:
                raise _DsNoParity("column %r holds %s values" % (name[:120], kind))
            columns["#%d" % index] = key
            for role, wanted in zip(("input", "label"), chosen):
                if name == wanted:
                    columns[role] = column
                    columns[role + "#"] = key
        return pa.table(columns)

    return prepare


def _ds_arrow_count(scan, read, source, prepare):
    """Fill scan as the stdlib path would from the rows `read` gives, in order."""
    import importlib
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        # The groupings' module takes 0.2 s to import (pandas with it, where installed): it is
        # loaded while the first block is read. A failure stays in the future; the grouping
        # imports it again and says why.
        pool.submit(importlib.import_module, "pyarrow.acero")
        table, lines_of = read(scan, source, prepare)
        if not table.num_rows:
            raise _DsNoParity("no rows")
        _ds_arrow_groups(scan, table, lines_of, pool)


def _ds_arrow_groups(scan, table, lines_of, pool):
    """_ds_arrow_count's counting of the rows read: the grouping of whole rows runs in `pool`
    while inputs and labels are counted here (Arrow lets go of the GIL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = table.num_rows
    facts = scan.facts
    icol, lcol = facts["input_column"], facts["label_column"]
    keys = [name for name in table.column_names if name.startswith("#")]
    distinct_rows = pool.submit(lambda: _ds_arrow_grouped(table, keys, []).num_rows)

    def present(role):
        column = table.column(role)
        mask = pc.is_valid(column)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            mask = pc.and_(mask, pc.fill_null(pc.not_equal(column, ""), False))
        return mask.combine_chunks()

    def frozen(values):
        return [value if value.__class__ is str else _DS_TAG + repr(value) for value in values]

    inputs = present("input") if "input" in table.column_names else None
    labels = present("label") if "label" in table.column_names else None
    label_values = []
    if labels is not None:
        counted = pc.value_counts(table.column("label").filter(labels))
        if len(counted) > _DS_LABELS_TRACKED:
            raise _DsNoParity("more than %d distinct labels" % _DS_LABELS_TRACKED)
        label_values = list(zip(frozen(counted.field("values").to_pylist()), counted.field("counts").to_pylist()))
    distinct_inputs = present_inputs = conflicting = 0
    examples = {}
    if inputs is not None:
        input_keys = table.column("input#").combine_chunks()
        present_inputs = pc.sum(inputs).as_py() or 0
        # One grouping by input: the groups are the distinct inputs, and an input conflicts
        # when the smallest and largest of its label ids differ (rows without a label: null).
        keyed = {"i": input_keys}
        if labels is not None:
            encoded = pc.dictionary_encode(table.column("label")).combine_chunks()  # exact, like label ids
            label_keys = encoded.indices
            keyed["l"] = pc.if_else(labels, label_keys, pa.scalar(None, label_keys.type))
        groups = _ds_arrow_grouped(
            pa.table(keyed).filter(inputs), "i", [("l", "min_max")] if labels is not None else []
        )
        distinct_inputs = groups.num_rows
        if labels is not None:
            bounds = groups.column("l_min_max").combine_chunks()
            several = groups.column("i").filter(pc.not_equal(bounds.field("min"), bounds.field("max")))
            conflicting = len(several)
            both = pc.and_(inputs, labels)
            if conflicting:
                chosen = pc.indices_nonzero(pc.and_(both, pc.fill_null(pc.is_in(input_keys, value_set=several), False)))
                column = table.column("input")
                examples = _ds_arrow_examples(
                    chosen.to_pylist(),
                    input_keys.take(chosen).to_pylist(),
                    label_keys.take(chosen).to_pylist(),
                    lambda row: frozen([column[row].as_py()])[0],
                    frozen(encoded.dictionary.to_pylist()),
                    lines_of,
                )
    # Commit: the state the row-by-row path leaves for finish().
    facts["rows"] = rows
    facts["duplicate_rows"] = rows - distinct_rows.result()
    facts["duplicate_inputs"] = present_inputs - distinct_inputs
    facts["conflicting_inputs"] = conflicting
    if icol is not None:
        facts["missing_inputs"] = rows - present_inputs
    if lcol is not None:
        facts["missing_labels"] = rows - sum(count for _, count in label_values)
    facts["absent_columns"] = [
        name for name, found in ((icol, inputs), (lcol, labels)) if name is not None and found is None
    ]
    scan.label_names = [None] + [value for value, _ in label_values]
    scan.label_counts = [0] + [count for _, count in label_values]
    scan.used = distinct_inputs
    scan.examples = examples
    facts["engine"] = "pyarrow"


def _ds_arrow_grouped(table, keys, aggregations):
    """table.group_by(keys).aggregate(aggregations) on one thread: Arrow's threads would only
    share the cores with the rest of the scan, for a third more CPU and no less time."""
    try:
        grouping = table.group_by(keys, use_threads=False)
    except TypeError:  # pyarrow < 13 has no use_threads (and groups on one thread)
        grouping = table.group_by(keys)
    return grouping.aggregate(aggregations)


def _ds_arrow_examples(rows, inputs, labels, input_of, label_names, lines_of):
    """The first _DS_EXAMPLES conflicting inputs in the order the stdlib path finds them (the
    row bringing an input's second label), with its labels and lines as that path lists them.
    `rows` are the labelled rows of conflicting inputs, `inputs` their input keys and `labels`
    their label ids; input_of(row) is a row's input, label_names[id] a label (values are
    fetched for the examples only: a take over all the rows would copy the column)."""
    state = {}
    examples = {}
    for row, key, lid in zip(rows, inputs, labels):
        seen = state.get(key)
        if seen is None:
            state[key] = [lid, row, False]
            continue
        if not seen[2]:
            if lid == seen[0]:
                continue
            seen[2] = True
            if len(examples) < _DS_EXAMPLES:
                examples[key] = {
                    "input": _ds_show(input_of(row), _DS_EXAMPLE_CHARS),
                    "labels": [_ds_show(label_names[seen[0]], _DS_EXAMPLE_CHARS)],
                    "lines": [seen[1]],
                }
        example = examples.get(key)
        if example is not None:
            name = _ds_show(label_names[lid], _DS_EXAMPLE_CHARS)
            if name not in example["labels"]:
                example["labels"].append(name)
            if len(example["lines"]) < _DS_EXAMPLE_LINES:
                example["lines"].append(row)
    lines = lines_of([row for example in examples.values() for row in example["lines"]])
    for example in examples.values():
        example["lines"] = [lines[row] for row in example["lines"]]
    return examples


# -- detection and the entry points


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
