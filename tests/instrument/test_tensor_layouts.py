"""Digests and snapshots of any tensor: every dtype, every layout, CPU and CUDA.

A one-element f16 tensor with stride 2 (``as_strided((1,), (2,))``) keeps its odd
stride through ``clone``, ``contiguous`` and ``reshape``, and ``view(torch.uint8)``
refused it: the harness's ``elements_digest`` raised while planning an OpInfo case on
an H100 and took the whole run down. The reference digests here are computed
independently of :mod:`opbench.instrument.tensors`: from the tensor's raw storage bytes
and its strides, element by element in Python.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable

import pytest
import torch

from opbench.instrument import tensors
from opbench.judge.correctness import bitwise_equal

_DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    ),
]

_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
] + [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]


def _base(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """``n`` random values of ``dtype``, all distinct in their bytes where the dtype
    allows, so a digest that read the wrong elements would differ."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g, dtype=torch.float64) * 7
    if dtype == torch.bool:
        v = x > 0
    elif dtype.is_complex:
        v = torch.complex(x, torch.randn(n, generator=g, dtype=torch.float64)).to(dtype)
    elif dtype.is_floating_point:
        v = x.to(torch.float32).to(dtype)
    else:
        v = x.round().to(torch.int64).remainder(100).to(dtype)
    return v.to(device)


#: name -> how to lay a tensor out over fresh storage of a dtype on a device
_LAYOUTS: dict[str, Callable[[torch.dtype, str], torch.Tensor]] = {
    "contiguous": lambda d, dev: _base(12, d, dev).view(3, 4),
    "scalar": lambda d, dev: _base(1, d, dev).view(()),
    "transposed": lambda d, dev: _base(12, d, dev).view(3, 4).t(),
    "sliced_offset": lambda d, dev: _base(30, d, dev).view(5, 6)[1:4, 2:6:2],
    "one_element_odd_stride": lambda d, dev: _base(16, d, dev).as_strided((1,), (2,)),
    "one_element_odd_stride_offset": lambda d, dev: _base(16, d, dev).as_strided((1,), (3,), 5),
    "one_by_one_strides_1_2": lambda d, dev: _base(16, d, dev).as_strided((1, 1), (1, 2)),
    "zero_size": lambda d, dev: _base(8, d, dev).as_strided((0, 3), (3, 1), 2),
    "zero_size_odd_stride": lambda d, dev: _base(8, d, dev).as_strided((2, 0), (5, 2)),
    "expanded": lambda d, dev: _base(3, d, dev).expand(4, 3),
    "expanded_one": lambda d, dev: _base(5, d, dev)[2:3].expand(2, 3),
    "overlapping": lambda d, dev: _base(10, d, dev).as_strided((3, 4), (2, 1)),
    "channels_last": lambda d, dev: (
        _base(120, d, dev).view(2, 3, 4, 5).as_strided((2, 3, 4, 5), (60, 1, 15, 3))
    ),
}


def _storage_bytes(t: torch.Tensor) -> bytes:
    """The raw bytes of ``t``'s whole storage, read through the storage object."""
    st = t.untyped_storage().cpu()
    return torch.empty(0, dtype=torch.uint8).set_(st).numpy().tobytes()


def _positions(t: torch.Tensor) -> list[int]:
    """Storage index of each element ``t`` reaches, in row-major order."""
    off = t.storage_offset()
    return [
        off + sum(i * s for i, s in zip(idx, t.stride()))
        for idx in itertools.product(*(range(n) for n in t.shape))
    ]


def _expected_elements(t: torch.Tensor) -> bytes:
    raw, es = _storage_bytes(t), t.element_size()
    return b"".join(raw[p * es : (p + 1) * es] for p in _positions(t))


def _expected_span(t: torch.Tensor) -> bytes:
    pos = _positions(t)
    if not pos:
        return b""
    raw, es, lo = _storage_bytes(t), t.element_size(), t.storage_offset()
    return raw[lo * es : (max(pos) + 1) * es]


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _with_one_byte_changed(t: torch.Tensor) -> torch.Tensor:
    """The same layout over a copy of the storage whose first reached element differs
    in its lowest bit (1 <-> 0 for bool, a mantissa bit for floats)."""
    st = t.untyped_storage().clone()
    torch.empty(0, dtype=torch.uint8, device=t.device).set_(st)[
        t.storage_offset() * t.element_size()
    ] ^= 1
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    return out.set_(st, t.storage_offset(), t.shape, t.stride())


@pytest.mark.parametrize("device", _DEVICES)
@pytest.mark.parametrize("layout", list(_LAYOUTS))
@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_digests_and_snapshots_of_any_layout(dtype, layout, device):
    t = _LAYOUTS[layout](dtype, device)
    assert t.dtype == dtype and t.device.type == device

    assert tensors.elements_digest(t) == _sha(_expected_elements(t))
    assert tensors.byte_view(t).cpu().numpy().tobytes() == _expected_elements(t)

    snap = tensors.snapshot(t)
    assert snap.device.type == "cpu" and snap.dim() == 1 and snap.dtype == dtype
    assert tensors.byte_view(snap).numpy().tobytes() == _expected_span(t)
    assert tensors.digest(snap) == _sha(_expected_span(t))

    assert bitwise_equal(t, t.clone())
    if t.numel():
        other = _with_one_byte_changed(t)
        assert tensors.elements_digest(other) != tensors.elements_digest(t)
        assert tensors.digest(tensors.snapshot(other)) != tensors.digest(snap)
        assert not bitwise_equal(t, other)


@pytest.mark.parametrize("device", _DEVICES)
def test_conjugate_and_negative_views_digest_their_values(device):
    """``view(torch.uint8)`` refuses conjugate and negative-bit views; the digest is of
    the values they show, the same as a resolved copy's."""
    z = _base(6, torch.complex64, device)
    conj = z.conj()
    assert conj.is_conj()
    assert tensors.elements_digest(conj) == tensors.elements_digest(conj.resolve_conj())
    assert tensors.elements_digest(conj) != tensors.elements_digest(z)
    neg = conj.imag
    assert neg.is_neg()
    assert tensors.elements_digest(neg) == tensors.elements_digest(-z.imag)
    tensors.digest(tensors.snapshot(conj))


def test_a_sparse_tensor_digests_its_dense_values():
    dense = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0]])
    sparse = dense.to_sparse()
    assert tensors.elements_digest(sparse) == tensors.elements_digest(dense)
    assert tensors.digest(tensors.snapshot(sparse)) == tensors.elements_digest(dense)
