"""Tensors as plain data: storage spans, layouts, host copies of outputs.

Used by the worker to describe what a kernel returned and what its inputs look like
after the call, and by the judge to describe its own copies the same way. The tensor
methods are bound at import, before any candidate code is imported into the process,
so a module that patches ``Tensor.clone`` or ``Tensor.to`` changes nothing here.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

__all__ = [
    "byte_view",
    "cpu_outputs",
    "sync",
    "digest",
    "elements_digest",
    "meta",
    "output_meta",
    "snapshot",
    "span",
]

_clone = torch.Tensor.clone
_detach = torch.Tensor.detach
_to = torch.Tensor.to
_as_strided = torch.Tensor.as_strided
_view = torch.Tensor.view
_numpy = torch.Tensor.numpy
_copy = torch.Tensor.copy_
_to_dense = torch.Tensor.to_dense
_empty = torch.empty
_sha256 = hashlib.sha256
_Tensor = torch.Tensor
_is_functorch = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)


def span(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view of the storage elements ``t`` reaches (holes and all).

    Built with ``as_strided`` on the one stride that works for every layout (stride 1
    from the storage offset), so odd, zero (expanded) and overlapping strides all give
    a plain span. A tensor that is not strided (sparse) has no single span: its dense
    elements stand in, so a digest of it still changes when its values do.
    """
    if t.layout != torch.strided:
        return _view(_flat(t), -1)
    if t.numel() == 0:
        return _empty((0,), dtype=t.dtype, device=t.device)
    n = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return _as_strided(t, (n,), (1,), t.storage_offset())


def snapshot(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy of the storage span of ``t``."""
    return _clone(_to(_detach(span(t)), "cpu"))


def _flat(t: torch.Tensor) -> torch.Tensor:
    """A fresh 1-D, stride-1 tensor of ``t``'s elements in order, on ``t``'s device.

    ``contiguous()``, ``clone()`` and ``reshape(-1)`` all keep the odd stride of a
    size-1 dimension (a one-element f16 tensor with stride 2 stays stride 2), and
    ``view(torch.uint8)`` refuses a last stride other than 1; it also refuses conjugate
    and negative-bit views. Copying into a new ``empty`` buffer gives stride 1 and
    resolved values whatever the source's layout.
    """
    t = _detach(t)
    if t.layout != torch.strided:
        t = _to_dense(t)
    out = _empty(tuple(t.shape), dtype=t.dtype, device=t.device)
    if t.numel():
        _copy(out, t)
    return _view(out, -1)


def byte_view(t: torch.Tensor) -> torch.Tensor:
    """The bytes of ``t``'s elements in order, as a 1-D uint8 tensor on ``t``'s device.

    Works for every dtype (bool, complex, float8 ...) and layout, because it views a
    fresh stride-1 copy (:func:`_flat`) rather than ``t`` itself.
    """
    return _view(_flat(t), torch.uint8)


def digest(cpu_span: torch.Tensor) -> str:
    """SHA-256 of a tensor's bytes (for inputs too large to send back whole).

    Meant for a :func:`snapshot` (a 1-D span), where it hashes the storage span; any
    other tensor, on any device, is hashed element by element in order.
    """
    if cpu_span.numel() == 0:
        return _sha256(b"").hexdigest()
    raw = _to(byte_view(cpu_span), "cpu")
    return _sha256(memoryview(_numpy(raw))).hexdigest()


def elements_digest(t: torch.Tensor) -> str:
    """SHA-256 of the elements ``t`` reaches, in order (holes in its storage left out)."""
    return digest(t)


def meta(t: torch.Tensor) -> dict[str, Any]:
    return {
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": int(t.storage_offset()),
        "dtype": str(t.dtype).removeprefix("torch."),
        "device": str(t.device),
        "data_ptr": int(t.data_ptr()) if t.numel() else 0,
        "storage_ptr": int(t.untyped_storage().data_ptr()) if t.numel() else 0,
        "obj_id": id(t),
    }


def sync(device: Any) -> None:
    """Wait for the device's queued work, so outputs can be read and times are whole."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def bind_device(device: Any) -> None:
    """Make `device` the current CUDA device of this thread (a no-op off CUDA).

    torch.cuda.set_device refuses an index-less torch.device("cuda"), which is what a
    run's "cuda" means: the first GPU. References then land on that GPU by default, and
    its generator is the one random ops draw from.
    """
    if str(device).startswith("cuda"):
        torch.cuda.set_device(torch.device(device).index or 0)


def cpu_outputs(obj: Any) -> Any:
    """Copy outputs to the CPU, keeping tuples/lists/scalars; unknown objects -> repr."""
    if isinstance(obj, (tuple, list)):
        seq = [cpu_outputs(v) for v in obj]
        return seq if isinstance(obj, list) else tuple(seq)
    if isinstance(obj, torch.Tensor):
        try:
            t = _detach(obj)
            if type(t) is not _Tensor:
                t = t.as_subclass(_Tensor)
            return _clone(_to(t, "cpu"))
        except Exception as e:  # a wrapper without data
            return f"<unreadable tensor: {type(e).__name__}: {e}>"
    if obj is None or isinstance(obj, (bool, int, float, complex, str)):
        return obj
    return f"<{type(obj).__module__}.{type(obj).__qualname__}: {obj!r}>"[:500]


def output_meta(obj: Any, path: str = "") -> list[dict[str, Any]]:
    """Raw facts about each output leaf: kind, type, layout and storage (see
    :func:`opbench.judge.guard.output_problems` for what the judge makes of them)."""
    if isinstance(obj, (tuple, list)):
        out: list[dict[str, Any]] = []
        for i, v in enumerate(obj):
            out.extend(output_meta(v, f"{path}[{i}]"))
        return out
    m: dict[str, Any] = {
        "path": path,
        "type": f"{type(obj).__module__}.{type(obj).__qualname__}",
        "obj_id": id(obj),
    }
    if isinstance(obj, torch.Tensor):
        m["kind"] = "tensor"
        m["plain"] = type(obj) is _Tensor
        try:
            m["layout"] = str(obj.layout)
            m["device_type"] = obj.device.type
            m["functorch"] = bool(_is_functorch(obj)) if _is_functorch else False
        except Exception as e:
            m["unreadable"] = f"{type(e).__name__}: {e}"
        try:
            m.update(meta(obj))
        except Exception as e:
            m["unreadable"] = f"metadata unreadable ({type(e).__name__}: {e})"
    elif obj is None:
        m["kind"] = "none"
    elif isinstance(obj, (bool, int, float, complex)):
        m["kind"] = "scalar"
    else:
        m["kind"] = "other"
    return [m]
