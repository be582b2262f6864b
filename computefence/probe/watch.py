# Watch probe part, last in the watch script: its collector table and entry point. The
# watch probe is light (no torch, no package scan): it runs every few minutes on pods that
# are training, so it reads what the job leaves behind and samples the GPUs briefly.

from .core import main
from .identity import collect_identity
from .watch_files import collect_watch_log, collect_watch_outputs
from .watch_gpu import collect_watch_gpu
from .watch_jobs import collect_watch_processes

WATCH_COLLECTORS = [
    ("identity", collect_identity),
    ("gpu", collect_watch_gpu),
    ("processes", collect_watch_processes),
    ("outputs", collect_watch_outputs),
    ("log", collect_watch_log),
]
# Seconds per collector; the GPU window and the free-space growth take about 3 s.
WATCH_TIMEOUTS = {"identity": 5.0, "gpu": 12.0, "processes": 8.0, "outputs": 12.0, "log": 8.0}


if __name__ == "__main__":
    main(WATCH_COLLECTORS, section="watch", timeouts=WATCH_TIMEOUTS)
