# Probe part: the dataset scan's pyarrow fast path. pyarrow is imported only in the child
# process that runs it (the probe itself stays stdlib only); the definitions are at the top of
# dataset_counts.
#
# When pyarrow imports and the file fits the memory budget, JSON Lines, CSV/TSV and Parquet are
# counted on Arrow tables (group_by, unique) instead of row by row. The counts must be
# the stdlib path's, so this path runs only where it can show they are, and otherwise hands the
# whole file to the stdlib path with the reason (facts "engine_note"):
# - any row the stdlib would call unreadable: Arrow refuses it (parse errors, bad UTF-8, a
#   line or record Arrow cuts differently), and JSON Lines must give one object per non-blank
#   line (the rows must equal those lines, no line may hold "}" then "{", be null or start with
#   a byte order mark, and every row has the first row's keys, which give the column order,
#   and the types of its values: see _ds_jsonl_schema);
# - values the stdlib keeps apart and Arrow would not: null (Arrow cannot tell it from an
#   absent key) except in Parquet, double columns (1 == 1.0 there), nested values, and
#   columns of any type but string, integer or boolean (date-like JSON strings are read as
#   strings, not as the timestamps Arrow would make of them);
# - more than _DS_LABELS_TRACKED distinct labels (the stdlib then tells labels apart by a
#   24-bit fingerprint).
# Strings are stripped of exactly the characters str.strip() strips and compared by their
# hash(), as the stdlib path compares inputs; rows are compared column by column where the
# stdlib path hashes the whole row, so the two can differ only on a 64-bit fingerprint
# collision (see the top of dataset_counts).

import codecs
import csv
import io
import json
import os
import re
import time
from array import array

from .core import _CHILDREN, _CHILDREN_LOCK, _kill_group, _read_until
from .dataset_counts import (
    _DS_CHUNK,
    _DS_EXAMPLE_CHARS,
    _DS_EXAMPLE_LINES,
    _DS_EXAMPLES,
    _DS_LABELS_TRACKED,
    _DS_TAG,
    _ds_show,
)

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
        data, ended = _read_until(read_fd, time.time() + budget * 1.05 + 1 if budget < float("inf") else None)
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
                if scan.budget_spent(rows):
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
    """The next block: (lines, where, table) (see _ds_jsonl_blocks), None after the last. Every
    block is read with the schema of the file's first row (_ds_jsonl_schema)."""
    import pyarrow.json as pj

    block = next(blocks, None)
    if block is None:
        return None
    chunk, where = block
    if schema is None:
        schema = _ds_jsonl_schema(chunk)
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    return chunk, where, _ds_arrow_read_json(chunk, parse_options=options)


def _ds_jsonl_schema(chunk):
    """The schema every row must have: the first row's keys, in its order (as the stdlib path
    lists them), with the types Arrow gives its values; date-like strings stay strings.
    Without one, Arrow infers each of its blocks' types and then unifies them: a number in a
    string column becomes a string ("1" and 1 would be one label), and pyarrow 26 crashes
    (SIGSEGV) where a whole block holds another type than the blocks before, as in
    b'{"a":""}\\n{"a":[]}' or b'{"a":1}\\n{"a":true}' in blocks of 6 to 16 bytes, or a block of
    lists after one of strings in blocks of 2 MiB. With the schema given, Arrow refuses a value
    of another type (null aside: the preparer refuses those)."""
    import pyarrow as pa
    import pyarrow.json as pj

    first = _DS_FIRST_ROW.search(chunk)
    try:  # its first value: a line holding two is found out (and said so) later
        text = first.group().decode("utf-8", "surrogateescape").lstrip()
        keys = list(json.JSONDecoder().raw_decode(text)[0].keys())
    except (AttributeError, ValueError, TypeError):  # none, not JSON, not an object
        raise _DsNoParity("the first row is not a JSON object")
    inferred = pj.read_json(pa.py_buffer(first.group())).schema
    if sorted(keys) != sorted(inferred.names):
        raise _DsNoParity("rows have different keys")
    return pa.schema(
        [
            pa.field(key, pa.string())
            if pa.types.is_timestamp(kind) or pa.types.is_date(kind) or pa.types.is_time(kind)
            else pa.field(key, kind)
            for key, kind in ((key, inferred.field(key).type) for key in keys)
        ]
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
                if scan.budget_spent(rows):
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
        if scan.budget_spent(rows):
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
