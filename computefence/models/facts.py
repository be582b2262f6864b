"""The data shared by every part of ComputeFence.

Facts are what the probe (computefence/probe/, sent as one script) prints, parsed. Findings
are what the evaluator decides about them. Reports bundle both per host. Renderers read reports.
A field added here is visible to the probe parser, the evaluator and every renderer.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_serializer, model_validator
from pydantic.json_schema import SkipJsonSchema

from computefence.redaction import Redacted

# 2: findings and host statuses carry fix_commands/fix_advice; severity "skip"; summary.skipped;
#    later fix_steps ({run, on, kind}) beside them, and findings' key (readers of 2 without
#    them still read).
SCHEMA_VERSION = 2
PROBE_SCHEMA_VERSION = 1


class _Model(BaseModel):
    # Unknown keys from a newer probe are ignored, never fatal. Strings from pods and APIs
    # arrive already free of lone surrogates (computefence.jsontext). No number is NaN or
    # infinite (a saved report's, a provider's): JUnit and Prometheus readers reject them.
    model_config = ConfigDict(extra="ignore", validate_assignment=True, allow_inf_nan=False)


# Parsed fact models with the same fields set share one set of their names: pydantic keeps
# a set per instance, about 700 bytes each, 40 KB of a pod's 55 KB of parsed facts.
_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


# The largest magnitude a pod's whole-number fact may have (bytes, MiB, counts, error totals):
# beyond it a value is no measurement, and float() of it overflows in the evaluator.
FACT_INT_LIMIT = 2**63


class _Fact(_Model):
    """A fact from the probe. A number that is not finite (NaN, Infinity) or out of range is
    a validation error naming its field: the pod's answer is probe_failed, never judged."""

    def model_post_init(self, context: Any) -> None:
        for name, value in self.__dict__.items():
            if type(value) is int and not -FACT_INT_LIMIT <= value <= FACT_INT_LIMIT:
                raise ValueError(f"{name} is out of range (a {value.bit_length()}-bit number)")
        names = self.__pydantic_fields_set__
        object.__setattr__(self, "__pydantic_fields_set__", _FIELDS_SETS.setdefault(frozenset(names), names))

    def __setstate__(self, state: dict[Any, Any]) -> None:
        # Unpickled (a --workers worker's answer): shared as a parsed one is.
        super().__setstate__(state)
        names = self.__pydantic_fields_set__
        object.__setattr__(self, "__pydantic_fields_set__", _FIELDS_SETS.setdefault(frozenset(names), names))

    def __setattr__(self, name: str, value: Any) -> None:
        # Assignment records the name in the fields set: this instance gets a set of its own first.
        object.__setattr__(self, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        super().__setattr__(name, value)


# ---------------------------------------------------------------- facts (probe output)


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
    cpu_count: int | None = None
    mem_total_bytes: int | None = None
    python_version: str | None = None
    python_executable: str | None = None
    user: str | None = None
    uid: int | None = None
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
    mount_id: int | None = None
    parent_id: int | None = None
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
    free_bytes: int | None = None
    total_bytes: int | None = None
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
    index: int
    name: str
    uuid: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    compute_cap: str | None = None


class GpuHealth(_Fact):
    """One GPU's health as `nvidia-smi -q -x` reports it; None where the driver says N/A or
    leaves the field out (older drivers, consumer cards, MIG mode)."""

    index: int
    name: str | None = None
    pci_bus_id: str | None = None
    ecc_mode: str | None = None  # "Enabled", "Disabled"
    ecc_volatile_uncorrectable: int | None = None
    ecc_volatile_correctable: int | None = None
    ecc_aggregate_uncorrectable: int | None = None
    ecc_aggregate_correctable: int | None = None
    # Page retirement (before Ampere).
    retired_pages: int | None = None
    retired_pages_pending: bool | None = None
    # Row remapping (Ampere and later).
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    # Clock event ("throttle" before driver 535) reasons by short name, e.g. {"hw_slowdown": False}.
    clock_event_reasons: dict[str, bool] = Field(default_factory=dict)
    utilization_pct: int | None = None
    processes: int | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None  # enforced
    power_limit_default_w: float | None = None
    power_limit_max_w: float | None = None
    temperature_c: int | None = None
    temperature_slowdown_c: int | None = None
    persistence_mode: str | None = None
    compute_mode: str | None = None  # "Default", "Exclusive_Process", "Prohibited"
    mig_current: str | None = None
    mig_pending: str | None = None
    # NVSwitch systems only (driver 535+): state "Completed", "In Progress", "Not Started".
    fabric_state: str | None = None
    fabric_status: str | None = None


class XidEvent(_Fact):
    code: int
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
    exit_code: int | None = None
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
    index: int
    name: str | None = None
    capability: str | None = None
    total_memory_bytes: int | None = None


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
    device_count: int | None = None
    devices: list[TorchDevice] = Field(default_factory=list)
    arch_list: list[str] = Field(default_factory=list)
    cudnn_version: int | None = None
    nccl_version: str | None = None
    # Warnings torch printed while its CUDA state was queried, e.g. "... with CUDA
    # capability sm_90 is not compatible with the current PyTorch installation".
    warnings: list[str] = Field(default_factory=list)


# No GPU or link measures more (B200 sparse FP4 is ~20,000 TFLOPS, NVLink 5 1,800 GB/s):
# a figure outside 0..PERF_LIMIT is a broken canary, not a fast pod.
PERF_LIMIT = 1e5


class GpuPerf(_Fact):
    index: int
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
    rows: int = 0
    unreadable_rows: int = 0
    unreadable_lines: list[int] = Field(default_factory=list)
    duplicate_rows: int = 0
    duplicate_inputs: int = 0
    conflicting_inputs: int = 0
    conflict_examples: list[LabelConflictExample] = Field(default_factory=list)
    missing_inputs: int = 0
    missing_labels: int = 0
    label_counts: dict[str, int] = Field(default_factory=dict)
    partial: bool = False
    partial_reason: str | None = None
    # Rows the file holds, estimated from its size and its first 64 KiB (Parquet: exact).
    estimated_rows: int | None = None
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
    distinct_labels: int = 0
    distinct_labels_capped: bool = False
    distinct_inputs: int = 0
    # "pyarrow" when the counts came from the pyarrow fast path, else "stdlib"; engine_note
    # says why the fast path did not run (None when it did).
    engine: str = "stdlib"
    engine_note: str | None = None


class CustomCheckResult(_Fact):
    """What one of the policy's custom checks did on the machine."""

    id: str
    exit_code: int | None = None
    # The signal that ended it (killed past its timeout, or a crash).
    signal: int | None = None
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
    params: int | None = None
    data_bytes: int | None = None
    file_bytes: int | None = None
    header_bytes: int | None = None
    dtypes: dict[str, int] = Field(default_factory=dict)
    error: str | None = None


class SafetensorsIndex(_Fact):
    total_size: int | None = None
    tensors: int = 0
    shards: list[str] = Field(default_factory=list)


class ModelVolume(_Fact):
    """The hub cache folder the model is (or will be) downloaded to, and its filesystem."""

    path: str
    origin: str | None = None
    resolved: str | None = None
    exists: bool = False
    free_bytes: int | None = None
    total_bytes: int | None = None
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
    incomplete_bytes: int = 0
    errors: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- the watch probe (fleet watch)


class WatchGpu(_Fact):
    """One GPU in one `nvidia-smi --query-gpu` sample; None where the driver says [N/A]."""

    index: int | None = None
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
    pid: int | None = None
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

    pid: int
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    # /proc/PID/stat's state: R running, S sleeping, D uninterruptible (I/O, a driver call),
    # T stopped, t traced, Z zombie; X: it exited during the sampling window.
    state: str | None = None
    # CPU seconds it has used, and the cores it kept busy over the sampling window.
    cpu_s: float | None = None
    cpu_cores: float | None = None


class TrainingProcess(_Fact):
    """A training job's top process (torchrun and its workers are one)."""

    pid: int
    ppid: int | None = None
    # "torchrun", "accelerate", "deepspeed", "python", "python -m" or "job.process".
    matched_by: str | None = None
    # Secret values already replaced by *** on the pod.
    argv: list[Redacted] = Field(default_factory=list)
    elapsed_s: float | None = None
    # CPU cores its process tree kept busy over the sampling window (1.0: one core).
    cpu_cores: float | None = None
    processes: int = 1
    cwd: str | None = None
    output_dir: str | None = None
    # Its stdout, when that is a regular file (nohup ... > train.log).
    stdout: str | None = None
    ranks: list[RankProcess] = Field(default_factory=list)
    # torch, transformers, accelerate, deepspeed beside the torch its first rank loaded.
    versions: dict[str, str] = Field(default_factory=dict)


class WatchProcessesFacts(_Fact):
    processes: list[TrainingProcess] = Field(default_factory=list)
    scanned: int = 0
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
    size_bytes: int | None = None
    # The size stopped counting (too many files, time budget): at least this large.
    size_partial: bool = False
    step: int | None = None
    is_dir: bool = True


# A loss as the probe sends it: a number, or "nan" / "inf" / "-inf".
LossValue = float | str


class LogHistoryEntry(_Fact):
    step: int | None = None
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
    global_step: int | None = None
    max_steps: int | None = None
    save_steps: float | None = None
    logging_steps: float | None = None
    train_batch_size: int | None = None
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
    free_bytes: int | None = None
    total_bytes: int | None = None
    # Free space again at the end of the window, and how long after the first reading.
    free_bytes_later: int | None = None
    growth_window_s: float | None = None
    # The newest few, newest first; checkpoint_count is all of them.
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    checkpoint_count: int = 0
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

    step: int
    total: int | None = None
    seconds_per_step: float | None = None


class WatchLogFacts(_Fact):
    path: str
    # "job.log" or "stdout of pid N".
    origin: str | None = None
    exists: bool = False
    error: str | None = None
    regex_error: str | None = None
    mtime: float | None = None
    size_bytes: int | None = None
    # In the order they were logged, the last 200 of the tail.
    losses: list[LossValue] = Field(default_factory=list)
    # The step each loss was logged at (its own line's "step N", else the progress bar
    # before it), where the log says.
    loss_steps: list[int | None] = Field(default_factory=list)
    # Lines longer than the probe's bound, cut before they were read.
    lines_cut: int = 0
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

    probe_schema_version: int = PROBE_SCHEMA_VERSION
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


# ---------------------------------------------------------------- what to check


class CheckOptions(_Model):
    """Per-host parameters of the checks (from the CLI, an inventory or a provider)."""

    model_config = ConfigDict(extra="forbid")

    output_dir: str | None = None
    accelerate_config: str | None = None
    dataset: str | None = None
    input_column: str | None = None
    label_column: str | None = None
    expect_gpu: bool = False
    # --perf: run the GPU performance canary (seconds of load on every GPU).
    perf: bool = False
    extra_paths: list[str] = Field(default_factory=list)


class ProviderInfo(_Model):
    """What a provider's API says about a pod."""

    provider: str  # "runpod", "vast", "lambda"
    pod_id: str
    name: str | None = None
    state: str | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    cost_per_hour: float | None = None
    image: str | None = None
    region: str | None = None
    # The provider's view of persistent storage.
    volume_mount_path: str | None = None
    volume_gb: float | None = None
    container_disk_gb: float | None = None
    persistent_paths: list[str] = Field(default_factory=list)
    network_volume: bool | None = None
    # The physical machine behind the pod (RunPod machineId, Vast machine_id) and, on Vast,
    # the host who rents it out; None where the provider does not say (Lambda).
    machine_id: str | None = None
    host_id: str | None = None


class StepKind(str, Enum):
    """What running a fix step risks."""

    # Only shows something; fixes nothing, so `fleet fix` never runs it.
    INSPECT = "inspect"
    # Idempotent, and changes only the job's environment (the files an SSH session reads, the
    # accelerate config, a directory on the volume, a package install).
    SAFE = "safe"
    # Restarts a service or the GPU: a running job would die.
    DISRUPTIVE = "disruptive"
    # Deletes data.
    DESTRUCTIVE = "destructive"


class StepPlace(str, Enum):
    # Over SSH, on the pod (for doctor: this machine).
    POD = "pod"
    # On the user's own machine: ssh-keygen -R, an edit of the inventory or policy.
    LOCAL = "local"


class FixStep(_Model):
    """One command of a fix, where it runs and what it risks. A command that no rule
    classified reads as `inspect` on the pod, so nothing unclassified is ever run."""

    run: str
    on: StepPlace = StepPlace.POD
    kind: StepKind = StepKind.INSPECT

    @model_validator(mode="before")
    @classmethod
    def _command_shorthand(cls, value: Any) -> Any:
        return {"run": value} if isinstance(value, str) else value

    @classmethod
    def inspect(cls, run: str) -> FixStep:
        return cls(run=run, kind=StepKind.INSPECT)

    @classmethod
    def safe(cls, run: str) -> FixStep:
        return cls(run=run, kind=StepKind.SAFE)

    @classmethod
    def disruptive(cls, run: str) -> FixStep:
        return cls(run=run, kind=StepKind.DISRUPTIVE)

    @classmethod
    def destructive(cls, run: str) -> FixStep:
        return cls(run=run, kind=StepKind.DESTRUCTIVE)

    @classmethod
    def local(cls, run: str, kind: StepKind = StepKind.INSPECT) -> FixStep:
        return cls(run=run, on=StepPlace.LOCAL, kind=kind)

    @property
    def runnable(self) -> bool:
        """Something `fleet fix --apply` may run: a pod step that changes something and deletes nothing."""
        return self.on is StepPlace.POD and self.kind in (StepKind.SAFE, StepKind.DISRUPTIVE)


class Fix(_Model):
    """What to do about a finding: steps to run in order, each safe to paste, and
    plain-words advice for what no command can do (move to another machine, edit the pod
    in the provider's console). A plain string stands for one unclassified command, and
    `commands=[...]` for unclassified steps (kind `inspect`, never run by `fleet fix`)."""

    steps: list[FixStep] = Field(default_factory=list)
    advice: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _command_shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"steps": [value]}
        if isinstance(value, dict) and "commands" in value:
            value = dict(value)
            commands = value.pop("commands") or []
            value.setdefault("steps", commands)
        return value

    @computed_field  # type: ignore[prop-decorator]
    @property
    def commands(self) -> list[str]:
        return [step.run for step in self.steps]

    def __bool__(self) -> bool:
        return bool(self.steps or self.advice)

    def as_text(self) -> str:
        """The schema-1 one-line form: commands joined by '; ', advice as a shell comment."""
        text = "; ".join(self.commands)
        if self.advice:
            text = f"{text}  # {self.advice}" if text else self.advice
        return text


