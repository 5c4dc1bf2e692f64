"""What the GPU did while a case was measured: each row's ``gpu_state`` (:func:`recorded`).

GPUs of one model differ by several per cent (Sinha et al., "Not All GPUs Are Created Equal", SC22:
about 8 % on average, up to 22 %), through their clocks, power limit and temperature. So that a
row's speed can be explained by its GPU, :func:`recorded` reads NVML (NVIDIA's management library,
through ``nvidia-ml-py``) just before a case is measured and just after its timed repetitions
end, and keeps NVML's counters between the two:

``before``, ``after``
    one snapshot each (:func:`snapshot`): ``sm_clock_mhz`` and ``mem_clock_mhz`` (the clocks at
    that instant: ``after`` is read within milliseconds of the last timed repetition, while the
    GPU is still at its working clock; ``before`` is most often an idle GPU's), ``power_w`` (the
    board's power draw as NVML averages it over about one second), ``temperature_c`` (the GPU
    die) and ``clock_event_reasons`` (why the clocks are below their maximum: NVML's
    clock-event, formerly "throttle", reasons by name; ``gpu_idle`` on an idle GPU).
``seconds``, ``energy_j``, ``mean_power_w``
    the wall time from ``before`` to ``after`` (the case's setup, warm-up and timing), the
    board's energy in that time (NVML's energy counter) and their ratio.
``power_capped_s``, ``thermal_capped_s``
    how long in that time the clocks were held down by the power limit, and by temperature
    (NVML's violation counters for the power and thermal policies).
``power_limit_w``, ``max_sm_clock_mhz``, ``max_mem_clock_mhz``, ``ecc``, ``memory_bytes``, ``driver``
    the GPU's settings: its enforced power limit, the highest clocks it allows, whether ECC is
    on, its memory and the driver.

A value that NVML does not give on a GPU is None; a row whose GPU NVML cannot read at all has
``{"error": "..."}``; a row measured without CUDA (the smoke run on the CPU) has None. Rows measured
before this module existed have no ``gpu_state``: the tables read them "not recorded".

Recording is not measuring: nothing here runs while a case is timed (both reads are outside
:func:`kernels.core.harness.measure_case`), and nothing here changes a number. So this module, and
the runner's ``recorded(...)`` around a measurement, are left out of every study's fingerprint
(:data:`kernels.core.fingerprint.RECORD_ONLY`): what is recorded can grow without making
committed rows stale (``docs/measuring.md``).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

#: NVML clock-event reasons by name (``nvmlClocksEventReason*`` bits of nvidia-ml-py).
REASONS = {
    "gpu_idle": "nvmlClocksEventReasonGpuIdle",
    "applications_clocks": "nvmlClocksEventReasonApplicationsClocksSetting",
    "sw_power_cap": "nvmlClocksEventReasonSwPowerCap",
    "hw_slowdown": "nvmlClocksEventReasonHwSlowdown",
    "sync_boost": "nvmlClocksEventReasonSyncBoost",
    "sw_thermal_slowdown": "nvmlClocksEventReasonSwThermalSlowdown",
    "hw_thermal_slowdown": "nvmlClocksEventReasonHwThermalSlowdown",
    "hw_power_brake_slowdown": "nvmlClocksEventReasonHwPowerBrakeSlowdown",
    "display_clocks": "nvmlClocksEventReasonDisplayClockSetting",
}


def _value(read: Callable[[], Any], scale: float = 1.0, digits: int = 1) -> float | int | None:
    """``read()`` scaled and rounded, or None where NVML does not give it on this GPU."""
    import pynvml

    try:
        value = read()
    except pynvml.NVMLError:
        return None
    return round(value * scale, digits) if scale != 1.0 else value


@functools.cache
def _handle(uuid: str):
    """NVML's handle of the GPU ``uuid`` (``GPU-...``), NVML started once per process."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml.nvmlDeviceGetHandleByUUID(uuid)


def _uuid() -> str:
    """The UUID of the current CUDA device (the job's leased GPU), as ``GPU-`` and hex digits."""
    import torch

    uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"


