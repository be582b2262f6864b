"""Fix steps that edit a file on the pod write only the file they name.

A symbolic link at the path is refused: the step fails with one line starting with REFUSED,
which fleet fix reports as the step's reason, and nothing is written through it. Edits in place
use `sed -i`, which writes a fresh temporary file in the same folder (created exclusively, never
following a link), keeps the file's mode and owner, and renames it over the path. A file that
gets new content (a line put first or last) is written the same way: a fresh `mktemp` name
beside it, its mode, then `mv`; nothing is appended in place with `>>` or `tee -a`. No
command holds `exit`: each is safe to paste into a shell.
"""

from __future__ import annotations

REFUSED = "computefence: refused: "


def refuse_link(path: str) -> str:
    """Shell that fails, saying so, when `path` (a shell word: quoted, or "$f") is a symbolic link."""
    return (
        f'{{ [ ! -L {path} ] || {{ echo "{REFUSED}"{path}" is a symbolic link: not written through" >&2; false; }}; }}'
    )


def replace_file(path: str, write: str, root: str = "") -> str:
    """Shell that runs `write` (shell that fills "$t", failing if it cannot) on a fresh `mktemp`
    name beside `path`, gives it the file's mode (644 for a new one) and moves it over `path`
    (a shell word); fails (REFUSED) on a symbolic link and leaves no temporary file behind.
    `root` ("sudo " or "") prefixes what writes in the file's folder."""
    return (
        f"{refuse_link(path)} && t=$({root}mktemp {path}.XXXXXX) && "
        f'{{ {write} && {root}chmod "$(stat -c %a {path} 2>/dev/null || echo 644)" "$t" && '
        f'{root}mv -f "$t" {path} || {{ {root}rm -f "$t"; false; }}; }}'
    )


def prepend_line(line_var: str, path_var: str) -> str:
    """Shell that rewrites the file named by "$path_var" with "$line_var" as its first line,
    through a fresh temporary file beside it; fails (REFUSED) on a symbolic link."""
    f = f'"${path_var}"'
    return replace_file(f, f'{{ printf \'%s\\n\' "${line_var}"; if [ -e {f} ]; then cat {f}; fi; }} > "$t"')
