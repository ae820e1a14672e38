"""Backend settings: pinned in workers, read back in full, and watched for changes."""

import json
import subprocess
import sys

import pytest
import torch

from opbench.instrument import settings

_PROBE = r"""
import json, sys, torch
from opbench.instrument import settings
from opbench.instrument.integrity import Fingerprint
if sys.argv[1] == "frozen":  # what importing PyTorch's OpInfo database does
    torch.backends.disable_global_flags()
before = settings.read()
pinned = settings.pin(allow_tf32=sys.argv[1] == "tf32")
after = settings.read()
fp = Fingerprint()
torch.backends.mkldnn.matmul.fp32_precision = "bf16"  # what a kernel module could do
print(json.dumps({"before": before, "pinned": pinned, "after": after,
                  "changes": fp.settings_changes()}))
"""


def _probe(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.slow
def test_pin_makes_float32_ieee_and_read_reports_every_setting() -> None:
    r = _probe("ieee")
    # PyTorch's own default runs cuDNN convolutions in TF32
    assert r["before"]["cudnn.conv.fp32_precision"] == "tf32"
    for path in ("cuda.matmul", "cudnn.conv", "mkldnn.matmul"):
        assert r["after"][f"{path}.fp32_precision"] == "ieee"
        assert r["pinned"][f"{path}.fp32_precision"] == "ieee"
    assert r["after"]["cudnn.benchmark"] is False
    for key in ("num_threads", "mha.fastpath", "sdp.flash", "cpu.capability", "mkldnn.enabled"):
        assert key in r["after"], key
    json.dumps(r["after"])  # plain JSON values


@pytest.mark.slow
def test_allow_tf32_only_for_cublas_and_cudnn() -> None:
    r = _probe("tf32")
    assert r["after"]["cuda.matmul.fp32_precision"] == "tf32"
    assert r["after"]["cudnn.conv.fp32_precision"] == "tf32"
    assert r["after"]["mkldnn.matmul.fp32_precision"] == "ieee"


@pytest.mark.slow
def test_the_fingerprint_sees_a_precision_changed_after_pinning() -> None:
    changes = _probe("ieee")["changes"]
    assert any("mkldnn.matmul.fp32_precision" in c and "bf16" in c for c in changes), changes


@pytest.mark.slow
def test_pin_works_after_pytorch_froze_the_backend_flags() -> None:
    """Importing ``torch.testing._internal.common_methods_invocations`` (the OpInfo
    suite's preload) freezes cuDNN's flags; pinning must still work there."""
    r = _probe("frozen")
    assert r["after"]["cudnn.benchmark"] is False
    assert r["after"]["cudnn.conv.fp32_precision"] == "ieee"


def test_reading_the_settings_never_initialises_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork server's template reads them (a worker's fingerprint starts there) and
    must never initialise CUDA, or every worker starts as a new process. Here CUDA is
    made to look built and not yet initialised; what initialises it on the H100 (the
    cuDNN version, the cuFFT plan cache through the current device) is recorded, and so
    is asking for the device count, which poisons forks without initialising CUDA."""
    asked: list[str] = []
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append("is_available") or True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: asked.append("device_count") or 1)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: asked.append("current_device") or 0)
    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: asked.append("_lazy_init"))
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: asked.append("cudnn") or 1)
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    values = settings.read()
    assert asked == []
    assert not set(settings.CUDA_INITIALISED_ONLY) & set(values)
    assert "cuda.matmul.allow_tf32" in values
    assert "cuda.preferred_blas_library" in values
