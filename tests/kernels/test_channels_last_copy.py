"""The copy into channels-last (:mod:`opbench.kernels._lib.channels_last_copy`) in front of
the channels-last GEMMs: equal to PyTorch's, element for element, over dense and other
views on the interpreter's and the GPU's tiles, launched only where its kernel applies,
and served once inside a backward's :func:`shared_copies` block until its tensor
changes."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import seeded_randn as _r  # noqa: E402

from opbench.kernels._lib import channels_last_copy  # noqa: E402


def test_a_shared_copy_is_made_again_once_its_tensor_changes() -> None:
    """Inside ``shared_copies`` a tensor's copy serves again until the tensor is written in
    place; another view of other strides, or a call outside the block, copies anew."""
    x = _r((2, 24, 3, 5), torch.float16, 40).unsqueeze(2)  # [N, C, 1, H, W], NCHW
    with channels_last_copy.shared_copies():
        first = channels_last_copy.channels_last_5d(x)
        assert channels_last_copy.channels_last_5d(x) is first
        x.add_(1.0)
        again = channels_last_copy.channels_last_5d(x)
        assert again is not first
        torch.testing.assert_close(again, x, rtol=0, atol=0)
        assert again.stride(1) == 1
        part = x[:1]
        assert channels_last_copy.channels_last_5d(part) is not again
    assert channels_last_copy.channels_last_5d(x) is not again


@pytest.mark.parametrize("tiles", ["interpreter", "gpu", "gpu-many-c"])
@pytest.mark.parametrize(
    "view",
    ["contiguous", "channel_slice", "batch_slice", "3d", "1d", "odd", "aligned8", "strided"],
)
def test_channels_last_copy(view: str, tiles: str, monkeypatch) -> None:
    """The copy into channels-last equals PyTorch's, element for element, for inputs
    whose positions are dense (the kernel) and others (PyTorch's copy); ``gpu``: the
    GPU's tiles (up to 128 channels: one partial tile of 128 channels, positions over
    several of 32 and a partial one); ``gpu-many-c``: the tile of more channels (64 x 16)
    over several tiles of both, partial ones too."""
    if tiles != "interpreter":
        monkeypatch.setattr(channels_last_copy, "_INTERPRETING", False)
    if tiles == "gpu-many-c":
        monkeypatch.setattr(channels_last_copy, "TRANSPOSE_SMALL_C_MAX", 0)
    base = _r((3, 72, 9, 10), torch.float16, 20)
    x = {
        "contiguous": base,
        "channel_slice": base[:, 5:70],
        "batch_slice": base[1:],
        "3d": _r((2, 24, 3, 4, 5), torch.float16, 21),
        "1d": _r((2, 40, 70), torch.float16, 22),
        "odd": _r((1, 3, 7, 5), torch.float32, 23),  # rows 35 apart: 1-element alignment
        "aligned8": _r((2, 16, 4, 8), torch.bfloat16, 24),  # 32 apart, 16 channels: 8
        "strided": base[:, :, ::2],
    }[view]
    x5 = x
    while x5.dim() < 5:
        x5 = x5.unsqueeze(2)
    launches: list[int] = []
    real = channels_last_copy._to_channels_last
    monkeypatch.setattr(channels_last_copy, "_to_channels_last",
                        lambda *a, **k: (launches.append(1), real(*a, **k)))  # fmt: skip
    got = channels_last_copy.channels_last_5d(x5)
    assert got.stride(1) == 1 and torch.equal(got, x5)
    assert bool(launches) == (view != "strided")  # rows of positions apart: PyTorch copies
