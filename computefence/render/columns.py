"""Tables that fit the terminal: shorter headers, then cells wrapped between their tokens,
then a column that says the same on every row said once above the table; where no table
fits, the caller shows each row as a record (`records`). A column is never dropped silently,
and a GPU model name or a path is never split mid-word (rich folds any word longer than its
column).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

# Between two columns of a SIMPLE_HEAD table without edges: a space, the rule, a space.
GAP = 3


@dataclass(frozen=True)
class Column:
    header: str
    # The header when the full one does not fit.
    short: str | None = None
    justify: JustifyMethod = "left"
    # Where the cell may wrap: None never, ", " between list items, " " between words.
    breaks: str | None = None
    # 0: always a column; otherwise, when space is short and every row holds the same value,
    # said once above the table instead ("Provider of every pod: runpod"), lowest number first.
    drop: int = 0


def _tokens(text: str, breaks: str | None) -> list[str]:
    if breaks is None:
        return [text]
    parts = text.split(breaks)
    return [part + breaks for part in parts[:-1]] + [parts[-1]]


def wrap(text: str, width: int, breaks: str | None) -> list[str]:
    """`text` in lines of at most `width`, broken only at `breaks` (a longer token stays whole)."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for token in _tokens(paragraph, breaks):
            if line and cell_len(line) + cell_len(token.rstrip()) > width:
                lines.append(line.rstrip())
                line = token.lstrip()
            else:
                line += token
        lines.append(line.rstrip())
    return lines


def _natural(cells: Sequence[Text]) -> int:
    return max((max(cell_len(line) for line in cell.plain.split("\n")) for cell in cells), default=0)


def _least(cells: Sequence[Text], breaks: str | None) -> int:
    if breaks is None:
        return _natural(cells)
    return max(
        (
            cell_len(token.strip())
            for cell in cells
            for line in cell.plain.split("\n")
            for token in _tokens(line, breaks)
        ),
        default=0,
    )


def _widths(
    columns: list[Column], headers: list[str], cells: list[list[Text]], width: int, wrapping: bool
) -> list[int] | None:
    """Natural widths where they fit; with `wrapping`, wrappable columns narrowed (widest
    first) down to their longest token. None when that does not fit."""
    natural = [max(cell_len(h), _natural(c)) for h, c in zip(headers, cells)]
    least = [max(cell_len(h), _least(c, col.breaks)) for col, h, c in zip(columns, headers, cells)]
    widths = list(natural)
    budget = width - GAP * (len(columns) - 1)
    while sum(widths) > budget:
        shrinkable = [i for i, w in enumerate(widths) if wrapping and w > least[i]]
        if not shrinkable:
            return None
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def _layouts(columns: list[Column], rows: list[list[Text]]) -> list[tuple[bool, int, bool]]:
    """(short headers, hoist up to this level, wrap cells) from the fullest to the barest: a
    column is said above the table only when wrapping cells between their tokens does not
    make room, and only when it holds one value (one that differs from row to row never goes)."""
    levels = sorted({c.drop for i, c in enumerate(columns) if c.drop and _uniform(rows, i)})
    return [(False, 0, False)] + [(True, level, wrapping) for level in [0, *levels] for wrapping in (False, True)]


def _uniform(rows: list[list[Text]], index: int) -> bool:
    return len({row[index].plain for row in rows}) == 1


def fit_table(
    columns: list[Column], rows: list[list[Text]], width: int, *, noun: str = "row"
) -> list[Text | Table] | None:
    """The fullest layout of `rows` that fits in `width`: the table, after a line for each
    column said once ("Provider of every pod: runpod"); None when none fits (the caller then
    shows each row as a record, every column's value in it)."""
    for short, hoisted, wrapping in _layouts(columns, rows):
        keep = [i for i, c in enumerate(columns) if not (c.drop and c.drop <= hoisted and _uniform(rows, i))]
        chosen = [columns[i] for i in keep]
        headers = [(c.short or c.header) if short else c.header for c in chosen]
        cells = [[row[i] for row in rows] for i in keep]
        widths = _widths(chosen, headers, cells, width, wrapping)
        if widths is None:
            continue
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for column, header, column_width in zip(chosen, headers, widths):
            table.add_column(header, justify=column.justify, width=column_width, no_wrap=True)
        for row in rows:
            table.add_row(*(_wrapped(row[i], columns[i].breaks, w) for i, w in zip(keep, widths)))
        said = [
            Text.assemble((f"{column.header} of every {noun}: ", "dim"), rows[0][i])
            for i, column in enumerate(columns)
            if i not in keep
        ]
        return [*said, table]
    return None


def records(columns: list[Column], rows: list[list[Text]], width: int) -> list[Text | Hanging]:
    """Each row as a record for a terminal too narrow for the table: its first cell, then
    every other column as 'header: value', wrapped between them (an empty value left out)."""
    out: list[Text | Hanging] = []
    for row in rows:
        head = row[0].copy()
        head.stylize("bold")
        out.append(head)
        pairs = [f"{c.header}: {cell.plain}" for c, cell in zip(columns[1:], row[1:]) if cell.plain.strip()]
        out += [Hanging(Text("  "), Text(line)) for line in wrap(" · ".join(pairs), width - 2, " · ") if line]
    return out


def _wrapped(cell: Text, breaks: str | None, width: int) -> Text:
    if cell.cell_len <= width or breaks is None:
        return cell
    return Text("\n".join(wrap(cell.plain, width, breaks)), style=cell.style)


# Beside a label, a body narrower than this goes under it instead.
MIN_BESIDE = 20
_WORD = re.compile(r"\s*\S+\s*")


def word_lines(text: Text, width: int) -> list[Text]:
    """`text` wrapped at spaces into lines of at most `width` cells. A word is never split:
    one longer than the line (a path, a host, a URL) stands alone on its line, whole, and
    the terminal wraps it softly, so it is copied back as it was."""
    out: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        offsets = []
        column = 0
        for match in _WORD.finditer(line.plain):
            word = match.group()
            if column and column + cell_len(word.rstrip()) > width:
                offsets.append(match.start())
                column = 0
            column += cell_len(word)
        out.extend(piece.copy() for piece in line.divide(offsets))
    for piece in out:
        piece.rstrip()
    return out


class Hanging:
    """`label`, then `body` wrapped beside it with its lines under each other (a hanging
    indent of `indent` cells, the label's own width by default). Words are never split (see
    word_lines); where the label leaves less than MIN_BESIDE cells, the body goes under it,
    `under` cells in. Print it uncropped (console_text does)."""

    def __init__(self, label: Text, body: Text, *, indent: int | None = None, under: int = 8) -> None:
        self.label = label
        self.body = body
        self.indent = label.cell_len if indent is None else indent
        self.under = under

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        label, indent = self.label, self.indent
        if label.plain.strip() and width - indent < MIN_BESIDE:
            yield from _line(console, label.copy())
            label, indent = Text(), min(self.under, max(0, width - MIN_BESIDE))
        for i, line in enumerate(word_lines(self.body, max(1, width - indent))):
            head = label.copy() if i == 0 else Text()
            head.pad_right(indent - head.cell_len)
            yield from _line(console, Text.assemble(head, line))


def _line(console: Console, text: Text) -> RenderResult:
    text.rstrip()
    yield from text.render(console)
    yield Segment.line()