class Target(_Model):
    """One machine to check, wherever it came from."""

    name: str
    host: str
    port: int = 22
    user: str | None = None
    identity_files: list[str] = Field(default_factory=list)
    # False after ssh_config's `IdentityFile none`: ssh then tries no ~/.ssh/id_* key, only
    # identity_files and the agent's keys (with identity_files empty, the agent's alone).
    default_identities: bool = True
    proxy_jump: str | None = None
    # An ssh ProxyCommand (tokens such as %h %p unexpanded); set instead of proxy_jump, never both.
    proxy_command: str | None = None
    known_hosts: list[str] = Field(default_factory=list)
    python: str = "python3"
    tags: list[str] = Field(default_factory=list)
    checks: CheckOptions = Field(default_factory=CheckOptions)
    # Where the target came from, e.g. "inventory/pods.yaml:12", "ssh_config", "runpod".
    source: str | None = None
    provider: ProviderInfo | None = None
    # Set when the provider lists the pod but it cannot be checked (no public SSH, stopped).
    unreachable_reason: str | None = None
    unreachable_fix: Fix | None = None
    # Path to an ssh_config the target was read from, for connection options.
    ssh_config: str | None = None
    # Overrides for the probe's filesystem roots ("proc", "etc", "sys", "dev"), passed into
    # the probe's params["roots"]; the demo fleet uses them to present simulated pod layouts.
    probe_roots: dict[str, str] = Field(default_factory=dict)
    # Probe parameters from the job's policy: the packages it names, its custom checks.
    probe_extra: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------- verdicts


