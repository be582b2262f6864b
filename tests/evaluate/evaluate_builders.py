"""Small builders for Facts, shaped like what the probe reports on real machines."""

from __future__ import annotations

from computefence.models import (
    AccelerateFacts,
    CollectorStatus,
    EnvironmentFacts,
    EnvValue,
    Facts,
    Finding,
    GpuDevice,
    GpuFacts,
    IdentityFacts,
    MountFacts,
    PackageFacts,
    PathFacts,
    Severity,
    StorageFacts,
    TorchDevice,
    TorchFacts,
)

GB = 10**9
H100 = "NVIDIA H100 80GB HBM3"
ARCH_CU124 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]

# Mounts every container shows besides its storage.
CONTAINER_PLUMBING = [
    MountFacts(mount_point="/proc", fs_type="proc", source="proc"),
    MountFacts(mount_point="/dev", fs_type="tmpfs", source="tmpfs"),
    MountFacts(mount_point="/etc/hosts", fs_type="ext4", source="/dev/nvme0n1p1"),
    MountFacts(mount_point="/usr/bin/nvidia-smi", fs_type="ext4", source="/dev/nvme0n1p1", options=["ro"]),
]


def mount(point: str, fs_type: str, source: str | None = None, options: list[str] | None = None) -> MountFacts:
    return MountFacts(mount_point=point, fs_type=fs_type, source=source or fs_type, options=options or ["rw"])


def path(
    role: str,
    where: str,
    on: MountFacts,
    *,
    free: float = 100 * GB,
    total: float = 200 * GB,
    exists: bool = True,
    parent_exists: bool = True,
    writable: bool = True,
    origin: str | None = None,
    resolved: str | None = None,
    existing_ancestor: str | None = None,
) -> PathFacts:
    return PathFacts(
        role=role,
        path=where,
        resolved=resolved or where,
        origin=origin,
        exists=exists,
        parent_exists=parent_exists,
        existing_ancestor=existing_ancestor,
        writable=writable,
        mount_point=on.mount_point,
        fs_type=on.fs_type,
        mount_source=on.source,
        free_bytes=int(free),
        total_bytes=int(total),
    )


def env(**variables: str | dict[str, str]) -> EnvironmentFacts:
    """env(HF_HOME="/x") sets it for the process; env(HF_HOME={"container": "/x"}) per source."""
    out: dict[str, list[EnvValue]] = {}
    for name, value in variables.items():
        sources = value if isinstance(value, dict) else {"process": value}
        out[name] = [EnvValue(source=s, value=v) for s, v in sources.items()]
    return EnvironmentFacts(variables=out, container_env_readable=True)


def gpus(
    n: int = 1,
    name: str = H100,
    cap: str | None = "9.0",
    driver: str = "550.54.15",
    cuda: str = "12.4",
    used: int = 3,
    total: int = 81559,
) -> GpuFacts:
    return GpuFacts(
        nvidia_smi_path="/usr/bin/nvidia-smi",
        nvidia_smi_found=True,
        exit_code=0,
        driver_version=driver,
        cuda_version=cuda,
        gpus=[
            GpuDevice(
                index=i, name=name, uuid=f"GPU-{i:04d}", memory_total_mib=total, memory_used_mib=used, compute_cap=cap
            )
            for i in range(n)
        ],
        device_nodes=[f"/dev/nvidia{i}" for i in range(n)] + ["/dev/nvidiactl"],
    )


def torch(
    version: str = "2.4.1+cu124",
    cuda: str | None = "12.4",
    available: bool | None = True,
    count: int | None = 1,
    arch: list[str] | None = None,
    python: str = "python3",
    name: str = H100,
    cap: str = "9.0",
) -> TorchFacts:
    return TorchFacts(
        python=python,
        python_found=True,
        python_executable="/usr/bin/python3",
        python_version="3.10.12",
        importable=True,
        version=version,
        cuda_build=cuda,
        cuda_available=available,
        device_count=count,
        devices=[TorchDevice(index=i, name=name, capability=cap) for i in range(count or 0)],
        arch_list=list(ARCH_CU124 if arch is None else arch),
    )


def no_torch(python: str = "python3") -> TorchFacts:
    return TorchFacts(
        python=python,
        python_found=True,
        python_executable="/usr/bin/python3",
        python_version="3.11.4",
        importable=False,
        import_error="ModuleNotFoundError: No module named 'torch'",
    )


