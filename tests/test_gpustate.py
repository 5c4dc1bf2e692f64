"""Each row's ``gpu_state`` (kernels.core.gpustate): NVML read before and after a case, the counters'
growth between, a GPU NVML cannot read recorded as an error and never a lost row; checked on a CPU
with a stand-in NVML (the real one runs in the GPU suite)."""

import json
import sys
import types
from pathlib import Path

import pytest

from kernels.core import gpustate
from kernels.core.checks import validator
from kernels.paper import rows as rows_mod

ROOT = Path(__file__).resolve().parent.parent


class FakeNvml(types.ModuleType):
    """nvidia-ml-py's calls that gpustate makes, on one GPU whose counters move on each read."""

    class NVMLError(Exception):
        pass

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 2, 0
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1
    nvmlClocksEventReasonGpuIdle, nvmlClocksEventReasonSwPowerCap = 0x1, 0x4

    def __init__(self, reasons=0x4, ecc_error=False):
        super().__init__("pynvml")
        self.reads, self.reasons, self.ecc_error = 0, reasons, ecc_error

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return uuid

    def nvmlDeviceGetClockInfo(self, h, clock):
        return 1755 if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetPowerUsage(self, h):
        return 512_345

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 48

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.reasons

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.reads += 1
        return 1_000_000 + 250_000 * (self.reads - 1)  # mJ: 250 J between two reads

    def nvmlDeviceGetViolationStatus(self, h, policy):
        return types.SimpleNamespace(violationTime=(3_000_000_000 if policy == 0 else 0) * self.reads)

    def nvmlDeviceGetEccMode(self, h):
        if self.ecc_error:
            raise self.NVMLError("Not Supported")
        return (1, 1)

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return 1980 if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(total=85_520_809_984)

    def nvmlSystemGetDriverVersion(self):
        return "580.95.05"


@pytest.fixture
def on_a_gpu(monkeypatch):
    """torch sees a CUDA device whose UUID is GPU-test; NVML is the stand-in returned."""
    import torch

    def install(nvml):
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(gpustate, "_uuid", lambda: "GPU-test")
        gpustate._handle.cache_clear()
        return nvml

    yield install
    gpustate._handle.cache_clear()


def _row():
    """A row as the harness returns it (its fields do not matter here)."""
    return {"study": "toy", "impl": "slow", "status": "ok"}


def test_a_case_records_the_gpu_before_and_after_and_what_the_counters_grew(on_a_gpu):
    on_a_gpu(FakeNvml())
    calls = []
    row = gpustate.recorded(lambda a, b=0: calls.append((a, b)) or _row(), 1, b=2)
    assert calls == [(1, 2)]
    state = row["gpu_state"]
    assert state["before"] == state["after"] == {
        "sm_clock_mhz": 1755, "mem_clock_mhz": 2619, "power_w": 512.3, "temperature_c": 48,
        "clock_event_reasons": ["sw_power_cap"]}
    assert state["energy_j"] == 250.0 and state["power_capped_s"] == 3.0 and state["thermal_capped_s"] == 0.0
    assert state["seconds"] >= 0 and (state["mean_power_w"] is None or state["mean_power_w"] > 0)
    assert (state["power_limit_w"], state["max_sm_clock_mhz"], state["ecc"], state["driver"]) == \
        (700.0, 1980, True, "580.95.05")


def test_a_value_nvml_does_not_give_is_null_and_the_row_fits_the_schema(on_a_gpu):
    on_a_gpu(FakeNvml(reasons=0x1, ecc_error=True))
    row = gpustate.recorded(_row)
    assert row["gpu_state"]["ecc"] is None and row["gpu_state"]["before"]["clock_event_reasons"] == ["gpu_idle"]
    committed = json.loads(next((ROOT / "data/raw/h200/tensorcore").glob("*.jsonl")).open().readline())
    check = validator(rows_mod.row_schema("tensorcore"))
    for state in (row["gpu_state"], {"error": "NVML: Not Found"}, None):
        assert not list(check.iter_errors({**committed, "gpu_state": state})), state
    assert list(check.iter_errors({**committed, "gpu_state": {**row["gpu_state"], "clock": 1}}))


def test_a_gpu_nvml_cannot_read_costs_the_record_never_the_row(on_a_gpu):
    nvml = FakeNvml()

    def fail(uuid):
        raise nvml.NVMLError("Not Found")

    nvml.nvmlDeviceGetHandleByUUID = fail
    on_a_gpu(nvml)
    assert gpustate.recorded(_row) == {**_row(), "gpu_state": {"error": "NVML: Not Found"}}


def test_without_cuda_there_is_nothing_to_record():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    assert gpustate.recorded(_row) == {**_row(), "gpu_state": None}


def test_gpu_state_is_a_measured_field_not_part_of_a_case():
    assert "gpu_state" in rows_mod.measured_fields("gdn")


@pytest.mark.gpu
def test_the_gpu_of_this_host_is_read():
    state = gpustate.recorded(_row)["gpu_state"]
    assert "error" not in state, state
    assert state["after"]["sm_clock_mhz"] > 0 and state["after"]["temperature_c"] > 0
    assert state["power_limit_w"] > 0 and state["memory_bytes"] > 2**30 and state["driver"]


def test_the_tidy_table_flattens_the_record_and_names_rows_without_one():
    from kernels.paper.collect import NOT_RECORDED, _gpu_state_columns

    state = {"before": {"sm_clock_mhz": 345, "clock_event_reasons": ["gpu_idle"]},
             "after": {"sm_clock_mhz": 1980, "clock_event_reasons": ["sw_power_cap", "sync_boost"]},
             "seconds": 1.5, "power_limit_w": 700.0}
    assert _gpu_state_columns(state) == {
        "gpu_state": "recorded", "gpu_state_before_sm_clock_mhz": 345,
        "gpu_state_before_clock_event_reasons": "gpu_idle", "gpu_state_after_sm_clock_mhz": 1980,
        "gpu_state_after_clock_event_reasons": "sw_power_cap sync_boost", "gpu_state_seconds": 1.5,
        "gpu_state_power_limit_w": 700.0}
    assert _gpu_state_columns(NOT_RECORDED) == {"gpu_state": "not recorded"}
    assert _gpu_state_columns(None) == {"gpu_state": "cpu"}
    assert _gpu_state_columns({"error": "NVML: Not Found"}) == {"gpu_state": "NVML: Not Found"}
