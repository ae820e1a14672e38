"""The Python cost of one depthwise ``conv.convolution`` call, its launches stubbed out:
what the host spends around the kernel (geometry, plan, weight read, padding decision),
on the CPU machine, no GPU. Best of 5 windows of 1,000 calls, in microseconds, for three
traced shapes (NCHW 3x3, NCHW 5x5 with padded planes, channels-last 7x7; two images each:
the sizes do not matter with the launches stubbed, except the CPU copies a CPU tensor
really makes).

Usage (compare two trees in separate processes, alternating, and take each one's best):
    python benchmarks/probes/depthwise_host_path.py --src OLD/src
    python benchmarks/probes/depthwise_host_path.py --src src
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="src", help="the source tree to import opbench from")
    ap.add_argument("--calls", type=int, default=1000)
    ns = ap.parse_args()
    sys.path.insert(0, ns.src)
    import torch

    from opbench.kernels._lib import conv, conv_depthwise

    conv._depthwise = lambda grid, args, **k: None
    conv_depthwise._pad = lambda grid, args, **k: None
    cases = {
        "nchw 3x3": (torch.randn(2, 728, 19, 19), torch.randn(728, 1, 3, 3), None,
                     ([1, 1], [1, 1], [1, 1], False, [0, 0], 728)),
        "nchw 5x5 padded": (torch.randn(2, 336, 21, 21), torch.randn(336, 1, 5, 5), None,
                            ([1, 1], [2, 2], [1, 1], False, [0, 0], 336)),
        "channels-last 7x7": (torch.randn(2, 512, 14, 14).to(memory_format=torch.channels_last),
                              torch.randn(512, 1, 7, 7), torch.randn(512),
                              ([1, 1], [3, 3], [1, 1], False, [0, 0], 512)),
    }  # fmt: skip
    out = {}
    for name, (x, w, b, rest) in cases.items():
        for _ in range(200):
            conv.convolution(x, w, b, *rest)
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(ns.calls):
                conv.convolution(x, w, b, *rest)
            best = min(best, (time.perf_counter() - t) / ns.calls * 1e6)
        out[name] = round(best, 1)
    print(out)


if __name__ == "__main__":
    main()
