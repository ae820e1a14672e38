"""PyTorch's backend settings: pinned in every worker, for the reference and the
candidate alike, and read back in full for the run's record.

Runs in the WORKER (it only sets and reads; :mod:`opbench.report.settings` compares
runs). Settings change results silently: cuDNN convolutions run float32 in TF32 by
default (10-bit mantissa: an exact float32 kernel then "fails" against eager's own
error, or a TF32 kernel passes against a TF32 reference), cuDNN autotuning picks
different algorithms from run to run, the multi-head-attention fast path hides ops
from a trace. A run pins what decides float32 precision and algorithm choice, and
records every setting that exists on the machine, so two runs are only ranked when
they were measured the same way.

Pinned (:func:`pin`): float32 matmuls and convolutions in IEEE float32 (the
``fp32_precision`` settings of cuBLAS, cuDNN and oneDNN; TF32 for cuBLAS and cuDNN only
with ``--allow-tf32``), ``cudnn.benchmark`` off. The rest keeps PyTorch's defaults and
is recorded (:func:`read`). The thread count is pinned by the worker itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["PINNED_FP32", "pin", "pinned", "read"]

#: The ``fp32_precision`` settings pinned, as paths under ``torch.backends``.
PINNED_FP32 = (
    "cuda.matmul",
    "cudnn.conv",
    "cudnn.rnn",
    "mkldnn.matmul",
    "mkldnn.conv",
    "mkldnn.rnn",
)
#: The ones ``--allow-tf32`` sets to ``tf32`` (oneDNN's TF32 is a CPU emulation: ieee).
_TF32_ALLOWED = ("cuda.matmul", "cudnn.conv", "cudnn.rnn")


def _node(path: str) -> Any:
    obj: Any = torch.backends
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def pin(*, allow_tf32: bool = False) -> dict[str, Any]:
    """Set the pinned settings; returns what was set (a setting this torch lacks is
    left out). Uses only the ``fp32_precision`` API where it exists: torch 2.13 raises
    when the legacy ``allow_tf32`` flags are read after a mix of both APIs set them."""
    with _mutable_flags():
        return _pin(allow_tf32)


@contextlib.contextmanager
def pinned(*, allow_tf32: bool = False) -> Any:
    """:func:`pin` for the duration of a ``with`` block, the previous values restored
    after it (``check-model`` runs in the caller's process, whose settings it must not
    leave changed)."""
    saved: list[tuple[Any, str, Any]] = []
    for path in PINNED_FP32:
        try:
            node = _node(path)
        except AttributeError:
            continue
        if hasattr(node, "fp32_precision"):
            saved.append((node, "fp32_precision", node.fp32_precision))
    legacy = not saved  # a torch without the new API: its legacy flags (never both:
    # torch 2.13 raises when precision is read after a mix of the two)
    if legacy:
        saved += [(torch.backends.cuda.matmul, "allow_tf32",
                   torch.backends.cuda.matmul.allow_tf32),
                  (torch.backends.cudnn, "allow_tf32", torch.backends.cudnn.allow_tf32)]  # fmt: skip
        matmul_precision = torch.get_float32_matmul_precision()
    saved.append((torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark))
    pin(allow_tf32=allow_tf32)
    try:
        yield
    finally:
        with _mutable_flags():
            for node, attr, value in saved:
                setattr(node, attr, value)
            if legacy:
                torch.set_float32_matmul_precision(matmul_precision)


def _mutable_flags() -> Any:
    """PyTorch's own context for setting backend flags after
    ``torch.backends.disable_global_flags()``, which importing its OpInfo database calls
    (opbench's workers preload it for the opinfo suite); a no-op context otherwise."""
    allow = getattr(torch.backends, "__allow_nonbracketed_mutation", None)
    frozen = getattr(torch.backends, "flags_frozen", lambda: False)()
    return allow() if allow is not None and frozen else contextlib.nullcontext()


def _pin(allow_tf32: bool) -> dict[str, Any]:
    done: dict[str, Any] = {}
    for path in PINNED_FP32:
        want = "tf32" if allow_tf32 and path in _TF32_ALLOWED else "ieee"
        try:
            node = _node(path)
            if not hasattr(node, "fp32_precision"):
                continue
            node.fp32_precision = want
            done[f"{path}.fp32_precision"] = want
        except (AttributeError, RuntimeError, ValueError):
            continue
    if not any(k.startswith("cuda.matmul") for k in done):  # a torch without the new API
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        torch.backends.cudnn.allow_tf32 = allow_tf32
        done["cuda.matmul.allow_tf32"] = done["cudnn.allow_tf32"] = allow_tf32
        torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
    torch.backends.cudnn.benchmark = False
    done["cudnn.benchmark"] = False
    return done


#: Settings read only where CUDA is initialised (or absent): reading them initialises it.
CUDA_INITIALISED_ONLY = ("cudnn.version", "cuda.cufft_plan_cache.max_size")


def _readers() -> list[tuple[str, Callable[[], Any]]]:
    """Never ``torch.cuda.is_available()`` or ``device_count()`` here: the fork server's
    template reads these settings, and asking CUDA for its device count registers
    PyTorch's fork handler, after which every forked worker fails with "Cannot
    re-initialize CUDA in forked subprocess" (seen on the H100). Whether this torch has
    CUDA, and whether this process initialised it, are asked instead."""
    b = torch.backends
    cuda_built = b.cuda.is_built()
    cuda_ready = cuda_built and torch.cuda.is_initialized()
    out: list[tuple[str, Callable[[], Any]]] = [
        ("fp32_precision", lambda: b.fp32_precision),
        *((f"{p}.fp32_precision", lambda p=p: _node(p).fp32_precision) for p in PINNED_FP32),
        ("float32_matmul_precision", torch.get_float32_matmul_precision),
        ("cuda.matmul.allow_tf32", lambda: b.cuda.matmul.allow_tf32),
        ("cudnn.allow_tf32", lambda: b.cudnn.allow_tf32),
        (
            "cuda.matmul.allow_fp16_reduced_precision_reduction",
            lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction,
        ),
        (
            "cuda.matmul.allow_bf16_reduced_precision_reduction",
            lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction,
        ),
        ("cudnn.enabled", lambda: b.cudnn.enabled),
        ("cudnn.benchmark", lambda: b.cudnn.benchmark),
        ("cudnn.deterministic", lambda: b.cudnn.deterministic),
        ("deterministic_algorithms", torch.are_deterministic_algorithms_enabled),
        ("sdp.flash", lambda: b.cuda.flash_sdp_enabled()),
        ("sdp.mem_efficient", lambda: b.cuda.mem_efficient_sdp_enabled()),
        ("sdp.math", lambda: b.cuda.math_sdp_enabled()),
        ("sdp.cudnn", lambda: b.cuda.cudnn_sdp_enabled()),
        ("mha.fastpath", lambda: b.mha.get_fastpath_enabled()),
        ("opt_einsum.enabled", lambda: b.opt_einsum.enabled),
        ("opt_einsum.strategy", lambda: b.opt_einsum.strategy),
        ("cpu.capability", lambda: b.cpu.get_cpu_capability()),
        ("mkl.available", lambda: b.mkl.is_available()),
        ("mkldnn.available", lambda: b.mkldnn.is_available()),
        ("mkldnn.enabled", lambda: b.mkldnn.enabled),
        ("num_threads", torch.get_num_threads),
        ("num_interop_threads", torch.get_num_interop_threads),
        ("default_dtype", lambda: str(torch.get_default_dtype())),
        ("cuda.version", lambda: torch.version.cuda),
    ]
    if cuda_built:
        out += [
            ("cuda.preferred_blas_library", lambda: str(b.cuda.preferred_blas_library())),
            ("cuda.preferred_linalg_library", lambda: str(b.cuda.preferred_linalg_library())),
        ]
    if not cuda_built or cuda_ready:
        # cuDNN's version and the (per-device) cuFFT plan cache initialise CUDA when
        # read (measured on the H100), which the fork server's template must never do
        out.append(("cudnn.version", lambda: b.cudnn.version() if b.cudnn.is_available() else None))
    if cuda_ready:
        out.append(("cuda.cufft_plan_cache.max_size", lambda: b.cuda.cufft_plan_cache.max_size))
    return out


def read() -> dict[str, Any]:
    """Every setting above that exists here, as JSON values (a reader that fails, for a
    setting this torch or machine lacks, is left out)."""
    out: dict[str, Any] = {}
    for name, get in _readers():
        try:
            v = get()
        except Exception:
            continue
        out[name] = v if isinstance(v, (bool, int, float, str, type(None))) else str(v)
    return out
