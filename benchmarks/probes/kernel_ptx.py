"""What a backend kernel compiles to on Hopper, read on a machine without a GPU.

Triton compiles for any target on the CPU machine (``triton.compile`` of an
``ASTSource`` with ``GPUTarget("cuda", 90, 32)``): this script does that for one
``@triton.jit`` kernel of ``opbench.kernels._lib`` with the constexprs given, and counts
the instructions that decide a kernel's speed there: ``cp.async`` copies (pipelined,
16-byte where ``.cg``), ``wgmma``/``mma.sync`` products, global loads and stores by width,
integer divisions. It found why the channels-last weight gradient ran at 28 TFLOP/s on the
H100 (2-byte loads, no ``cp.async``) without a GPU; it says nothing about time.

Pointers are typed ``*fp16`` (``--dtype``) and 16-byte aligned, integers as annotated.

Usage:
    python benchmarks/probes/kernel_ptx.py conv_nhwc_wgrad._nhwc_wgrad_kernel \\
        --const KD=1 KH=3 KW=3 SD=1 SH=1 SW=1 HAS_D=False IEEE=False TO_F32=False \\
        BIG=False ALIGN=8 EVEN_M=True EVEN_N=True BLOCK_M=128 BLOCK_N=128 BLOCK_K=32 \\
        --warps 8 --stages 3 [--out FILE.ptx]
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

#: Instruction families counted, by the PTX text that starts each.
FAMILIES = {
    "cp.async 16-byte (.cg)": r"cp\.async\.cg\.shared\.global",
    "cp.async (.ca)": r"cp\.async\.ca\.shared\.global",
    "cp.async.bulk (TMA)": r"cp\.async\.bulk",
    "wgmma": r"wgmma\.mma_async",
    "mma.sync": r"mma\.sync",
    "div/rem (integer)": r"\b(?:div|rem)\.[su](?:32|64)",
}


def compile_ptx(kernel: Any, constexprs: dict[str, Any], warps: int, stages: int,
                dtype: str = "fp16") -> str:  # fmt: skip
    """The sm_90 PTX of ``kernel`` (a ``triton.JITFunction``) with ``constexprs``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature: dict[str, str] = {}
    aligned = {}
    for i, p in enumerate(kernel.params):
        if p.is_constexpr:
            signature[p.name] = "constexpr"
        elif p.annotation:
            signature[p.name] = "i64" if "64" in str(p.annotation) else "i32"
        else:
            signature[p.name] = f"*{dtype}"
            aligned[(i,)] = [["tt.divisibility", 16]]
    missing = [p.name for p in kernel.params if p.is_constexpr and p.name not in constexprs]
    if missing:
        raise SystemExit(f"--const is missing {', '.join(missing)}")
    src = ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=aligned)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": warps, "num_stages": stages})  # fmt: skip
    return compiled.asm["ptx"]


def counts(ptx: str) -> dict[str, int]:
    """Instruction families of :data:`FAMILIES`, then global loads and stores by form."""
    out = {name: len(re.findall(pattern, ptx)) for name, pattern in FAMILIES.items()}
    memory = Counter(re.findall(r"\b((?:ld|st)\.global(?:\.[a-z0-9]+)*)", ptx))
    out.update(sorted(memory.items()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "kernel", help="MODULE.NAME of opbench.kernels._lib, e.g. conv_nhwc._nhwc_kernel"
    )
    ap.add_argument("--const", nargs="*", default=[], metavar="NAME=VALUE")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--dtype", default="fp16", help="the pointers' element type")
    ap.add_argument("--out", help="also write the PTX here")
    ns = ap.parse_args()
    module, _, name = ns.kernel.rpartition(".")
    kernel = getattr(importlib.import_module(f"opbench.kernels._lib.{module}"), name)
    constexprs = {k: ast.literal_eval(v) for k, _, v in (c.partition("=") for c in ns.const)}
    ptx = compile_ptx(kernel, constexprs, ns.warps, ns.stages, ns.dtype)
    if ns.out:
        Path(ns.out).write_text(ptx)
    for family, n in counts(ptx).items():
        print(f"{n:6d}  {family}")


if __name__ == "__main__":
    main()
