"""Fix steps that rewrite a file on the pod, writing only the file they name.

A file is never written through: a symbolic link at the path is refused (the step fails,
saying so), the new content goes to a fresh `mktemp` name in the same folder (created
exclusively, so nothing planted at a guessable name is followed), takes the old file's mode
and owner, and replaces the path with one rename. A step stopped halfway leaves the old file
whole. The refusal is one line starting with REFUSED, which fleet fix reports as the step's
reason.
"""

from __future__ import annotations

from computefence.evaluate.context import q

REFUSED = "computefence: refused: "

# "$f" is the file (./ before a leading dash: never an option); the positional parameters
# after it are the producer's.
_SCRIPT = (
    'f=$1; shift; case $f in -*) f=./$f;; esac; if [ -L "$f" ]; then echo "'
    + REFUSED
    + "$f is a symbolic link: not written through; "
    'edit the file it points to yourself" >&2; exit 3; fi; '
    'if [ -d "$f" ]; then echo "' + REFUSED + '$f is a directory" >&2; exit 3; fi; '
    't=$(mktemp "$f.XXXXXX") || exit 1; '
    'if {{ {produce}; }} > "$t" && '
    'if [ -e "$f" ]; then chmod "$(stat -c %a "$f")" "$t" && chown "$(stat -c %u:%g "$f")" "$t"; '
    'else chmod 644 "$t"; fi && mv -f "$t" "$f"; then :; else rm -f "$t"; exit 1; fi'
)


def replace_file(path: str, produce: str, root: str = "", args: tuple[str, ...] = ()) -> str:
    """A command that replaces the file at `path` (a shell word: quoted, or starting with ~/)
    with what the shell code `produce` prints; `produce` reads the old file as "$f" (it may not
    exist) and `args` (shell words) as "$1"... `root` is "sudo " or nothing."""
    script = _SCRIPT.format(produce=produce)
    return f"{root}sh -c {q(script)} sh {path}" + "".join(f" {arg}" for arg in args)
