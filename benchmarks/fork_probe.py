"""Which step of the fork server's warm-up makes PyTorch mark its forks as unable to use
CUDA? Runs :func:`opbench.run.forkserver.warm_template`'s steps one by one in this fresh
process and, after each, forks a probe child that reports ``torch.cuda._is_in_bad_fork()``;
with ``--trace`` it also logs every C function called whose name mentions CUDA or a
device. A diagnostic for the GPU machine: the template must leave forks usable there.

Usage (GPU machine, after ``source benchmarks/gpu_env.sh``): python3 benchmarks/fork_probe.py --trace
"""

from __future__ import annotations

import argparse
import sys
import traceback

from opbench.run.forkserver import _forks_cannot_use_cuda


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", action="store_true")
    a = p.parse_args()
    calls: list[str] = []

    def profile(frame, event, arg) -> None:  # noqa: ANN001
        if event == "c_call":
            name = getattr(arg, "__name__", "") or ""
            if name.startswith(("_cuda", "_accelerator", "_nvml")) or "device_count" in name:
                where = "".join(traceback.format_stack(frame, limit=4)[-4:])
                calls.append(f"{name}\n{where}")

    steps = [
        ("import torch", "import torch"),
        ("import candidate", "from opbench.instrument import candidate"),
        ("import timing", "from opbench.judge import timing"),
        ("import evaluate", "from opbench.judge.evaluate import JudgeOptions"),
        ("import worker", "from opbench.run import worker"),
        ("warm up", "worker._warm_up('cpu')"),
        ("import integrity", "from opbench.instrument.integrity import Fingerprint"),
        ("settings", "from opbench.instrument import settings; settings.read()"),
        ("fingerprint", "Fingerprint()"),
    ]
    scope: dict = {}
    for name, code in steps:
        calls.clear()
        if a.trace:
            sys.setprofile(profile)
        exec(code, scope)
        sys.setprofile(None)
        bad = _forks_cannot_use_cuda()
        print(f"{name:18s} forks bad: {bad}", flush=True)
        for c in calls[:12]:
            print("   ", c.replace("\n", "\n    "))
        if bad:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
