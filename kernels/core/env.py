"""The environment every row records (``env``): GPU, driver, clocks, host, versions, commit."""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Iterable
from datetime import datetime, timezone


def _nvidia_smi(fields: list[str], gpu_id: str | None = None) -> dict[str, str | None]:
    """``nvidia-smi --query-gpu`` fields of GPU ``gpu_id`` (a UUID; default: the first GPU),
    in one call; every value None when nvidia-smi fails."""
    ids = [f"--id={gpu_id}"] if gpu_id else []
    try:
        out = subprocess.run(
            ["nvidia-smi", *ids, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    values = [v.strip() for v in out.strip().splitlines()[0].split(",")] if out.strip() else []
    return dict(zip(fields, values)) if len(values) == len(fields) else dict.fromkeys(fields)


def git_commit() -> str:
    """The commit of the working tree: ``ARTIFACT_GIT_COMMIT`` if set, else git, else 'unknown'."""
    if os.environ.get("ARTIFACT_GIT_COMMIT"):
        return os.environ["ARTIFACT_GIT_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cpu_model() -> str | None:
    """The host CPU's model name (``/proc/cpuinfo`` on Linux), or None."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


#: Distributions whose versions every row records (env ``anchors``; None where not installed).
ANCHORS = ("flash-linear-attention", "fla-core", "liger-kernel", "flash-qla", "tilelang", "flash-attn-4",
           "nvidia-cutlass-dsl")
#: Environment variables that choose an anchor's code path (env ``dispatch``, as set when the job starts).
DISPATCH_VARIABLES = ("FLA_FLASH_QLA", "FLA_DISABLE_BACKEND_DISPATCH", "TRITON_INTERPRET")


def _versions(dists: Iterable[str]) -> dict[str, str | None]:
    """Installed version of each distribution, None where it is not installed."""
    from importlib import metadata

    out = {}
    for dist in dists:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def environment() -> dict:
    """The environment block of every row: GPU, driver, CUDA, clocks, versions, commit, and
    ``date``, when the block was made (the job's start, UTC, ISO 8601).

    ``gpu_uuid`` and ``cuda_visible_devices`` say which GPU of a multi-GPU
    host ran the job (:mod:`kernels.core.gpulease`); clocks are that GPU's, read
    when the block is made (an idle GPU reports its idle clock). The host's
    CPU model, core count and 1-minute load average go with them: calls that
    make the GPU wait for the host are as fast as that host. ``anchors``
    holds the versions of the external implementations (:data:`ANCHORS`),
    ``dispatch`` the switches that choose their code paths
    (:data:`DISPATCH_VARIABLES`); a study that sets one does so when its
    module is imported, before this block is made.
    """
    import torch

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "git_commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host_cpu": platform.processor() or platform.machine(),
        "host_cpu_model": _cpu_model(),
        "host_cpus": os.cpu_count(),
        "host_load_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "anchors": _versions(ANCHORS),
        "dispatch": {name: os.environ.get(name) for name in DISPATCH_VARIABLES},
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        uuid = getattr(props, "uuid", None)
        uuid = None if uuid is None else str(uuid) if str(uuid).startswith("GPU-") else f"GPU-{uuid}"
        smi = _nvidia_smi(["driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm"], uuid)
        env.update(
            gpu_name=props.name,
            gpu_uuid=uuid,
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
            sm_count=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
            memory_gib=round(props.total_memory / 2**30, 1),
            driver=smi["driver_version"],
            sm_clock_mhz=smi["clocks.sm"],
            mem_clock_mhz=smi["clocks.mem"],
            max_sm_clock_mhz=smi["clocks.max.sm"],
        )
    else:
        env.update(gpu_name="cpu", driver=None)
    return env


def gpu_slug(name: str) -> str:
    """Folder name of a GPU: 'NVIDIA H200' -> 'h200', 'cpu' -> 'cpu'."""
    name = name.lower().replace("nvidia", "").strip()
    return "".join(c if c.isalnum() else "-" for c in name).strip("-") or "unknown"