class Severity(str, Enum):
    # A check that could not run or does not apply here; its message says why.
    SKIP = "skip"
    PASS = "pass"
    WARN = "warn"
    BLOCK = "block"

    @property
    def rank(self) -> int:
        return {"skip": -1, "pass": 0, "warn": 1, "block": 2}[self.value]


class Remedy(str, Enum):
    """What a blocker calls for: a command on the pod, the user's own setting, or another machine."""

    FIX = "fix"
    CONFIG = "config"
    REPLACE = "replace"


class _WithFix(_Model):
    """For models with a `fix: Fix | None` field. In JSON, `fix` stays the schema-1 string
    for one more schema version, beside `fix_commands` and `fix_advice`; reading accepts
    both forms (a schema-1 string reads as one command)."""

    @model_validator(mode="before")
    @classmethod
    def _fix_from_json(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("fix_commands" in data or "fix_advice" in data or "fix_steps" in data):
            data = dict(data)
            commands, advice = data.pop("fix_commands", None) or [], data.pop("fix_advice", None)
            # A report without fix_steps (written before them) reads its commands as unclassified.
            steps = data.pop("fix_steps", None) or commands
            data["fix"] = {"steps": steps, "advice": advice} if steps or advice else None
        return data

    @field_serializer("fix", check_fields=False)
    def _fix_text(self, fix: Fix | None) -> str | None:
        return fix.as_text() if fix else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fix_commands(self) -> list[str]:
        fix = getattr(self, "fix", None)
        return list(fix.commands) if fix else []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fix_advice(self) -> str | None:
        fix = getattr(self, "fix", None)
        return fix.advice if fix else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fix_steps(self) -> list[FixStep]:
        fix = getattr(self, "fix", None)
        return list(fix.steps) if fix else []


class Finding(_WithFix):
    check: str  # stable id, e.g. "storage.output-dir"
    severity: Severity
    message: Redacted
    fix: Fix | None = None
    # What the finding is about on this host (a path, a filesystem, a GPU index), so
    # the same check on the same subject groups across pods.
    subject: str | None = None
    # The check's remedy class (evaluate/spec.py); None in reports saved before it existed.
    remedy: Remedy | None = None
    # What identifies the finding across runs of this pod (evaluate/identity.py): the subject,
    # a path named from the pod's own places (`<output_dir>`, `~/...`). None in reports saved
    # before it existed, and where there is no subject.
    key: str | None = None


class HostStatus(str, Enum):
    OK = "ok"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    AUTH_FAILED = "auth_failed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_MISMATCH = "host_key_mismatch"
    CONNECTION_LOST = "connection_lost"
    NO_PYTHON = "no_python"
    PROBE_FAILED = "probe_failed"
    NOT_CHECKABLE = "not_checkable"
    VANISHED = "vanished"
    CANCELLED = "cancelled"


class HostVerdict(str, Enum):
    READY = "ready"
    WARNINGS = "warnings"
    BLOCKED = "blocked"
    NOT_CHECKED = "not_checked"


class HostReport(_WithFix):
    name: str
    status: HostStatus
    reason: Redacted | None = None
    fix: Fix | None = None
    host: str | None = None
    port: int | None = None
    provider: ProviderInfo | None = None
    tags: list[str] = Field(default_factory=list)
    duration_s: float | None = None
    facts: Facts | None = None
    findings: list[Finding] = Field(default_factory=list)
    # What the connector saw beyond the reason (a known_hosts file, a key's fingerprint), for
    # the evaluator's fix; never written to a report.
    status_detail: SkipJsonSchema[str | None] = Field(default=None, exclude=True)

    @property
    def blocking_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.BLOCK]

    @property
    def warning_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.WARN]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def blockers(self) -> int:
        return len(self.blocking_findings)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def warnings(self) -> int:
        return len(self.warning_findings)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> HostVerdict:
        """What the pod is good for: the state a launch script reads."""
        if self.status is not HostStatus.OK:
            return HostVerdict.NOT_CHECKED
        if self.blockers:
            return HostVerdict.BLOCKED
        return HostVerdict.WARNINGS if self.warnings else HostVerdict.READY


