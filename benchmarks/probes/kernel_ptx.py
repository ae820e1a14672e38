"""What a backend kernel compiles to on Hopper, read on a machine without a GPU.

Triton compiles for any target on the CPU machine (``triton.compile`` of an
``ASTSource`` with ``GPUTarget("cuda", 90, 32)``): this script does that for one
``@triton.jit`` kernel of ``opbench.kernels._lib`` with the constexprs given, and counts
the instructions that decide a kernel's speed there: ``cp.async`` copies (pipelined,
16-byte where ``.cg``), ``wgmma``/``mma.sync`` products, global loads and stores by width,
integer divisions. It found why the channels-last weight gradient ran at 28 TFLOP/s on the
H100 (2-byte loads, no ``cp.async``) without a GPU; it says nothing about time.

Pointers are typed ``*fp16`` (``--dtype``) and 16-byte aligned, integers as annotated;
``--ones`` and ``--div16`` give the integers a launch would specialize (a stride of 1, a
size or stride divisible by 16: what proves a 16-byte load), as ``Launcher(...,
specialize=)`` lets Triton do. ``--sass`` adds what the cubin says: registers, spilled
bytes and stack (``cuobjdump -res-usage``) and the SASS barriers and shared-memory loads
(a ``convert_layout`` through shared memory shows as ``BAR.SYNC`` pairs around ``LDS``).

Triton here is the CPU machine's (3.9); the GPU machine runs 3.6, which allocates
registers differently: the channels-last depthwise tile of 16 x 128 read 142 registers
here and compiled to 255 with 12 spilled there (2026-11-28,
``results/conv-cl-depthwise-h200-2026-11-28.md``). Registers read here are a hint;
``benchmarks/probes/conv_cl_tiles.py`` reads them from the GPU's own compile.

Usage:
    python benchmarks/probes/kernel_ptx.py conv_nhwc_wgrad._nhwc_wgrad_kernel \\
        --const KD=1 KH=3 KW=3 SD=1 SH=1 SW=1 HAS_D=False IEEE=False TO_F32=False \\
        BIG=False ALIGN=8 EVEN_M=True EVEN_N=True WALK=True BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 \\
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


def compile_kernel(kernel: Any, constexprs: dict[str, Any], warps: int, stages: int,
                   dtype: str = "fp16", ones: tuple[str, ...] = (),
                   div16: tuple[str, ...] = ()) -> Any:  # fmt: skip
    """``kernel`` (a ``triton.JITFunction``) compiled for sm_90 with ``constexprs``, the
    integers named in ``ones`` specialized to 1 and those in ``div16`` known divisible by
    16 (Triton's own specializations of a launch)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature: dict[str, str] = {}
    aligned = {}
    constexprs = dict(constexprs)
    for i, p in enumerate(kernel.params):
        if p.is_constexpr:
            signature[p.name] = "constexpr"
        elif p.name in ones:
            signature[p.name] = "constexpr"
            constexprs[p.name] = 1
        elif p.annotation:
            a = str(p.annotation)  # tl.int64, tl.int32 or tl.float64 (eps, scalars)
            signature[p.name] = "fp64" if "float" in a else ("i64" if "64" in a else "i32")
            if p.name in div16:
                aligned[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[p.name] = f"*{dtype}"
            aligned[(i,)] = [["tt.divisibility", 16]]
    missing = [p.name for p in kernel.params if p.is_constexpr and p.name not in constexprs]
    if missing:
        raise SystemExit(f"--const is missing {', '.join(missing)}")
    src = ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=aligned)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": warps, "num_stages": stages})  # fmt: skip


def compile_ptx(kernel: Any, constexprs: dict[str, Any], warps: int, stages: int,
                dtype: str = "fp16") -> str:  # fmt: skip
    """The sm_90 PTX of ``kernel`` (a ``triton.JITFunction``) with ``constexprs``."""
    return compile_kernel(kernel, constexprs, warps, stages, dtype).asm["ptx"]


def _constexpr(text: str) -> Any:
    """A ``--const`` value: a Python literal, or a ``triton.language`` name (``tl.int32``,
    ``tl.float32``: the index and compute types some kernels take)."""
    if text.startswith("tl."):
        import triton.language as tl

        return getattr(tl, text[3:])
    return ast.literal_eval(text)


def sass_counts(cubin: bytes) -> dict[str, int]:
    """Registers, spilled bytes, stack and local memory (``cuobjdump -res-usage``), and the
    SASS barriers and shared-memory loads of a cubin, by the cuobjdump Triton ships."""
    import subprocess
    import tempfile

    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True,
                               text=True, check=True).stdout  # fmt: skip
        sass = subprocess.run([str(tool), "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    out = {}
    for key in ("REG", "STACK", "LOCAL", "SHARED"):
        m = re.search(rf"\b{key}:(\d+)", usage)
        out[f"sass {key.lower()}"] = int(m.group(1)) if m else -1
    out["sass BAR.SYNC"] = len(re.findall(r"\bBAR\.SYNC", sass))
    out["sass LDS"] = len(re.findall(r"\bLDS(?:\.\w+)*\s", sass))
    out["sass LDG"] = len(re.findall(r"\bLDG(?:\.\w+)*\s", sass))
    return out


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
    ap.add_argument("--ones", nargs="*", default=[], metavar="NAME",
                    help="integers a launch passes as 1 (Triton makes them constants)")  # fmt: skip
    ap.add_argument("--div16", nargs="*", default=[], metavar="NAME",
                    help="integers a launch passes divisible by 16")  # fmt: skip
    ap.add_argument("--sass", action="store_true",
                    help="also registers, spills, barriers and shared loads of the cubin")  # fmt: skip
    ap.add_argument("--out", help="also write the PTX here")
    ns = ap.parse_args()
    module, _, name = ns.kernel.rpartition(".")
    kernel = getattr(importlib.import_module(f"opbench.kernels._lib.{module}"), name)
    constexprs = {k: _constexpr(v) for k, _, v in (c.partition("=") for c in ns.const)}
    compiled = compile_kernel(kernel, constexprs, ns.warps, ns.stages, ns.dtype,
                              tuple(ns.ones), tuple(ns.div16))  # fmt: skip
    ptx = compiled.asm["ptx"]
    if ns.out:
        Path(ns.out).write_text(ptx)
    found = counts(ptx)
    if ns.sass:
        found.update(sass_counts(compiled.asm["cubin"]))
    for family, n in found.items():
        print(f"{n:6d}  {family}")


if __name__ == "__main__":
    main()
