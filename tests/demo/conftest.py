import pytest


@pytest.fixture
def expected_blockers() -> dict[str, set[str]]:
    """What each simulated fault of the demo fleet must look like: blocker check ids per pod."""
    return {
        "pod-healthy": set(),
        "pod-cpu-torch": {"gpu.torch-cpu-build"},
        "pod-driver-broken": {"gpu.driver"},
        "pod-ephemeral-ckpt": {"storage.output-dir", "accelerate.num-processes"},
        "pod-old-driver": {"gpu.driver-too-old"},
    }