class SourceStatus(_Model):
    """How one target source (an inventory, a provider API) fared."""

    name: str
    ok: bool = True
    targets: int = 0
    error: str | None = None
    # What read it where there is a choice: "ssh -G" or "built-in parser",
    # "ansible-inventory" or "built-in reader".
    resolver: str | None = None
    # One line each: a line that could not be read, an option that cannot be honoured.
    warnings: list[str] = Field(default_factory=list)


class TargetList(_Model):
    """What `inventory list --format json` prints."""

    schema_version: int = SCHEMA_VERSION
    targets: list[Target]
    sources: list[SourceStatus]


class DriftRow(_Model):
    """One component whose version differs between hosts."""

    component: str
    # version -> host names
    values: dict[str, list[str]]


BASELINE_SCHEMA_VERSION = 1


class BaselineLock(_Model):
    """computefence.lock.json: the environment fingerprint of pods that worked."""

    schema_version: int = BASELINE_SCHEMA_VERSION
    tool_version: str
    generated_at: str
    # "majority" (each field's most common value) or "pod" (one pod's values).
    reference: str = "majority"
    pods: list[str] = Field(default_factory=list)
    # Field -> value, e.g. {"torch": "2.5.1+cu124", "torch-cuda": "12.4", "transformers": "4.48.0"}.
    fingerprint: dict[str, str] = Field(default_factory=dict)
    # Field -> {pod: its value} for the pods whose value was not the one recorded.
    differing: dict[str, dict[str, str]] = Field(default_factory=dict)


