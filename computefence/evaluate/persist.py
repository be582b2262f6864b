"""Fix steps that set an environment variable where the next SSH session of the same user reads
it, written so that applying one twice leaves the file byte-identical.

sshd runs pam_env (when UsePAM is on and /etc/pam.d/sshd loads pam_env.so), which reads
/etc/environment for every session. Without it, the only file a non-interactive SSH command
reads is ~/.bashrc (bash sources it for sshd), and Ubuntu's ~/.bashrc returns early for
non-interactive shells: the line must go above that return.
"""

from __future__ import annotations

import re

from computefence.evaluate.context import q, sudo
from computefence.evaluate.file_edits import prepend_line, replace_file
from computefence.models import Facts, FixStep

# What pam_env reads unquoted: no whitespace, quotes, backslashes or `$`/`@` expansions.
_PAM_PLAIN = re.compile(r"^[A-Za-z0-9_./:,+=-]+$")


def persist_env(var: str, value: str, facts: Facts) -> FixStep:
    if facts.environment.ssh_pam_env and _PAM_PLAIN.match(value):
        return FixStep.safe(_etc_environment(var, value, sudo(facts)))
    return FixStep.safe(bashrc_top_line(f"export {var}={q(value)}"))


def _etc_environment(var: str, value: str, root: str) -> str:
    # Every line for the variable dropped, one written last: a second run writes the same bytes.
    # awk ends each line it prints, so a last line without its newline is never joined to ours.
    # The value is pam_env-plain (no backslash), so awk -v takes it as it is.
    keep = f"!/^[[:space:]]*{var}=/ {{ print > t }} END {{ print line > t }}"
    write = (
        '{ s=/etc/environment; [ -e "$s" ] || s=/dev/null; '
        f'{root}awk -v t="$t" -v line={q(f"{var}={value}")} {q(keep)} "$s"; }}'
    )
    return replace_file("/etc/environment", write, root)


def bashrc_top_line(line: str) -> str:
    """Put `line` first in ~/.bashrc unless it already comes before the file's first `return`."""
    # The line travels in the environment (awk -v would read backslashes as escapes).
    return (
        f"L={q(line)}; f=~/.bashrc; "
        'if ! L="$L" awk \'$0 == ENVIRON["L"] { found = 1; exit } /^[^#]*return/ { exit } END { exit !found }\' '
        '"$f" 2>/dev/null; then ' + prepend_line("L", "f") + "; fi"
    )
