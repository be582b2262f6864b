"""Rich renderables to text: colored for a terminal, plain (no padding) for files and pipes.
Words are never split across lines (render/columns.Hanging)."""

from __future__ import annotations

import io

from rich.console import Console, RenderableType
from rich.text import Text

from computefence.render.columns import Hanging


def console_text(renderables: list[RenderableType], *, color: bool, width: int) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        width=width,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )
    for renderable in renderables:
        if isinstance(renderable, Text) and renderable.no_wrap:
            # An API call, a command: out unfolded, the terminal wraps it softly.
            console.print(renderable, soft_wrap=True)
            continue
        if isinstance(renderable, Text):
            renderable = Hanging(Text(), renderable, indent=0)
        # Uncropped: a word longer than the line (a path, a host) goes out whole.
        console.print(renderable, crop=False)
    text = buffer.getvalue()
    # Cells are padded to the width; plain output should not carry that.
    return text if color else "\n".join(line.rstrip() for line in text.split("\n"))
