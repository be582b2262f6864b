# Probe part, last in the assembled script: the collector table (its order is the output's)
# and the script's entry point.

from .core import main
from .environment import collect_environment
from .identity import collect_identity
from .storage import collect_storage
from .gpu import collect_gpu
from .packages import collect_packages
from .torch import collect_torch
from .perf import collect_perf
from .accelerate import collect_accelerate
from .dataset import collect_dataset
from .custom import collect_custom


COLLECTORS = [
    ("identity", collect_identity),
    ("environment", collect_environment),
    ("storage", collect_storage),
    ("gpu", collect_gpu),
    ("packages", collect_packages),
    ("torch", collect_torch),
    ("perf", collect_perf),
    ("accelerate", collect_accelerate),
    ("custom", collect_custom),
    ("dataset", collect_dataset),
]


if __name__ == "__main__":
    main(COLLECTORS)