class Summary(_Model):
    hosts: int = 0
    ok: int = 0
    not_ok: int = 0
    # Each checked pod counts once, under its worst finding (render/views.pod_counts words them).
    hosts_blocked: int = Field(0, description="Checked pods with at least one blocker (their warnings too).")
    hosts_warned: int = Field(0, description="Checked pods with warnings and no blocker.")
    hosts_clean: int = Field(0, description="Checked pods with no blocker and no warning.")
    blockers: int = 0
    warnings: int = 0
    passed: int = 0
    # Checks that could not run or do not apply; neither passes nor problems.
    skipped: int = 0
    cost_per_hour_total: float | None = None
    cost_per_hour_at_risk: float | None = None
    hosts_at_risk_priced: int = 0
    # "pass", "warn" or "block"
    verdict: Severity = Severity.PASS


# ---------------------------------------------------------------- since the last run


class FindingChange(_Model):
    """A blocker or warning that is new since the last run, or one that cleared."""

    host: str
    # None: absent (or a pass) on that side.
    severity_before: Severity | None = None
    severity_after: Severity | None = None
    # The finding as the side that has it reports it (new: this run, cleared: the last run).
    finding: Finding


class StatusChange(_Model):
    """A pod whose connection status changed (ok -> unreachable, timeout -> ok, ...)."""

    host: str
    before: HostStatus
    after: HostStatus
    reason: Redacted | None = None


