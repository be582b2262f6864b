"""Facts: what the probe (computefence/probe/, sent as one script) prints about one machine,
parsed, one model per collector; then the watch probe's (`fleet watch`), which reuse the
identity and mount facts. `Facts` is the whole answer, and carries `WatchFacts` for the watch probe."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from computefence.models.base import PROBE_SCHEMA_VERSION, FactInt, _Fact
from computefence.redaction import Redacted


class CollectorStatus(_Fact):
    ok: bool = True
    timed_out: bool = False
    error: str | None = None
    duration_s: float = 0.0


class OsRelease(_Fact):
    id: str | None = None
    version_id: str | None = None
    pretty_name: str | None = None


class IdentityFacts(_Fact):
    hostname: str | None = None
    # /etc/machine-id; containers of one image may share it, so only a difference tells.
    machine_id: str | None = None
    os_release: OsRelease = Field(default_factory=OsRelease)
    kernel: str | None = None
    glibc: str | None = None
    cpu_count: FactInt | None = None
    mem_total_bytes: FactInt | None = None
    python_version: str | None = None
    python_executable: str | None = None
    user: str | None = None
    uid: FactInt | None = None
    home: str | None = None
    cwd: str | None = None
    # Provider markers found in the environment or filesystem, e.g.
    # {"RUNPOD_POD_ID": "abc123"} or {"lambda": "/etc/lambda-stack-version"}.
    provider_hints: dict[str, str] = Field(default_factory=dict)


class EnvValue(_Fact):
    # "process" (the probe's own env, i.e. what an SSH session sees), "container"
    # (/proc/1/environ), "etc_environment" (/etc/environment), "rp_environment"
    # (/etc/rp_environment).
    source: str
    value: Redacted | None = None
    # Secret-like variables (tokens, keys) are reported as present with value None.
    redacted: bool = False


class EnvironmentFacts(_Fact):
    variables: dict[str, list[EnvValue]] = Field(default_factory=dict)
    container_env_readable: bool = False
    # Whether the sshd serving this session runs pam_env on /etc/environment (UsePAM on, and
    # pam_env.so in /etc/pam.d/sshd without envfile=/readenv=0); None where it cannot tell.
    ssh_pam_env: bool | None = None


class MountFacts(_Fact):
    mount_id: FactInt | None = None
    parent_id: FactInt | None = None
    mount_point: str
    root: str = "/"
    fs_type: str
    source: str | None = None
    options: list[str] = Field(default_factory=list)
    super_options: list[str] = Field(default_factory=list)


class PathFacts(_Fact):
    # role: "root", "home", "hf_cache", "output_dir", "workspace", "volume", "shm", "tmp", "extra"
    role: str
    path: str
    # How the path was chosen, e.g. "HF_HUB_CACHE", "HF_HOME", "default", "--output-dir".
    origin: str | None = None
    resolved: str | None = None
    exists: bool = False
    # Nearest existing ancestor when the path itself does not exist.
    existing_ancestor: str | None = None
    parent_exists: bool = False
    writable: bool = False
    mount_point: str | None = None
    fs_type: str | None = None
    mount_source: str | None = None
    free_bytes: FactInt | None = None
    total_bytes: FactInt | None = None
    error: str | None = None
    # Set when the path exists: False for a file where a directory belongs.
    is_dir: bool | None = None
    # The filesystem is mounted read-only (statvfs ST_RDONLY).
    read_only: bool = False


class StorageFacts(_Fact):
    mounts: list[MountFacts] = Field(default_factory=list)
    paths: list[PathFacts] = Field(default_factory=list)
    # Why the mount table could not be read.
    error: str | None = None


class GpuDevice(_Fact):
    index: FactInt
    name: str
    uuid: str | None = None
    memory_total_mib: FactInt | None = None
    memory_used_mib: FactInt | None = None
    compute_cap: str | None = None


class GpuHealth(_Fact):
    """One GPU's health as `nvidia-smi -q -x` reports it; None where the driver says N/A or
    leaves the field out (older drivers, consumer cards, MIG mode)."""

    index: FactInt
    name: str | None = None
    pci_bus_id: str | None = None
    ecc_mode: str | None = None  # "Enabled", "Disabled"
    ecc_volatile_uncorrectable: FactInt | None = None
    ecc_volatile_correctable: FactInt | None = None
    ecc_aggregate_uncorrectable: FactInt | None = None
    ecc_aggregate_correctable: FactInt | None = None
    # Page retirement (before Ampere).
    retired_pages: FactInt | None = None
    retired_pages_pending: bool | None = None
    # Row remapping (Ampere and later).
    remapped_rows_correctable: FactInt | None = None
    remapped_rows_uncorrectable: FactInt | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    # Clock event ("throttle" before driver 535) reasons by short name, e.g. {"hw_slowdown": False}.
    clock_event_reasons: dict[str, bool] = Field(default_factory=dict)
    utilization_pct: FactInt | None = None
    processes: FactInt | None = None
    pcie_gen_current: FactInt | None = None
    pcie_gen_max: FactInt | None = None
    pcie_width_current: FactInt | None = None
    pcie_width_max: FactInt | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None  # enforced
    power_limit_default_w: float | None = None
    power_limit_max_w: float | None = None
    temperature_c: FactInt | None = None
    temperature_slowdown_c: FactInt | None = None
    persistence_mode: str | None = None
    compute_mode: str | None = None  # "Default", "Exclusive_Process", "Prohibited"
    mig_current: str | None = None
    mig_pending: str | None = None
    # NVSwitch systems only (driver 535+): state "Completed", "In Progress", "Not Started".
    fabric_state: str | None = None
    fabric_status: str | None = None


class XidEvent(_Fact):
    code: FactInt
    pci_bus_id: str | None = None
    line: str


class KernelLogFacts(_Fact):
    # Whether the kernel log could be read without privileges; `reason` says why not.
    readable: bool = False
    source: str | None = None
    reason: str | None = None
    xid_events: list[XidEvent] = Field(default_factory=list)


class GpuFacts(_Fact):
    nvidia_smi_path: str | None = None
    nvidia_smi_found: bool = False
    exit_code: FactInt | None = None
    timed_out: bool = False
    # First lines of stderr/stdout when nvidia-smi failed.
    error_output: Redacted | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[GpuDevice] = Field(default_factory=list)
    # /dev/nvidia0 etc. present even when nvidia-smi is missing.
    device_nodes: list[str] = Field(default_factory=list)
    # From `nvidia-smi -q -x`; health_error says why there is none (old tool, timeout, bad XML).
    health: list[GpuHealth] = Field(default_factory=list)
    health_error: str | None = None
    # /dev/nvidia-nvswitch* nodes: an HGX board whose NVSwitches need the fabric manager.
    nvswitch_nodes: list[str] = Field(default_factory=list)
    # nv-fabricmanager in the process table; None when /proc could not be read.
    fabric_manager_running: bool | None = None
    kernel_log: KernelLogFacts = Field(default_factory=KernelLogFacts)


class TorchDevice(_Fact):
    index: FactInt
    name: str | None = None
    capability: str | None = None
    total_memory_bytes: FactInt | None = None


class TorchFacts(_Fact):
    python: str = "python3"
    python_found: bool = False
    python_executable: str | None = None
    python_version: str | None = None
    importable: bool = False
    import_error: str | None = None
    timed_out: bool = False
    version: str | None = None
    cuda_build: str | None = None  # torch.version.cuda, None for CPU builds
    hip_build: str | None = None
    cuda_available: bool | None = None
    cuda_error: str | None = None
    device_count: FactInt | None = None
    devices: list[TorchDevice] = Field(default_factory=list)
    arch_list: list[str] = Field(default_factory=list)
    cudnn_version: FactInt | None = None
    nccl_version: str | None = None
    # Warnings torch printed while its CUDA state was queried, e.g. "... with CUDA
    # capability sm_90 is not compatible with the current PyTorch installation".
    warnings: list[str] = Field(default_factory=list)


# No GPU or link measures more (B200 sparse FP4 is ~20,000 TFLOPS, NVLink 5 1,800 GB/s):
# a figure outside 0..PERF_LIMIT is a broken canary, not a fast pod.
PERF_LIMIT = 1e5


class GpuPerf(_Fact):
    index: FactInt
    name: str | None = None
    dtype: str | None = None  # "bfloat16" or "float16"
    matmul_tflops: float | None = Field(None, ge=0, le=PERF_LIMIT)
    h2d_gbps: float | None = Field(None, ge=0, le=PERF_LIMIT)
    d2h_gbps: float | None = Field(None, ge=0, le=PERF_LIMIT)
    error: str | None = None


class PerfFacts(_Fact):
    """The --perf canary's measurements, taken in the training interpreter's torch."""

    ran: bool = False
    # Why no canary ran (GPU memory held by other processes, torch without CUDA, ...).
    skipped_reason: str | None = None
    error: str | None = None
    duration_s: float = 0.0
    gpus: list[GpuPerf] = Field(default_factory=list)
    # "nccl-allreduce" (bus bandwidth) or "p2p-copy", on multi-GPU pods.
    interconnect_method: str | None = None
    interconnect_gbps: float | None = Field(None, ge=0, le=PERF_LIMIT)
    interconnect_error: str | None = None


class PackageFacts(_Fact):
    python: str = "python3"
    python_found: bool = False
    error: str | None = None
    # The interpreter did not list the versions within the collector's limit: they are unknown.
    timed_out: bool = False
    # name -> version, None when not installed.
    versions: dict[str, str | None] = Field(default_factory=dict)


class AccelerateFacts(_Fact):
    path: str | None = None
    found: bool = False
    # Locations looked at, in order, when no config was found.
    searched: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    # How the config was found: "--accelerate-config", "ACCELERATE_CONFIG_FILE" or "default".
    origin: str | None = None


class LabelConflictExample(_Fact):
    input: str
    labels: list[str]
    lines: list[int] = Field(default_factory=list)


class DatasetFacts(_Fact):
    path: str
    exists: bool = False
    format: str | None = None  # jsonl, json-array, csv, tsv, parquet
    compression: str | None = None  # gzip
    error: str | None = None
    columns: list[str] = Field(default_factory=list)
    input_column: str | None = None
    label_column: str | None = None
    rows: FactInt = 0
    unreadable_rows: FactInt = 0
    unreadable_lines: list[int] = Field(default_factory=list)
    duplicate_rows: FactInt = 0
    duplicate_inputs: FactInt = 0
    conflicting_inputs: FactInt = 0
    conflict_examples: list[LabelConflictExample] = Field(default_factory=list)
    missing_inputs: FactInt = 0
    missing_labels: FactInt = 0
    label_counts: dict[str, int] = Field(default_factory=dict)
    partial: bool = False
    partial_reason: str | None = None
    # Rows the file holds, estimated from its size and its first 64 KiB (Parquet: exact).
    estimated_rows: FactInt | None = None
    duration_s: float = 0.0
    # What kind of problem `error` is, for the fix: "not_found", "not_a_file", "unreadable_file",
    # "unknown_format", "compressed", "utf16", "needs_pyarrow", "truncated", "invalid_json",
    # "invalid_csv", "io".
    error_kind: str | None = None
    # True when the column was not named but recognised by its name (text, label, ...).
    input_column_guessed: bool = False
    label_column_guessed: bool = False
    # Named columns that no row has.
    absent_columns: list[str] = Field(default_factory=list)
    # Why the first unreadable row is unreadable, e.g. "line 7: not JSON: Expecting ',' ...".
    unreadable_reason: str | None = None
    # Distinct labels; label_counts holds the 50 most frequent. When capped, there were more
    # than the probe keeps names for (10000) and distinct_labels is that limit.
    distinct_labels: FactInt = 0
    distinct_labels_capped: bool = False
    distinct_inputs: FactInt = 0
    # "pyarrow" when the counts came from the pyarrow fast path, else "stdlib"; engine_note
    # says why the fast path did not run (None when it did).
    engine: str = "stdlib"
    engine_note: str | None = None


class CustomCheckResult(_Fact):
    """What one of the policy's custom checks did on the machine."""

    id: str
    exit_code: FactInt | None = None
    # The signal that ended it (killed past its timeout, or a crash).
    signal: FactInt | None = None
    timed_out: bool = False
    timeout_s: float | None = None
    # Whether stdout matched the check's `stdout_matches` (matched on the pod); None: no pattern.
    stdout_matched: bool | None = None
    # The last 512 characters of each stream, for the finding's message.
    stdout: Redacted = ""
    stderr: Redacted = ""
    # Output beyond the cap (64 KiB per stream) was read and dropped.
    output_truncated: bool = False
    duration_s: float = 0.0
    # Why it could not be started.
    error: str | None = None


