"""bind_device: a run's "cuda" (no index) means the first GPU.

torch.cuda.set_device rejects an index-less torch.device("cuda"); passing one made every
compile-cache warm-up fail on the H100, so the workers compiled cold. The CUDA call is
recorded here, since CI has no GPU.
"""

import torch

from opbench.instrument.tensors import bind_device


def _calls(monkeypatch) -> list:
    seen: list = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: seen.append(d))
    return seen


def test_indexless_cuda_means_the_first_gpu(monkeypatch):
    seen = _calls(monkeypatch)
    bind_device("cuda")
    bind_device(torch.device("cuda"))
    assert seen == [0, 0] and all(type(d) is int for d in seen)


def test_an_index_is_kept(monkeypatch):
    seen = _calls(monkeypatch)
    bind_device("cuda:3")
    assert seen == [3]


def test_cpu_binds_nothing(monkeypatch):
    seen = _calls(monkeypatch)
    bind_device("cpu")
    bind_device(torch.device("cpu"))
    assert seen == []
