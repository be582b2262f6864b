"""Rich renderables to text: colored for a terminal, plain (no padding) for files and pipes."""

from __future__ import annotations

import io

from rich.console import Console, RenderableType
from rich.text import Text


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
        # no_wrap Text (an API call, a command) goes out unfolded; the terminal wraps it softly.
        console.print(renderable, soft_wrap=isinstance(renderable, Text) and bool(renderable.no_wrap))
    text = buffer.getvalue()
    # Cells are padded to the width; plain output should not carry that.
    return text if color else "\n".join(line.rstrip() for line in text.split("\n"))
