"""Fix steps that edit a file on the pod write only the file they name.

A symbolic link at the path is refused: the step fails with one line starting with REFUSED,
which fleet fix reports as the step's reason, and nothing is written through it. Edits in place
use `sed -i`, which writes a fresh temporary file in the same folder (created exclusively, never
following a link), keeps the file's mode and owner, and renames it over the path. A file that
gets new content (a line put first) is written the same way: a fresh `mktemp` name beside it,
its mode, then `mv`. No command holds `exit`: each is safe to paste into a shell.
"""

from __future__ import annotations

REFUSED = "computefence: refused: "


def refuse_link(path: str) -> str:
    """Shell that fails, saying so, when `path` (a shell word: quoted, or "$f") is a symbolic link."""
    return (
        f'{{ [ ! -L {path} ] || {{ echo "{REFUSED}"{path}" is a symbolic link: not written through" >&2; false; }}; }}'
    )


def prepend_line(line_var: str, path_var: str) -> str:
    """Shell that rewrites the file named by "$path_var" with "$line_var" as its first line,
    through a fresh temporary file beside it; fails (REFUSED) on a symbolic link."""
    f, t = f'"${path_var}"', '"$t"'
    return (
        f'{refuse_link(f)} && t=$(mktemp {f[:-1]}.XXXXXX") && '
        f"{{ {{ printf '%s\\n' \"${line_var}\"; if [ -e {f} ]; then cat {f}; fi; }} > {t} && "
        f'chmod "$(stat -c %a {f} 2>/dev/null || echo 644)" {t} && mv -f {t} {f} || {{ rm -f {t}; false; }}; }}'
    )