class ShardFacts(_Fact):
    """One .safetensors file of the model, from its header (counts and bytes, no weights read)."""

    name: str
    present: bool = False
    params: FactInt | None = None
    data_bytes: FactInt | None = None
    file_bytes: FactInt | None = None
    header_bytes: FactInt | None = None
    dtypes: dict[str, int] = Field(default_factory=dict)
    error: str | None = None


class SafetensorsIndex(_Fact):
    total_size: FactInt | None = None
    tensors: FactInt = 0
    shards: list[str] = Field(default_factory=list)


class ModelVolume(_Fact):
    """The hub cache folder the model is (or will be) downloaded to, and its filesystem."""

    path: str
    origin: str | None = None
    resolved: str | None = None
    exists: bool = False
    free_bytes: FactInt | None = None
    total_bytes: FactInt | None = None
    mount_point: str | None = None
    fs_type: str | None = None
    error: str | None = None


class JobFromFile(_Fact):
    """job.from: an axolotl or LLaMA-Factory config on the pod, as text (YAML is read here)."""

    path: str
    text: str | None = None
    # Its top-level base_model / model_name_or_path, read by the probe to look the model up.
    model: str | None = None
    error: str | None = None


class ModelFacts(_Fact):
    """The policy's job.model as found on the pod (probe part `model`)."""

    # "" when only job.from was given and it names no model.
    ref: str
    from_file: JobFromFile | None = None
    source: str | None = None  # "hf_cache" or "path"
    found: bool = False
    location: str | None = None
    snapshot: str | None = None
    cache: ModelVolume | None = None
    files: list[str] = Field(default_factory=list)
    # config.json's scalar keys (sizes, dtype, tying), its quantization_config and text_config.
    config: dict[str, Any] | None = None
    index: SafetensorsIndex | None = None
    shards: list[ShardFacts] = Field(default_factory=list)
    incomplete_bytes: FactInt = 0
    errors: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- the watch probe (fleet watch)


