"""Child processes of the measurement: a case prepared or measured in a fresh Python process.

:func:`in_child` runs :func:`_child_main` (``python -m kernels.core.children``) on one request: a case to
measure (:func:`measure_in_child`, for the implementations a study lists in ``ISOLATE``, whose failure
can poison a CUDA context) or to prepare only (``prepare_only``: :mod:`kernels.core.ahead`'s compile-ahead
children, whose Triton autotuners compile every config without timing it).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
from typing import Any, Callable

from kernels.core.harness import _row, measure_case, prepare_case

log = logging.getLogger("kernels.core.children")


def in_child(request: dict, env: dict | None = None, timeout: float | None = None) -> tuple[dict | None, str]:
    """Run :func:`_child_main` on ``request`` in a fresh Python process (``env`` added to this
    process's environment): ``(its JSON answer, "")``, or ``(None, what went wrong)`` (exit
    status and the end of stderr) if it crashed or ran past ``timeout`` seconds (then it is
    killed). The answer is the child's last line that is a JSON object with a ``status`` (a row
    or :func:`prepare_case`'s answer): a library's log line that starts with "{" is not one."""
    try:
        proc = subprocess.run([sys.executable, "-m", "kernels.core.children"], input=json.dumps(request),
                              capture_output=True, text=True, env={**os.environ, **(env or {})},
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"child process killed after its {timeout:g} s limit"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(answer, dict) and "status" in answer:
                return answer, ""
    return None, f"child process exited with {proc.returncode}: {proc.stderr[-1500:]}"


def measure_in_child(study: str, impl: str, case: dict, timing: dict) -> dict:
    """Run :func:`measure_case` in a fresh Python process; a crash becomes an error row."""
    row, crash = in_child({"study": study, "impl": impl, "case": case, "timing": timing})
    if row is not None:
        return row
    mod = importlib.import_module(f"kernels.{study}.study")
    return _row(mod.STUDY, impl, case, status="error", error=crash)


def _run_once(fn: Callable[[], Any], quantiles=None, **_) -> list[float] | float:
    """A benchmarker that runs ``fn`` once (compiling it) and reports 0 ms, in the shape
    Triton's autotuner expects (one value per quantile)."""
    fn()
    return [0.0] * len(quantiles) if quantiles else 0.0


def _compile_only_autotuning() -> None:
    """Make Triton's autotuner compile and launch each config once instead of timing it.

    For a :func:`compile_ahead` child, whose picks are never used: the timed pass autotunes
    again in its own process. Triton's ``Autotuner.do_bench`` asks the active driver for its
    benchmarker (Triton 3.x); where that fails the child times as usual.
    """
    try:
        from triton.runtime import driver

        driver.active.get_benchmarker = lambda: _run_once
    except Exception as exc:  # noqa: BLE001 - the child then autotunes as usual
        log.debug("compile-only autotuning not set: %s", exc)


def _child_main() -> None:
    import torch

    req = json.loads(sys.stdin.read())
    mod = importlib.import_module(f"kernels.{req['study']}.study")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if req.get("prepare_only"):
        if device.type == "cuda":
            _compile_only_autotuning()
        answer = prepare_case(mod, req["impl"], req["case"], device)
    else:
        answer = measure_case(mod, req["impl"], req["case"], device, req["timing"])
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


if __name__ == "__main__":
    # run as a child (python -m kernels.core.children): use the imported module's functions, whose
    # Unsupported is the class the studies raise (this file's own __main__ copy is another class)
    from kernels.core.children import _child_main as child_main

    child_main()