def runpod_pod(
    *,
    n_gpus: int = 1,
    volume: bool = True,
    hf_on_volume: bool = True,
    shm: float = 30 * GB,
    root_free: float = 12 * GB,
    volume_free: float = 80 * GB,
) -> Facts:
    """A RunPod pod: overlay container disk at /, volume disk at /workspace (unless
    volume=False), HF_HOME on the volume, healthy driver and a matching CUDA torch."""
    root = mount("/", "overlay", "overlay")
    shm_mount = mount("/dev/shm", "tmpfs", "shm")
    mounts = [root, *CONTAINER_PLUMBING, shm_mount]
    paths = [path("root", "/", root, free=root_free, total=20 * GB), path("home", "/root", root, free=root_free)]
    if volume:
        workspace = mount("/workspace", "ext4", "/dev/sdb")
        mounts.append(workspace)
        paths.append(path("workspace", "/workspace", workspace, free=volume_free, total=100 * GB))
    else:
        workspace = root
        paths.append(path("workspace", "/workspace", root, free=root_free, total=20 * GB))
    if hf_on_volume:
        hf_home = "/workspace/.cache/huggingface"
        paths.append(path("hf_cache", hf_home + "/hub", workspace, origin="HF_HOME", free=volume_free))
        environment = env(HF_HOME=hf_home)
    else:
        paths.append(path("hf_cache", "/root/.cache/huggingface/hub", root, origin="default", free=root_free))
        environment = env()
    paths.append(path("shm", "/dev/shm", shm_mount, free=shm, total=shm))
    return Facts(
        collectors={
            name: CollectorStatus()
            for name in ("identity", "environment", "storage", "gpu", "packages", "torch", "accelerate")
        },
        identity=IdentityFacts(
            hostname="a1b2c3d4e5f6",
            user="root",
            uid=0,
            home="/root",
            cwd="/root",
            mem_total_bytes=240 * GB,
            provider_hints={"RUNPOD_POD_ID": "a1b2c3d4e5f6"},
        ),
        environment=environment,
        storage=StorageFacts(mounts=mounts, paths=paths),
        gpu=gpus(n_gpus),
        torch=torch(count=n_gpus),
        packages=PackageFacts(
            python="python3",
            python_found=True,
            versions={"torch": "2.4.1+cu124", "transformers": "4.44.2", "accelerate": "0.34.2", "peft": None},
        ),
        accelerate=AccelerateFacts(found=False, searched=["/root/.cache/huggingface/accelerate/default_config.yaml"]),
    )


def laptop() -> Facts:
    """A developer laptop: ext4 root on NVMe, no NVIDIA GPU, no torch."""
    root = mount("/", "ext4", "/dev/nvme0n1p2")
    shm_mount = mount("/dev/shm", "tmpfs", "tmpfs")
    return Facts(
        identity=IdentityFacts(hostname="laptop", user="dev", uid=1000, home="/home/dev", mem_total_bytes=16 * GB),
        storage=StorageFacts(
            mounts=[
                root,
                mount("/proc", "proc"),
                mount("/run", "tmpfs"),
                shm_mount,
                mount("/boot/efi", "vfat", "/dev/nvme0n1p1"),
            ],
            paths=[
                path("root", "/", root, free=3 * GB),
                path("home", "/home/dev", root, free=3 * GB),
                path(
                    "hf_cache",
                    "/home/dev/.cache/huggingface/hub",
                    root,
                    origin="default",
                    exists=False,
                    existing_ancestor="/home/dev/.cache",
                    free=3 * GB,
                ),
                path("shm", "/dev/shm", shm_mount, total=8 * GB),
            ],
        ),
        gpu=GpuFacts(),
        torch=no_torch(),
        packages=PackageFacts(python="python3", python_found=True, versions={"torch": None, "transformers": None}),
    )


def only(findings: list[Finding], check: str) -> Finding:
    """The one finding of `check`; fails the test when there is not exactly one."""
    found = [f for f in findings if f.check == check]
    assert len(found) == 1, f"expected one {check} finding, got {found}"
    return found[0]


def of(findings: list[Finding], check: str) -> list[Finding]:
    return [f for f in findings if f.check == check]


def problems(findings: list[Finding]) -> list[Finding]:
    """Warnings and blockers."""
    return [f for f in findings if f.severity in (Severity.WARN, Severity.BLOCK)]
