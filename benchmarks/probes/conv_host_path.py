"""The Python cost of one ``conv.convolution`` or ``conv_backward.convolution_backward`` call, its
launches stubbed out: what the host spends around the kernels (geometry, path choice,
views, plans, allocations) on the CPU machine, no GPU. Best of 5 windows of ``--calls``
calls, in microseconds, for traced shapes of the depthwise and pointwise paths (two
images each: with the launches stubbed the sizes matter only through the CPU
allocations).

Why: on an H200 the traced pointwise convolutions' backward read 160-366 us of host time
a call where eager's read 42-137 (``benchmarks/reproduce/host_profile.py --ops
convolution_backward``, 2026-11-29); here the NCHW weight gradient spent 70 us of it in
two refused ``view`` calls (PyTorch's error carries a C++ backtrace), now decided from
the strides (``conv_pointwise.merges``).

Usage (compare two trees in separate processes, alternating, and take each one's best):
    python benchmarks/probes/conv_host_path.py --src OLD/src
    python benchmarks/probes/conv_host_path.py --src src
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matmul_host_path import best_us  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="src", help="the source tree to import opbench from")
    ap.add_argument("--calls", type=int, default=1000)
    ns = ap.parse_args()
    sys.path.insert(0, ns.src)
    import torch

    from opbench.kernels._lib import launch

    launch.Launcher.__call__ = lambda self, grid, args, **k: None
    from opbench.kernels._lib import conv, conv_backward

    h = torch.float16
    cl = torch.channels_last
    unit = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    forward = {
        "depthwise nchw 3x3": (torch.randn(2, 728, 19, 19), torch.randn(728, 1, 3, 3), None,
                               ([1, 1], [1, 1], [1, 1], False, [0, 0], 728)),
        "depthwise nchw 5x5 padded": (torch.randn(2, 336, 21, 21), torch.randn(336, 1, 5, 5),
                                      None, ([1, 1], [2, 2], [1, 1], False, [0, 0], 336)),
        "depthwise channels-last 7x7": (torch.randn(2, 512, 14, 14).to(memory_format=cl),
                                        torch.randn(512, 1, 7, 7), torch.randn(512),
                                        ([1, 1], [3, 3], [1, 1], False, [0, 0], 512)),
        "pointwise nchw 336->336": (torch.randn(2, 336, 21, 21, dtype=h),
                                    torch.randn(336, 336, 1, 1, dtype=h), None, unit),
        "pointwise 1x1 images 1024->64, bias": (torch.randn(32, 1024, 1, 1, dtype=h),
                                                torch.randn(64, 1024, 1, 1, dtype=h),
                                                torch.randn(64, dtype=h), unit),
    }  # fmt: skip
    backward = {
        "pointwise nchw 336->336": ((2, 336, 21, 21), (2, 336, 21, 21), (336, 336, 1, 1),
                                    [0], [True, True, False]),
        "pointwise 1x1 images 64->1024, bias": ((32, 1024, 1, 1), (32, 64, 1, 1),
                                                (1024, 64, 1, 1), [1024], [True, True, True]),
    }  # fmt: skip
    out = {}
    for name, (x, w, b, rest) in forward.items():
        out["forward " + name] = best_us(lambda a=(x, w, b, *rest): conv.convolution(*a), ns.calls)
    for name, (go, x, w, bias_sizes, mask) in backward.items():
        args = (torch.randn(go, dtype=h), torch.randn(x, dtype=h), torch.randn(w, dtype=h),
                bias_sizes, *unit[:-1], 1, mask)  # fmt: skip
        out["backward " + name] = best_us(
            lambda a=args: conv_backward.convolution_backward(*a), ns.calls
        )
    print(out)


if __name__ == "__main__":
    main()
