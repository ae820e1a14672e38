"""Time the honest Triton ``maximum`` kernel of the adversarial corpus against PyTorch,
in-process, with another corpus kernel's frozen clocks in effect (as in the corpus run,
where it timed out), dumping tracebacks if it stalls. A diagnostic, not a benchmark."""

from __future__ import annotations

import faulthandler
import importlib.util
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from opbench.instrument import timing as tm  # noqa: E402  (captures clocks first)


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    faulthandler.dump_traceback_later(25, repeat=True)
    k = REPO / "tests" / "adversarial"
    maximum = load(k / "gpu_kernels/maximum__default/maximum__default_implementation.py", "mx")
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    for frozen in (False, True):
        if frozen:
            load(k / "kernels/exp__default/exp__default_implementation.py", "ex")
        t0 = time.perf_counter_ns()
        r = tm.time_pair(
            torch.ops.aten.maximum.default,
            maximum.maximum__default_kernel_impl,
            lambda: ([a, b], {}),
            "cuda",
        )
        print(
            f"frozen={frozen}: speedup {r.speedup_device:.3f} host {r.speedup_host:.3f} "
            f"reps {r.reps} flags {r.flags} elapsed {r.elapsed_ms:.0f} ms "
            f"(wall {(time.perf_counter_ns() - t0) / 1e6:.0f} ms)",
            flush=True,
        )
    faulthandler.cancel_dump_traceback_later()
    return 0


if __name__ == "__main__":
    sys.exit(main())