class VersionChange(_Model):
    """A component (torch, the NVIDIA driver, a package) whose version changed on a pod."""

    host: str
    component: str
    before: str
    after: str


class Changes(_Model):
    """What differs from an earlier run; every list sorted by pod, then check or component."""

    since: str  # generated_at of the earlier run
    new: list[FindingChange] = Field(default_factory=list)
    cleared: list[FindingChange] = Field(default_factory=list)
    appeared: list[str] = Field(default_factory=list)
    vanished: list[str] = Field(default_factory=list)
    status: list[StatusChange] = Field(default_factory=list)
    versions: list[VersionChange] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.new or self.cleared or self.appeared or self.vanished or self.status or self.versions)


class AppliedFile(_Model):
    """A policy or baseline file a run applied, as it was then."""

    path: str
    sha256: str


class Report(_Model):
    schema_version: int = SCHEMA_VERSION
    tool_version: str
    kind: str = "fleet"  # "doctor", "fleet", "dataset" or "watch"
    generated_at: str
    hosts: list[HostReport] = Field(default_factory=list)
    sources: list[SourceStatus] = Field(default_factory=list)
    drift: list[DriftRow] = Field(default_factory=list)
    summary: Summary = Field(default_factory=Summary)
    # Options that shape the verdict, recorded so a saved report re-renders the same.
    fail_on: Severity = Severity.BLOCK
    allow_unreachable: bool = False
    # Stopped (Ctrl-C) before every pod answered: the pods still in flight are cancelled, and
    # the verdict is INTERRUPTED, whatever the pods checked by then say.
    interrupted: bool = False
    # Set with `fleet check --history DIR`: what differs from the last run there.
    changes: Changes | None = None
    policy: AppliedFile | None = None
    baseline: AppliedFile | None = None