class WatchGpu(_Fact):
    """One GPU in one `nvidia-smi --query-gpu` sample; None where the driver says [N/A]."""

    index: FactInt | None = None
    uuid: str | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None


class WatchGpuSample(_Fact):
    t: float = 0.0  # seconds into the window
    gpus: list[WatchGpu] = Field(default_factory=list)


class ComputeApp(_Fact):
    """A row of `nvidia-smi --query-compute-apps`."""

    gpu_uuid: str | None = None
    pid: FactInt | None = None
    used_memory_mib: float | None = None


class WatchGpuFacts(_Fact):
    nvidia_smi_found: bool = False
    error: str | None = None
    window_s: float = 0.0
    samples: list[WatchGpuSample] = Field(default_factory=list)
    apps: list[ComputeApp] = Field(default_factory=list)


class RankProcess(_Fact):
    """One rank of a distributed job: a worker with RANK or LOCAL_RANK in its environment
    (or --local_rank on its command line) whose parent has none."""

    pid: FactInt
    rank: FactInt | None = None
    local_rank: FactInt | None = None
    world_size: FactInt | None = None
    local_world_size: FactInt | None = None
    # /proc/PID/stat's state: R running, S sleeping, D uninterruptible (I/O, a driver call),
    # T stopped, t traced, Z zombie; X: it exited during the sampling window.
    state: str | None = None
    # CPU seconds it has used, and the cores it kept busy over the sampling window.
    cpu_s: float | None = None
    cpu_cores: float | None = None


