"""What machine a run ran on, for its record (``summary.json``'s ``env``): versions,
the CPU model, the GPU, CUDA and cuDNN, the driver, and the GPUs' clocks, temperature
and power (read at the start and the end of a run: clocks throttle with heat). The
backend settings the workers read back are :mod:`opbench.instrument.settings`'.
"""

from __future__ import annotations

import os
import platform
from typing import Any

__all__ = ["cpu_model", "environment", "gpu_state"]


def environment(device: str) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:
        env["triton"] = None
    env["cpu"] = cpu_model()
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(torch.device(device))
        env["cuda"] = torch.version.cuda
        env["cudnn"] = (
            torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        )
        env["gpu_count"] = torch.cuda.device_count()
        try:
            import subprocess

            env["driver"] = (
                subprocess.run(
                    ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                )
                .stdout.strip()
                .splitlines()[0]
            )
        except Exception:
            env["driver"] = None
    else:
        env["gpu"] = None
    from opbench.run.judge_template import TEMPLATE_ENV

    # what the user set, not what opbench set for its own processes
    env["flags"] = {k: v for k, v in os.environ.items()
                    if k.startswith(("OPBENCH_", "TRITON_")) and k != TEMPLATE_ENV}  # fmt: skip
    return env


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


#: nvidia-smi fields read at the start and the end of a run (clocks throttle with heat).
_GPU_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw")


def gpu_state(device: str) -> list[dict[str, str]] | None:
    """Clocks, temperature and power of every visible GPU now (nvidia-smi), None on a
    CPU run or where nvidia-smi is missing."""
    if not device.startswith("cuda"):
        return None
    import subprocess

    try:
        text = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(_GPU_FIELDS)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [[v.strip() for v in line.split(",")] for line in text.strip().splitlines()]
    return [dict(zip(_GPU_FIELDS, r)) for r in rows if len(r) == len(_GPU_FIELDS)] or None
