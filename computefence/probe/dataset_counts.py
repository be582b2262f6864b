# Probe part: the dataset scan's counts, shared by its two ways of reading a file.
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
# row (117 MB at 2M rows, 620 MB at 10M); the row budget assumes _DS_BYTES_PER_ROW (in the
# dataset part). The pyarrow fast path, dataset_arrow, holds the file's tables instead, about
# 2.5 bytes per byte of file, and runs only where they fit a quarter of the memory available.
#
# The dataset scan is four parts, sent to a pod only when a dataset is asked for
# (probe/assemble.PART_NEEDS): this one (the scan's state and counts), dataset_rows (the
# stdlib readers, row by row), dataset_arrow (the pyarrow fast path, in a child process) and
# dataset (detection and the entry points). The laptop-side `computefence dataset` commands
# import them: one reader, one set of definitions.
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
import io
import json
import time
from array import array

_DS_CHUNK = 1024 * 1024
_DS_EXAMPLES = 5
_DS_EXAMPLE_CHARS = 120
_DS_EXAMPLE_LINES = 10
_DS_UNREADABLE_LINES = 10
_DS_LABELS_REPORTED = 50
# Beyond this many distinct labels the column is free text: names are no longer kept (label
# identity falls back to a 24-bit fingerprint, enough to notice conflicts).
_DS_LABELS_TRACKED = 10000
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


# Values are fingerprinted with hash(), which is SipHash for strings but structured for the
# rest (hash(0) == hash(""), hash(-1) == hash(-2)): other scalars enter as tagged strings.
_DS_TAG = "\x00"


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
                if self.budget_spent(facts["rows"] + n):
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

    def budget_spent(self, rows):
        """Whether to stop after `rows` rows (the row or time budget is spent), marking the scan
        partial; both ways of reading the file ask this."""
        facts = self.facts
        if self.max_rows and rows >= self.max_rows:
            facts["partial"] = True
            facts["partial_reason"] = "stopped at the row budget of %d rows%s" % (self.max_rows, self._of_estimate())
            return True
        if time.time() > self.deadline:
            facts["partial"] = True
            facts["partial_reason"] = "stopped at the time budget after %d rows%s" % (rows, self._of_estimate())
            return True
        return False

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