class TrainingProcess(_Fact):
    """A training job's top process (torchrun and its workers are one)."""

    pid: FactInt
    ppid: FactInt | None = None
    # "torchrun", "accelerate", "deepspeed", "python", "python -m" or "job.process".
    matched_by: str | None = None
    # Secret values already replaced by *** on the pod.
    argv: list[Redacted] = Field(default_factory=list)
    elapsed_s: float | None = None
    # CPU cores its process tree kept busy over the sampling window (1.0: one core).
    cpu_cores: float | None = None
    processes: FactInt = 1
    cwd: str | None = None
    output_dir: str | None = None
    # Its stdout, when that is a regular file (nohup ... > train.log).
    stdout: str | None = None
    ranks: list[RankProcess] = Field(default_factory=list)
    # torch, transformers, accelerate, deepspeed beside the torch its first rank loaded.
    versions: dict[str, str] = Field(default_factory=dict)


class WatchProcessesFacts(_Fact):
    processes: list[TrainingProcess] = Field(default_factory=list)
    scanned: FactInt = 0
    cpu_window_s: float | None = None
    # Where py-spy is on the pod's PATH, if it is.
    py_spy: str | None = None
    # job.process could not be matched (it ran past its time): processes were recognised by
    # their launcher or script name only.
    job_process_error: str | None = None


class Checkpoint(_Fact):
    path: str
    name: str
    mtime: float
    size_bytes: FactInt | None = None
    # The size stopped counting (too many files, time budget): at least this large.
    size_partial: bool = False
    step: FactInt | None = None
    is_dir: bool = True


