from __future__ import annotations

import pytest
from probe_pod import Pod


@pytest.fixture
def pod(tmp_path) -> Pod:
    return Pod(tmp_path / "pod")