# ---------------------------------------------------------------- fleet fix and doctor --fix


class StepRecord(_Model):
    check: str
    subject: str | None = None
    run: str
    on: StepPlace
    kind: StepKind
    # planned (a plan: it would run), ran, failed, timeout, skipped
    status: str
    exit: int | None = None
    duration_s: float | None = None
    output_tail: Redacted | None = None
    # Why it was skipped, or why it failed without an exit status.
    reason: Redacted | None = None


class FindingResult(_Model):
    check: str
    subject: str | None = None
    before: Severity | None = None
    # None: gone after the re-probe (or not re-probed: see outcome).
    after: Severity | None = None
    # fixed, still_failing, failed, skipped, planned (a plan), new (appeared after the steps)
    outcome: str
    reason: Redacted | None = None
    output_tail: Redacted | None = None


class FixHost(_Model):
    name: str
    # The pod's status before (and, where it was re-probed, after); a pod not checked has no results.
    status: HostStatus = HostStatus.OK
    reason: Redacted | None = None
    # Why no step runs on this pod at all (GPU memory held by other processes).
    refused: str | None = None
    # Every name of this pod when the targets name it more than once: its steps ran once, under
    # the first of them, and each name's results come from its own re-probe.
    same_pod: list[str] = Field(default_factory=list)
    steps: list[StepRecord] = Field(default_factory=list)
    results: list[FindingResult] = Field(default_factory=list)


class FixSummary(_Model):
    fixed: int = 0
    still_failing: int = 0
    failed: int = 0
    skipped: int = 0
    planned: int = 0
    new: int = 0
    # Pods that could not be checked (before) or re-probed (after).
    not_checked: int = 0


class FixReport(_Model):
    schema_version: int = SCHEMA_VERSION
    tool_version: str
    kind: str = "fix"
    generated_at: str
    # False: a plan, nothing was run.
    applied: bool = False
    allow_disruptive: bool = False
    interrupted: bool = False
    hosts: list[FixHost] = Field(default_factory=list)
    summary: FixSummary = Field(default_factory=FixSummary)

    @property
    def step_count(self) -> int:
        """Steps to run: a pod's once, however many names it has."""
        return sum(1 for h in self.hosts if acts(h) for s in h.steps if s.status == "planned")

    def exit_code(self) -> int:
        """0 when nothing is left to do (a plan) or every finding selected is fixed; 1 otherwise."""
        s = self.summary
        if self.applied:
            return 0 if not (s.still_failing or s.failed or s.skipped or s.new or s.not_checked) else 1
        return 0 if not (s.planned or s.skipped or s.not_checked) else 1


def acts(host: FixHost) -> bool:
    """Whether this name's steps run: a pod named more than once runs them under its first name."""
    return not host.same_pod or host.same_pod[0] == host.name


# ---------------------------------------------------------------- fleet release

RELEASE_OUTCOMES = ("would_release", "released", "already_stopped", "gone", "changed", "refused", "failed")


class ReleasePod(_Model):
    """One pod `fleet release` selected: what condemns it, what it does or would do, and how that went."""

    name: str
    provider: str | None = None
    pod_id: str | None = None
    machine_id: str | None = None
    # "stop" or "terminate"; None where no action applies (refused).
    action: str | None = None
    # Check ids of the findings that select it, and "unreachable" for --unreachable-runs.
    selected_by: list[str] = Field(default_factory=list)
    cost_per_hour: float | None = None
    # One of RELEASE_OUTCOMES.
    outcome: str
    # The exact API call (dry run), the provider's answer, or why it was refused or failed.
    detail: Redacted = ""
    # "check: message" of each condemning finding, for the terminal (not part of the JSON).
    reasons: list[str] = Field(default_factory=list, exclude=True)