# A loss as the probe sends it: a number, or "nan" / "inf" / "-inf".
LossValue = float | str


class LogHistoryEntry(_Fact):
    step: FactInt | None = None
    epoch: float | str | None = None
    loss: LossValue | None = None
    learning_rate: LossValue | None = None
    grad_norm: LossValue | None = None
    eval_loss: LossValue | None = None


class TrainerState(_Fact):
    """The newest trainer_state.json (Hugging Face Trainer) under an output dir."""

    path: str
    mtime: float | None = None
    error: str | None = None
    global_step: FactInt | None = None
    max_steps: FactInt | None = None
    save_steps: float | None = None
    logging_steps: float | None = None
    train_batch_size: FactInt | None = None
    num_train_epochs: float | None = None
    epoch: float | str | None = None
    log_history: list[LogHistoryEntry] = Field(default_factory=list)


class OutputDirFacts(_Fact):
    path: str
    # "output_dir" (policy or inventory), "--output_dir of pid N", "cwd of pid N".
    origin: str | None = None
    resolved: str | None = None
    exists: bool = False
    error: str | None = None
    mount_point: str | None = None
    fs_type: str | None = None
    mount_source: str | None = None
    free_bytes: FactInt | None = None
    total_bytes: FactInt | None = None
    # Free space again at the end of the window, and how long after the first reading.
    free_bytes_later: FactInt | None = None
    growth_window_s: float | None = None
    # The newest few, newest first; checkpoint_count is all of them.
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    checkpoint_count: FactInt = 0
    # The largest of the newest ten that hold data: what one checkpoint takes (a save cut
    # short is smaller, or empty).
    largest_checkpoint: Checkpoint | None = None
    trainer_state: TrainerState | None = None


class WatchOutputsFacts(_Fact):
    # The pod's clock when the outputs were read (mtimes are judged against it).
    now: float | None = None
    dirs: list[OutputDirFacts] = Field(default_factory=list)
    mounts: list[MountFacts] = Field(default_factory=list)
    error: str | None = None


class LogProgress(_Fact):
    """The last tqdm progress bar in the log."""

    step: FactInt
    total: FactInt | None = None
    seconds_per_step: float | None = None


class WatchLogFacts(_Fact):
    path: str
    # "job.log" or "stdout of pid N".
    origin: str | None = None
    exists: bool = False
    error: str | None = None
    regex_error: str | None = None
    mtime: float | None = None
    size_bytes: FactInt | None = None
    # In the order they were logged, the last 200 of the tail.
    losses: list[LossValue] = Field(default_factory=list)
    # The step each loss was logged at (its own line's "step N", else the progress bar
    # before it), where the log says.
    loss_steps: list[int | None] = Field(default_factory=list)
    # Lines longer than the probe's bound, cut before they were read.
    lines_cut: FactInt = 0
    progress: LogProgress | None = None
    # The last lines and the last error-looking line, secrets replaced by *** on the pod.
    tail: list[Redacted] = Field(default_factory=list)
    error_line: Redacted | None = None


class WatchFacts(_Fact):
    """What the watch probe saw of a training run."""

    identity: IdentityFacts = Field(default_factory=IdentityFacts)
    gpu: WatchGpuFacts = Field(default_factory=WatchGpuFacts)
    processes: WatchProcessesFacts = Field(default_factory=WatchProcessesFacts)
    outputs: WatchOutputsFacts = Field(default_factory=WatchOutputsFacts)
    log: WatchLogFacts | None = None


class Facts(_Fact):
    """Everything the probe reports about one machine."""

    probe_schema_version: FactInt = PROBE_SCHEMA_VERSION
    probe_duration_s: float = 0.0
    collectors: dict[str, CollectorStatus] = Field(default_factory=dict)
    identity: IdentityFacts = Field(default_factory=IdentityFacts)
    environment: EnvironmentFacts = Field(default_factory=EnvironmentFacts)
    storage: StorageFacts = Field(default_factory=StorageFacts)
    gpu: GpuFacts = Field(default_factory=GpuFacts)
    torch: TorchFacts = Field(default_factory=TorchFacts)
    packages: PackageFacts = Field(default_factory=PackageFacts)
    accelerate: AccelerateFacts = Field(default_factory=AccelerateFacts)
    dataset: DatasetFacts | None = None
    perf: PerfFacts | None = None
    model: ModelFacts | None = None
    custom: list[CustomCheckResult] = Field(default_factory=list)
    # Only from the watch probe (`fleet watch`), which sends nothing else.
    watch: WatchFacts | None = None
