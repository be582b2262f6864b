"""Whatever a pod reports, the evaluator answers with findings, never an exception."""

from __future__ import annotations

from evaluate_builders import runpod_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from computefence.evaluate import CHECK_IDS, evaluate_host
from computefence.models import (
    AccelerateFacts,
    CheckOptions,
    GpuDevice,
    GpuFacts,
    MountFacts,
    PathFacts,
    ProviderInfo,
    StorageFacts,
)

text = st.text(max_size=12)
maybe_text = st.none() | text | st.sampled_from(["12.4", "9.0", "sm_90", "2.4.1+cu124", "11", ".", "+cpu"])
fs_types = st.sampled_from(["overlay", "ext4", "xfs", "tmpfs", "nfs4", "fuse.mfs", "proc", "virtiofs", "weird"])
points = st.sampled_from(
    ["/", "/workspace", "/root", "/rootfs", "/tmp", "/tmp/x", "/dev/shm", "/lambda/nfs/a", "/etc/hosts"]
)


@st.composite
def facts_variants(draw):
    mounts = draw(
        st.lists(
            st.builds(
                MountFacts,
                mount_point=points,
                fs_type=fs_types,
                source=maybe_text,
                options=st.lists(st.sampled_from(["rw", "ro"]), max_size=2),
            ),
            max_size=5,
        )
    )
    paths = draw(
        st.lists(
            st.builds(
                PathFacts,
                role=st.sampled_from(["root", "home", "hf_cache", "output_dir", "workspace", "shm", "extra"]),
                path=points,
                resolved=st.none() | points,
                origin=maybe_text,
                exists=st.booleans(),
                parent_exists=st.booleans(),
                writable=st.booleans(),
                mount_point=st.none() | points,
                fs_type=st.none() | fs_types,
                free_bytes=st.none() | st.integers(0, 10**13),
                total_bytes=st.none() | st.integers(0, 10**13),
            ),
            max_size=6,
        )
    )
    gpu = GpuFacts(
        nvidia_smi_found=draw(st.booleans()),
        exit_code=draw(st.none() | st.integers(-1, 255)),
        timed_out=draw(st.booleans()),
        driver_version=draw(maybe_text),
        cuda_version=draw(maybe_text),
        gpus=draw(
            st.lists(
                st.builds(
                    GpuDevice,
                    index=st.integers(0, 7),
                    name=text,
                    compute_cap=maybe_text,
                    memory_used_mib=st.none() | st.integers(0, 10**6),
                ),
                max_size=3,
            )
        ),
        device_nodes=draw(st.lists(text, max_size=2)),
    )
    base = runpod_pod()
    torch = base.torch.model_copy(
        update={
            "importable": draw(st.booleans()),
            "version": draw(maybe_text),
            "cuda_build": draw(maybe_text),
            "cuda_available": draw(st.none() | st.booleans()),
            "device_count": draw(st.none() | st.integers(0, 8)),
            "arch_list": draw(st.lists(maybe_text.filter(bool), max_size=3)),
            "python_found": draw(st.booleans()),
        }
    )
    accelerate = AccelerateFacts(
        found=draw(st.booleans()),
        path=draw(maybe_text),
        config={
            "num_processes": draw(st.none() | st.integers(-2, 16) | text),
            "num_machines": draw(st.none() | st.integers(-1, 4)),
            "distributed_type": draw(maybe_text),
            "gpu_ids": draw(maybe_text),
        },
    )
    return base.model_copy(
        update={
            "storage": StorageFacts(mounts=mounts, paths=paths),
            "gpu": gpu,
            "torch": torch,
            "accelerate": accelerate,
        }
    )


providers = st.none() | st.builds(
    ProviderInfo,
    provider=st.sampled_from(["runpod", "vast", "lambda", "other"]),
    pod_id=text,
    volume_mount_path=st.none() | points,
    volume_gb=st.none() | st.floats(0, 100),
    persistent_paths=st.lists(points, max_size=2),
    gpu_count=st.none() | st.integers(0, 8),
    network_volume=st.none() | st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(facts=facts_variants(), provider=providers, output_dir=st.none() | points, expect_gpu=st.booleans())
def test_any_facts_give_known_single_line_findings(facts, provider, output_dir, expect_gpu):
    findings = evaluate_host(facts, CheckOptions(output_dir=output_dir, expect_gpu=expect_gpu), provider)
    for finding in findings:
        assert finding.check in CHECK_IDS
        assert "\n" not in finding.message
        if finding.severity.value in ("warn", "block"):
            assert finding.fix and not any("\n" in text for text in [*finding.fix.commands, finding.fix.advice or ""])
        else:
            assert finding.fix is None