class ReleaseReport(_Model):
    """What `fleet release --format json` prints."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "release"
    dry_run: bool = True
    pods: list[ReleasePod] = Field(default_factory=list)


class NodeAction(_Model):
    """One Slurm node `fleet drain` or `fleet resume` considered: how it stood, what was
    (or would be) run, and how that went."""

    name: str
    # "drain" or "resume".
    action: str
    # drain: the check ids of the machine faults; resume: the drain reason being lifted.
    selected_by: list[str] = Field(default_factory=list)
    # The node's Slurm state and reason when read before acting.
    state: str | None = None
    reason: str | None = None
    # planned, drained, resumed, kept_drained, already_drained, not_drained, left_alone, gone, failed.
    outcome: str
    # The exact commands, as a shell would take them (the dry run's plan).
    commands: list[str] = Field(default_factory=list)
    detail: str = ""
    # "check: message" of each fault, for the terminal (not part of the JSON).
    reasons: list[str] = Field(default_factory=list, exclude=True)


class NodeActionReport(_Model):
    """What `fleet drain --format json` and `fleet resume --format json` print."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "drain"
    dry_run: bool = True
    nodes: list[NodeAction] = Field(default_factory=list)


# ---------------------------------------------------------------- the host ledger


class PerfFigure(_Model):
    """One perf check's figure for a machine, beside the median of that run's pods with its GPU model."""

    value: float
    unit: str
    fleet_median: float
    # Measured pods with that GPU model in the run (the machine's included).
    pods: int
    share: float | None = None
    at: str


class DigestFinding(_Model):
    """A blocker or warning of one pod in one saved run, as the history views use it."""

    check: str
    severity: Severity
    remedy: Remedy | None = None
    key: str | None = None


class PodDigest(_Model):
    """One pod of one saved run, without its facts: what `report history` and `hosts` read."""

    name: str
    status: HostStatus
    reason: str | None = None
    provider: ProviderInfo | None = None
    # Its blockers, then its warnings.
    findings: list[DigestFinding] = Field(default_factory=list)
    gpu_name: str | None = None
    # The code of the last Xid in the pod's kernel log.
    last_xid: int | None = None
    # Perf check -> its figure beside the run's median for the pod's GPU model.
    perf: dict[str, PerfFigure] = Field(default_factory=dict)

    @property
    def verdict(self) -> HostVerdict:
        if self.status is not HostStatus.OK:
            return HostVerdict.NOT_CHECKED
        if any(f.severity is Severity.BLOCK for f in self.findings):
            return HostVerdict.BLOCKED
        return HostVerdict.WARNINGS if self.findings else HostVerdict.READY


class RunDigestFile(_Model):
    """A saved run's digest (DIR/<run>.digest beside DIR/<run>.json): its summary and its
    pods without their facts, a few KB where the run is megabytes. `run_size` and
    `run_mtime_ns` name the run file it was made from: a digest that no longer matches is
    made again from the run."""

    digest_version: Literal[1] = 1
    run_size: int = 0
    run_mtime_ns: int = 0
    generated_at: str
    fail_on: Severity = Severity.BLOCK
    summary: Summary
    changes: Changes | None = None
    pods: list[PodDigest] = Field(default_factory=list)


class LedgerMachine(_Model):
    """One physical machine seen in a history of fleet runs (`computefence hosts`)."""

    provider: str
    # The provider's machine id; the pod id where the provider names no machine (Lambda).
    machine_id: str
    host_id: str | None = None
    gpu_model: str | None = None
    runs: int = 0
    blocked_runs: int = 0
    # Runs in which a pod on it could not be checked (unreachable, timeout, ...).
    unanswered_runs: int = 0
    # Check id -> runs in which it blocked a pod on this machine.
    checks: dict[str, int] = Field(default_factory=dict)
    # Runs in which a `replace` check blocked it, and those checks.
    replace_runs: int = 0
    replace_checks: list[str] = Field(default_factory=list)
    last_xid: str | None = None
    last_seen: str | None = None
    # Perf check -> the newest measured figure.
    perf: dict[str, PerfFigure] = Field(default_factory=dict)
    # Blocked by a `replace` check in at least --min-runs runs.
    avoid: bool = False


class HostLedger(_Model):
    """What `computefence hosts --format json` prints."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "hosts"
    runs: int = 0
    min_runs: int = 1
    hosts: list[LedgerMachine] = Field(default_factory=list)
