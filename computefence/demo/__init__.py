"""GPU-less stand-ins for tests and the demo fleet: fake `nvidia-smi` and `torch` (see fakes.py)."""
