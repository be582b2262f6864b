# Probe part: the dataset scan's stdlib readers, row by row. Each turns a file (JSON Lines, a
# JSON array, CSV/TSV) into prepared rows for _DatasetScan.consume (dataset_counts), and says
# which lines are unreadable and why. The definitions are at the top of dataset_counts.

import codecs
import csv
import json
import re
import zlib
from operator import itemgetter

from .dataset_counts import _DS_CHUNK, _DS_COLUMNS_MAX, _DS_TAG

_DS_LINE_CAP = 64 * 1024 * 1024
_DS_BATCH_BYTES = 65536
_DS_JSON_WS = re.compile(r"[ \t\n\r]*")
_DS_BAD_CHAR = re.compile("[\udc80-\udcff]")
# Other scalars than strings enter fingerprints as tagged reprs (see _DS_TAG).
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
    # The input (slot 0) and label (slot 1) columns chosen, as (slot, column).
    columns = [(slot, col) for slot, col in enumerate((icol, lcol)) if col is not None]
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
            cells = [None, None]
            for slot, col in columns:
                try:
                    value = obj[col]
                except KeyError:
                    absent[slot] += 1
                    continue
                if value.__class__ is str:
                    cells[slot] = value.strip() or None
                elif value is not None:
                    cells[slot] = freeze(value)
            yield line, rh, cells[0], cells[1], raw


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
