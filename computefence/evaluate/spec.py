"""What each check in the registry declares about itself: what it verifies, and what a
blocker from it calls for. An area module lists its checks as

    CHECKS = {"gpu.ecc": CheckSpec("no uncorrectable memory errors ...", Remedy.REPLACE)}

`remedy` has no default, so a row without one does not import.
"""

from __future__ import annotations

from dataclasses import dataclass

from computefence.models import Remedy

__all__ = ["CheckSpec", "Remedy"]


@dataclass(frozen=True)
class CheckSpec:
    # What the check verifies, for listings and --only/--skip errors.
    description: str
    # fix: a command on the pod; config: the user's own setting (inventory, pod template, data);
    # replace: the machine itself is at fault, and only another one helps.
    remedy: Remedy

    def __post_init__(self) -> None:
        if not isinstance(self.remedy, Remedy):
            raise TypeError(f"CheckSpec.remedy must be a Remedy, not {self.remedy!r}")
        if not self.description.strip():
            raise ValueError("CheckSpec.description is empty")
