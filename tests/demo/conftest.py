import shutil
import tempfile

import pytest

from computefence.evaluate.checks.storage import BLOCK_FREE_BYTES, WARN_FREE_BYTES


def _disk_headroom() -> str:
    """What storage.disk-headroom says about a demo pod here: its disks are this machine's."""
    data = shutil.disk_usage(tempfile.gettempdir()).free
    system = shutil.disk_usage("/").free
    if min(data, system) < BLOCK_FREE_BYTES:
        return "block"
    return "warn" if data < WARN_FREE_BYTES else "pass"


@pytest.fixture
def expected_blockers() -> dict[str, set[str]]:
    """What each simulated fault of the demo fleet must look like: blocker check ids per pod."""
    blockers = {
        "pod-healthy": set(),
        "pod-cpu-torch": {"gpu.torch-cpu-build"},
        "pod-driver-broken": {"gpu.driver"},
        "pod-ephemeral-ckpt": {"storage.output-dir", "accelerate.num-processes"},
        "pod-old-driver": {"gpu.driver-too-old"},
    }
    if _disk_headroom() == "block":
        for checks in blockers.values():
            checks.add("storage.disk-headroom")
    return blockers


@pytest.fixture
def healthy_pod_warnings() -> set[str]:
    return {"storage.disk-headroom"} if _disk_headroom() == "warn" else set()
