"""Operator rules for arguments that are indices, offsets, targets or counts.

Owns the rules that keep index-valued arguments valid: embedding indices and bag offsets,
``gather``/``scatter``/``index*``/``take*`` positions (unique where duplicates would make
the result depend on write order), classification targets (``nll_loss`` and friends,
with some set to ``ignore_index``), max-pool indices from a matching forward, and
``repeat_interleave`` counts. :data:`INDEX_RULES` maps an operator family to its rule;
:mod:`opbench.suites.input_rules` merges it into the full table.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from opbench.spec.args import TensorSpec
from opbench.suites.input_call import (
    POSITIVE,
    PROB,
    Call,
    NotRunnable,
    index_kind,
    int_arg,
    mix_seed,
    norm_dim,
    not_runnable,
    size_along,
)

# The draw helpers input_rules imports too: the index rules were cut from it, and each
# module names what it uses.
__all__ = ["INDEX_RULES"]


def _rule_embedding(call: Call) -> None:
    w = call.tensor_spec("weight")
    call.set_kind("indices", index_kind(w.shape[0] if w.shape else 0))


def _rule_embedding_dense_backward(call: Call) -> None:
    call.set_kind("indices", index_kind(int_arg(call, "num_weights")))


def _sorted_offsets(call: Call, n_indices: int, n_offsets: int, last: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(mix_seed(call.seed, ("offsets",)))
    offs = torch.sort(torch.randint(0, n_indices + 1, (n_offsets,), generator=g)).values
    if n_offsets:
        offs[0] = 0
        if last:
            offs[-1] = n_indices
    return offs


def _rule_embedding_bag(call: Call) -> None:
    w = call.tensor_spec("weight")
    idx = call.tensor_spec("indices")
    off = call.tensor_spec("offsets")
    if len(idx.shape) != 1:
        raise NotRunnable(f"{call.op}: only 1-d indices with offsets are generated")
    call.set_kind("indices", index_kind(w.shape[0]))
    last = bool(call.spec("include_last_offset"))

    def derive(c: Call) -> None:
        c.replace("offsets", _sorted_offsets(c, idx.shape[0], off.shape[0], last))

    call.derives.append(derive)


def _rule_embedding_bag_psw_backward(call: Call) -> None:
    w = call.tensor_spec("weight")
    idx = call.tensor_spec("indices")
    off = call.tensor_spec("offsets")
    o2b = call.tensor_spec("offset2bag")
    if len(idx.shape) != 1 or o2b.shape != idx.shape:
        raise NotRunnable(f"{call.op}: offset2bag must match 1-d indices")
    call.set_kind("indices", index_kind(w.shape[0]))

    def derive(c: Call) -> None:
        offs = _sorted_offsets(c, idx.shape[0], off.shape[0], False)
        c.replace("offsets", offs)
        pos = torch.arange(idx.shape[0])
        c.replace("offset2bag", torch.searchsorted(offs, pos, right=True) - 1)

    call.derives.append(derive)


def _rule_gather(call: Call) -> None:
    s = call.tensor_spec("self")
    call.set_kind("index", index_kind(size_along(s, int_arg(call, "dim"))))


def _rule_scatter_add(call: Call) -> None:
    _rule_gather(call)


def _index_along(call: Call) -> tuple[TensorSpec, int, int]:
    """``index``, ``dim`` and the size ``n`` of self along it; index values drawn in [0, n)."""
    s = call.tensor_spec("self")
    idx = call.tensor_spec("index")
    dim = int_arg(call, "dim")
    n = size_along(s, dim)
    call.set_kind("index", index_kind(n))
    return idx, dim, n


def _rule_scatter(call: Call) -> None:
    """scatter without reduction: duplicate targets make the result order dependent."""
    idx, dim, n = _index_along(call)
    if call.spec("reduce") is not None and call.spec("reduce") in (
        "add",
        "multiply",
        "sum",
        "prod",
    ):
        return
    k = size_along(idx, dim) if idx.shape else 1
    if k > n:
        raise NotRunnable(f"{call.op}: {k} unique indices needed along dim {dim} of size {n}")

    def derive(c: Call) -> None:
        g = torch.Generator().manual_seed(mix_seed(c.seed, ("unique-index",)))
        d = norm_dim(dim, len(idx.shape)) if idx.shape else 0
        shape = list(idx.shape) or [1]
        moved = shape[:d] + shape[d + 1 :] + [n]
        perm = torch.argsort(torch.rand(moved, generator=g), dim=-1)[..., :k]
        c.replace("index", torch.movedim(perm, -1, d).reshape(idx.shape))

    call.derives.append(derive)


def _rule_index_select(call: Call) -> None:
    _rule_gather(call)


def _index_list_kinds(call: Call, self_name: str = "self", list_name: str = "indices") -> None:
    s = call.tensor_spec(self_name)
    lst = call.spec(list_name)
    if not isinstance(lst, (list, tuple)):
        raise NotRunnable(f"{call.op}: {list_name!r} is not a list")
    d = 0
    for i, t in enumerate(lst):
        if t is None:
            d += 1
            continue
        if not isinstance(t, TensorSpec):
            raise NotRunnable(f"{call.op}: index {i} is not a tensor")
        if t.dtype in (torch.bool, torch.uint8):
            d += max(len(t.shape), 1)
            continue
        if d >= len(s.shape):
            raise NotRunnable(f"{call.op}: more indices than dimensions")
        call.set_kind(list_name, index_kind(s.shape[d]), i)
        d += 1


def _rule_index(call: Call) -> None:
    _index_list_kinds(call)


def _rule_index_put(call: Call) -> None:
    _index_list_kinds(call)
    values = call.spec("values")
    accumulate = bool(call.spec("accumulate"))
    if accumulate or (isinstance(values, TensorSpec) and values.numel <= 1):
        return
    s = call.tensor_spec("self")
    lst = call.spec("indices")

    def derive(c: Call) -> None:
        built = c.value("indices")
        if any(t is None or t.dtype in (torch.bool, torch.uint8) for t in built):
            return  # masks select each element at most once
        b = torch.broadcast_tensors(*built)
        lin = torch.zeros(b[0].shape, dtype=torch.int64)
        for d, t in enumerate(b):
            lin = lin * s.shape[d] + t.to(torch.int64)
        if lin.unique().numel() == lin.numel():
            return
        total = math.prod(s.shape[: len(b)])
        same_shape = all(tuple(t.shape) == tuple(b[0].shape) for t in built)
        if not same_shape or lin.numel() > total:
            raise NotRunnable(
                f"{c.op}: duplicate indices without accumulate make the result order dependent"
            )
        g = torch.Generator().manual_seed(mix_seed(c.seed, ("unique-index",)))
        flat = torch.randperm(total, generator=g)[: lin.numel()].reshape(b[0].shape)
        for d in reversed(range(len(b))):
            c.replace("indices", flat % s.shape[d], d)
            flat = flat // s.shape[d]

    del lst
    call.derives.append(derive)


def _rule_index_add(call: Call) -> None:
    _rule_gather(call)


def _rule_index_copy(call: Call) -> None:
    idx, _, n = _index_along(call)
    if idx.numel > n:
        raise NotRunnable(f"{call.op}: {idx.numel} unique indices needed from {n}")

    def derive(c: Call) -> None:
        g = torch.Generator().manual_seed(mix_seed(c.seed, ("unique-index",)))
        c.replace("index", torch.randperm(n, generator=g)[: idx.numel].reshape(idx.shape))

    call.derives.append(derive)


def _nll_classes(inp: TensorSpec) -> int:
    return inp.shape[1] if len(inp.shape) >= 2 else (inp.shape[0] if inp.shape else 1)


def _nll_targets(call: Call) -> None:
    """Targets in [0, C), a few set to ignore_index (the path real training takes too)."""
    inp = call.tensor_spec("self")
    tgt = call.tensor_spec("target")
    c = _nll_classes(inp)
    if tgt.dtype.is_floating_point:
        call.set_kind("target", PROB)  # class probabilities (cross_entropy)
        return
    call.set_kind("target", index_kind(c))
    ignore = call.spec("ignore_index")
    if isinstance(ignore, int) and not 0 <= ignore < c and tgt.numel >= 16:

        def derive(cl: Call) -> None:
            t = cl.value("target")
            g = torch.Generator().manual_seed(mix_seed(cl.seed, ("ignore",)))
            mask = torch.rand(t.shape, generator=g) < 0.0625
            mask.view(-1)[0] = False  # never all ignored (mean would be 0/0)
            cl.replace("target", torch.where(mask, torch.full_like(t, ignore), t))

        call.derives.append(derive)
    if call.tensor_spec("weight", required=False) is not None:
        call.set_kind("weight", POSITIVE)


def _rule_nll_loss(call: Call) -> None:
    _nll_targets(call)


def _rule_nll_loss_backward(call: Call) -> None:
    _nll_targets(call)
    tw = call.tensor_spec("total_weight", required=False)
    if tw is None:
        return
    call.set_kind("total_weight", POSITIVE)
    forward = (
        torch.ops.aten.nll_loss2d_forward if "2d" in call.op else torch.ops.aten.nll_loss_forward
    )

    def derive(c: Call) -> None:
        out = forward.default(
            c.value("self").float(),
            c.value("target"),
            None if c.value("weight") is None else c.value("weight").float(),
            c.value("reduction"),
            c.value("ignore_index"),
        )
        c.replace("total_weight", out[1])

    call.derives.append(derive)


def _rule_multi_margin_loss(call: Call) -> None:
    inp = call.tensor_spec("self")
    call.set_kind("target", index_kind(inp.shape[-1] if inp.shape else 1))


def _rule_max_pool_backward(call: Call, three_d: bool = False) -> None:
    call.tensor_spec("indices")
    forward = (
        torch.ops.aten.max_pool3d_with_indices.default
        if three_d
        else torch.ops.aten.max_pool2d_with_indices.default
    )

    def derive(c: Call) -> None:
        x = c.value("self")
        _, idx = forward(
            x.float() if x.dtype in (torch.float16, torch.bfloat16) else x,
            c.value("kernel_size"),
            c.value("stride"),
            c.value("padding"),
            c.value("dilation"),
            c.value("ceil_mode"),
        )
        c.replace("indices", idx)

    call.derives.append(derive)


def _rule_max_pool3d_backward(call: Call) -> None:
    _rule_max_pool_backward(call, three_d=True)


def _rule_repeat_interleave(call: Call) -> None:
    if isinstance(call.spec("repeats"), TensorSpec):
        call.set_kind("repeats", index_kind(4))


def _rule_take(call: Call) -> None:
    s = call.tensor_spec("self")
    call.set_kind("index", index_kind(s.numel))


def _rule_take_along_dim(call: Call) -> None:
    s = call.tensor_spec("self")
    dim = call.spec("dim")
    call.set_kind("indices", index_kind(s.numel if dim is None else size_along(s, dim)))


INDEX_RULES: dict[str, Callable[[Call], None]] = {
    "embedding": _rule_embedding,
    "embedding_dense_backward": _rule_embedding_dense_backward,
    "embedding_backward": _rule_embedding_dense_backward,
    "_embedding_bag": _rule_embedding_bag,
    "_embedding_bag_forward_only": _rule_embedding_bag,
    "embedding_bag": _rule_embedding_bag,
    "_embedding_bag_per_sample_weights_backward": _rule_embedding_bag_psw_backward,
    "_embedding_bag_backward": not_runnable("needs the bag bookkeeping of a matching forward"),
    "_embedding_bag_dense_backward": not_runnable(
        "needs the bag bookkeeping of a matching forward"
    ),
    "gather": _rule_gather,
    "scatter": _rule_scatter,
    "scatter_add": _rule_scatter_add,
    "scatter_reduce": _rule_scatter_add,
    "index": _rule_index,
    "_unsafe_index": _rule_index,
    "index_put": _rule_index_put,
    "_index_put_impl_": _rule_index_put,
    "_unsafe_index_put": _rule_index_put,
    "index_select": _rule_index_select,
    "index_add": _rule_index_add,
    "index_fill": _rule_index_add,
    "index_reduce": _rule_index_add,
    "index_copy": _rule_index_copy,
    "take": _rule_take,
    "take_along_dim": _rule_take_along_dim,
    "nll_loss": _rule_nll_loss,
    "nll_loss_nd": _rule_nll_loss,
    "nll_loss2d": _rule_nll_loss,
    "nll_loss_forward": _rule_nll_loss,
    "nll_loss2d_forward": _rule_nll_loss,
    "cross_entropy_loss": _rule_nll_loss,
    "nll_loss_backward": _rule_nll_loss_backward,
    "nll_loss2d_backward": _rule_nll_loss_backward,
    "multi_margin_loss": _rule_multi_margin_loss,
    "max_pool2d_with_indices_backward": _rule_max_pool_backward,
    "max_pool3d_with_indices_backward": _rule_max_pool3d_backward,
    "repeat_interleave": _rule_repeat_interleave,
    "max_unpool2d": not_runnable("needs unique indices from a matching max-pool"),
    "max_unpool3d": not_runnable("needs unique indices from a matching max-pool"),
}
