"""GPU-less stand-ins for tests and the demo fleet: fake `nvidia-smi` and `torch` (see
fakes.py), the simulated pods (fleet.py), and their recording for the replay connector."""

from pathlib import Path

# The demo fleet as recorded by bench/record_demo.py, served back by `fleet check --replay`.
DEMO_RECORDING = Path(__file__).parent / "recordings" / "fleet"
