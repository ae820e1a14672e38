"""``check-model --autocast``: the forward of a checked or timed step under
``torch.autocast``, as mixed-precision training runs it.

LLMs and most vision models train with the forward (and the loss) under autocast in
bfloat16 or float16, the backward following the forward's dtypes: their matmuls and
convolutions run in 16 bits, their reductions and norms in float32. A float32-only
check times a backend's float32 paths (IEEE matmuls on CUDA cores), which such a model
never calls. The float64 reference stays without autocast: the check's bound is eager's
own error against it (x ``EAGER_ERROR_FACTOR``) plus ``rtol``, so under autocast it is
16-bit's error, the looseness a mixed-precision step has anyway.

Autocast's weight-cast cache is off (``cache_enabled=False``): a CUDA graph capture
must not keep casts made outside it, and eager and the backend then cast alike.
No gradient scaler: one step of random weights, the same on both sides.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

__all__ = ["AUTOCAST_DTYPES", "autocast_dtype", "forward_precision"]

#: The ``--autocast`` values and the dtypes they name.
AUTOCAST_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "f16": torch.float16,
    "fp16": torch.float16,
    "float16": torch.float16,
}


def autocast_dtype(autocast: str | None) -> torch.dtype | None:
    """The dtype ``autocast`` names (None: no autocast); ValueError for another name."""
    if autocast is None:
        return None
    try:
        return AUTOCAST_DTYPES[autocast.lower()]
    except KeyError:
        raise ValueError(
            f"autocast {autocast!r}: use bf16 or f16 (or leave it off for float32)"
        ) from None


def forward_precision(device: str, autocast: str | None) -> AbstractContextManager[Any]:
    """The context a step's forward and loss run in: ``torch.autocast`` to ``autocast``'s
    dtype on ``device``'s type, or nothing."""
    dtype = autocast_dtype(autocast)
    if dtype is None:
        return nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype, cache_enabled=False)
