"""The CUDA error behind torch's "CUDA initialization" failure, read from what torch says.

torch (c10/cuda/CUDAFunctions.cpp) words some errors itself and prints the rest as
"Error <code>: <cudaGetErrorString>"; a missing device (100) it reports as no devices at
all, and `torch.cuda.init()` then raises "No CUDA GPUs are available".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NOT_INITIALIZED = 802  # cudaErrorSystemNotReady: NVSwitch fabric not initialised
UNKNOWN = 999  # cudaErrorUnknown
NO_DEVICE = 100  # cudaErrorNoDevice
INSUFFICIENT_DRIVER = 35  # cudaErrorInsufficientDriver
COMPAT_NOT_SUPPORTED = 804  # cudaErrorCompatNotSupportedOnDevice
INITIALIZATION = 3  # cudaErrorInitializationError

# torch's own wordings of the errors it does not print by number.
_WORDED = (
    ("CUDA unknown error", UNKNOWN),
    ("NVIDIA driver on your system is too old", INSUFFICIENT_DRIVER),
    ("No CUDA GPUs are available", NO_DEVICE),
    ("no CUDA-capable device is detected", NO_DEVICE),
    ("CUDA driver initialization failed", INITIALIZATION),
)
_NUMBERED = re.compile(r"\bError (\d{1,4}): ")
# The tail torch adds to every warning; it says where in torch, not what went wrong.
_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?\s*$")


@dataclass(frozen=True)
class CudaError:
    code: int | None
    # torch's message, whole, on one line, without the "(Triggered internally at ...)" tail.
    text: str


def read_cuda_error(message: str | None) -> CudaError | None:
    if not message:
        return None
    text = _TRIGGERED.sub("", " ".join(message.split()))
    numbered = _NUMBERED.search(text)
    if numbered:
        return CudaError(int(numbered.group(1)), text)
    for words, code in _WORDED:
        if words.lower() in text.lower():
            return CudaError(code, text)
    return CudaError(None, text)