def snapshot(handle) -> dict:
    """The GPU's state now: clocks (MHz), power draw (W), temperature (°C), the clock-event reasons
    (names of :data:`REASONS`) and the counters :func:`recorded` takes differences of
    (``energy_mj``; ``power_violation_ns`` and ``thermal_violation_ns``, cumulative)."""
    import pynvml as n

    mask = _value(lambda: n.nvmlDeviceGetCurrentClocksEventReasons(handle))
    return {
        "sm_clock_mhz": _value(lambda: n.nvmlDeviceGetClockInfo(handle, n.NVML_CLOCK_SM)),
        "mem_clock_mhz": _value(lambda: n.nvmlDeviceGetClockInfo(handle, n.NVML_CLOCK_MEM)),
        "power_w": _value(lambda: n.nvmlDeviceGetPowerUsage(handle), 1e-3),
        "temperature_c": _value(lambda: n.nvmlDeviceGetTemperature(handle, n.NVML_TEMPERATURE_GPU)),
        "clock_event_reasons": None if mask is None else
        sorted(name for name, bit in REASONS.items() if mask & getattr(n, bit, 0)),
        "energy_mj": _value(lambda: n.nvmlDeviceGetTotalEnergyConsumption(handle)),
        "power_violation_ns": _value(
            lambda: n.nvmlDeviceGetViolationStatus(handle, n.NVML_PERF_POLICY_POWER).violationTime),
        "thermal_violation_ns": _value(
            lambda: n.nvmlDeviceGetViolationStatus(handle, n.NVML_PERF_POLICY_THERMAL).violationTime),
    }


def settings(handle) -> dict:
    """The GPU's settings: enforced power limit (W), maximum clocks (MHz), ECC on (bool; None where
    the GPU has none), memory (bytes) and driver version."""
    import pynvml as n

    ecc = _value(lambda: n.nvmlDeviceGetEccMode(handle))
    return {
        "power_limit_w": _value(lambda: n.nvmlDeviceGetEnforcedPowerLimit(handle), 1e-3),
        "max_sm_clock_mhz": _value(lambda: n.nvmlDeviceGetMaxClockInfo(handle, n.NVML_CLOCK_SM)),
        "max_mem_clock_mhz": _value(lambda: n.nvmlDeviceGetMaxClockInfo(handle, n.NVML_CLOCK_MEM)),
        "ecc": None if ecc is None else bool(ecc[0]),
        "memory_bytes": _value(lambda: n.nvmlDeviceGetMemoryInfo(handle).total),
        "driver": _value(n.nvmlSystemGetDriverVersion),
    }


def _difference(before: dict, after: dict, key: str, scale: float) -> float | None:
    """``after[key] - before[key]`` scaled (a counter's growth), None where either is missing."""
    if before.get(key) is None or after.get(key) is None:
        return None
    return round((after[key] - before[key]) * scale, 3)


def state_between(before: dict, after: dict, seconds: float, gpu: dict) -> dict:
    """The ``gpu_state`` of a case from its two :func:`snapshot` s, the ``seconds`` between them and
    the GPU's :func:`settings` ``gpu`` (the module docstring gives the fields)."""
    counters = ("energy_mj", "power_violation_ns", "thermal_violation_ns")
    energy_j = _difference(before, after, "energy_mj", 1e-3)
    return {
        "before": {k: v for k, v in before.items() if k not in counters},
        "after": {k: v for k, v in after.items() if k not in counters},
        "seconds": round(seconds, 3),
        "energy_j": energy_j,
        "mean_power_w": None if energy_j is None or seconds <= 0 else round(energy_j / seconds, 1),
        "power_capped_s": _difference(before, after, "power_violation_ns", 1e-9),
        "thermal_capped_s": _difference(before, after, "thermal_violation_ns", 1e-9),
        **gpu,
    }


def recorded(measure: Callable[..., dict], *args, **kwargs) -> dict:
    """``measure(*args, **kwargs)`` (a row), with the row's ``gpu_state``: what the current CUDA
    device did from just before the call to just after it (the module docstring gives the fields).

    Args:
        measure: a function returning one row (a dict), as
            :func:`kernels.core.harness.measure_case` and
            :func:`kernels.core.children.measure_in_child` do.
    Returns the row, with ``gpu_state`` None without CUDA and ``{"error": "<why>"}`` where NVML
    cannot read the GPU (nvidia-ml-py or NVML's library missing, no such device). Never raises for
    the record: a GPU that cannot be read costs its record, never the measurement.
    """
    import torch

    if not torch.cuda.is_available():
        row = measure(*args, **kwargs)
        row["gpu_state"] = None
        return row
    try:
        import pynvml
    except ImportError:
        row = measure(*args, **kwargs)
        row["gpu_state"] = {"error": "nvidia-ml-py is not installed (pip install nvidia-ml-py)"}
        return row
    try:
        handle = _handle(_uuid())
        gpu, before = settings(handle), snapshot(handle)
    except Exception as exc:  # noqa: BLE001 - NVML's errors, or no CUDA device to name: a lost record
        row = measure(*args, **kwargs)
        row["gpu_state"] = {"error": f"NVML: {exc}" if isinstance(exc, pynvml.NVMLError)
                            else f"{type(exc).__name__}: {exc}"[:500]}
        return row
    t0 = time.perf_counter()
    row = measure(*args, **kwargs)
    row["gpu_state"] = state_between(before, snapshot(handle), time.perf_counter() - t0, gpu)
    return row
