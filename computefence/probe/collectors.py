# Probe part, last in the assembled script: the collector table (its order is the output's)
# and the script's entry point.

from .accelerate import collect_accelerate
from .core import main
from .custom import collect_custom
from .dataset import collect_dataset
from .environment import collect_environment
from .gpu import collect_gpu
from .identity import collect_identity
from .model import collect_model
from .packages import collect_packages
from .perf import collect_perf
from .storage import collect_storage
from .torch import collect_torch

# A collector whose part was not sent (probe/assemble.PART_NEEDS: these parameters do not
# ask for it) is None in the script, and left out, as the runner leaves out a collector whose
# parameter is not set.
COLLECTORS = [
    (name, collect)
    for name, collect in (
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
        ("model", collect_model),
    )
    if collect is not None
]


if __name__ == "__main__":
    main(COLLECTORS)
