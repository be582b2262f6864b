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
from computefence.evaluate.file_edits import prepend_line, refuse_link
from computefence.models import Facts, FixStep

# What pam_env reads unquoted: no whitespace, quotes, backslashes or `$`/`@` expansions.
_PAM_PLAIN = re.compile(r"^[A-Za-z0-9_./:,+=-]+$")


def persist_env(var: str, value: str, facts: Facts) -> FixStep:
    if facts.environment.ssh_pam_env and _PAM_PLAIN.match(value):
        return FixStep.safe(_etc_environment(var, value, sudo(facts)))
    return FixStep.safe(bashrc_top_line(f"export {var}={q(value)}"))


def _etc_environment(var: str, value: str, root: str) -> str:
    # Drop every line for the variable, then append one: a second run deletes and writes the same last line.
    line = q(f"{var}={value}")
    return (
        f"{refuse_link('/etc/environment')} && "
        f"{root}touch /etc/environment && {root}sed -i '/^[[:space:]]*{var}=/d' /etc/environment && "
        f"printf '%s\\n' {line} | {root}tee -a /etc/environment >/dev/null"
    )


def bashrc_top_line(line: str) -> str:
    """Put `line` first in ~/.bashrc unless it already comes before the file's first `return`."""
    # The line travels in the environment (awk -v would read backslashes as escapes).
    return (
        f"L={q(line)}; f=~/.bashrc; "
        'if ! L="$L" awk \'$0 == ENVIRON["L"] { found = 1; exit } /^[^#]*return/ { exit } END { exit !found }\' '
        '"$f" 2>/dev/null; then ' + prepend_line("L", "f") + "; fi"
    )
