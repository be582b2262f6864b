"""What makes a finding the same finding in two runs of the same pod: its check and its
subject as the pod knows it, never where the pod's files happen to be this time.

A subject is often a path (the output dir, the HF cache, an accelerate config). A pod that
keeps its files under a folder made fresh for each run (the demo's /tmp/cf-demo-XXXX/POD,
a per-job home) reports the same problem under a new path every time. The evaluator
declares each finding's `key`: a path subject named from the pod's own places instead
(`<output_dir>`, `~/.cache/huggingface/accelerate/default_config.yaml`), any other subject
as it is. Runs, `report diff` and change alerts compare findings by (check, key).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from computefence.models import Facts, Finding, HostReport

# The probe's path roles that name one place each on a pod (extra paths and volumes can be
# several). "root", "tmp" and "shm" are the same paths on every pod.
_PLACE_ROLES = ("home", "hf_cache", "output_dir", "workspace")


def _places(facts: Facts) -> list[tuple[str, str]]:
    """(path, name) of the pod's own places, longest path first."""
    places: dict[str, str] = {}
    roles = [p.role for p in facts.storage.paths]
    for path in facts.storage.paths:
        if path.role in _PLACE_ROLES and roles.count(path.role) == 1:
            places.setdefault(posixpath.normpath(path.path), f"<{path.role}>")
    # The user's home is "~" (the name a shell gives it), and wins over a path role it equals.
    for where, name in ((facts.identity.cwd, "<cwd>"), (facts.identity.home, "~")):
        if where and where.startswith("/"):
            places[posixpath.normpath(where)] = name
    return sorted(((p, n) for p, n in places.items() if p != "/"), key=lambda pn: -len(pn[0]))


def stable_subject(facts: Facts | None, subject: str | None) -> str | None:
    """`subject` with a path under one of the pod's places named from that place."""
    return subject_keys(facts)(subject)


def subject_keys(facts: Facts | None) -> Callable[[str | None], str | None]:
    """stable_subject of one pod's facts, its places found once for all its findings."""
    places: list[tuple[str, str]] | None = None

    def key(subject: str | None) -> str | None:
        nonlocal places
        if facts is None or not subject or not subject.startswith("/"):
            return subject
        if places is None:
            places = _places(facts)
        path = posixpath.normpath(subject)
        for place, name in places:
            if path == place:
                return name
            if path.startswith(place + "/"):
                return f"{name}/{path[len(place) + 1 :]}"
        return subject

    return key


def with_keys(facts: Facts | None, findings: list[Finding]) -> list[Finding]:
    """`findings` each with its key: the rule's own where it declared one. A finding whose key
    stays None (no subject) is not copied: 15 findings a pod, most of them keyed already."""
    key_of = subject_keys(facts)
    keyed = []
    for finding in findings:
        if finding.key is None and (key := key_of(finding.subject)) is not None:
            finding = finding.model_copy(update={"key": key})
        keyed.append(finding)
    return keyed


def finding_identity(host: HostReport, finding: Finding) -> tuple[str, str]:
    """(check, key): equal for the same finding on the same pod in two runs. A finding saved
    before keys existed gets its key from the saved facts, as the evaluator gives it now."""
    key = finding.key if finding.key is not None else stable_subject(host.facts, finding.subject)
    return finding.check, key or ""
