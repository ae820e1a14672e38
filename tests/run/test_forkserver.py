"""The fork server's template must never ask CUDA anything: once a process has asked for
the device count, PyTorch marks its forks as unable to use CUDA, and every forked worker
dies on its first CUDA call (seen on the H100: ``torch.cuda.is_available()`` in the
settings reader made a whole GPU run fail at its first worker). The CPU build has no
CUDA to poison, so here every way into CUDA's device count is made to fail loudly while
the template warms up, in a fresh interpreter so nothing was imported before."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import torch

    def refuse(name):
        def f(*a, **k):
            raise AssertionError(f"the template called torch.cuda.{name}()")
        return f

    torch.backends.cuda.is_built = lambda: True  # look like a CUDA build
    for name in ("is_available", "device_count", "current_device", "_lazy_init", "init"):
        setattr(torch.cuda, name, refuse(name))
    torch._C._cuda_getDeviceCount = refuse("_C._cuda_getDeviceCount")

    from opbench.run import forkserver, worker

    assert forkserver._first_poisoning_step(forkserver.template_steps) == ""
    assert worker.TEMPLATE_FINGERPRINT is not None and worker.WARMED_BY_TEMPLATE
    print("warm")
    """
)


@pytest.mark.slow
def test_the_template_warms_up_without_asking_cuda_anything() -> None:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("warm")


@pytest.mark.slow
def test_a_probe_fork_finds_cuda_usable_in_a_clean_template() -> None:
    """The probe the template runs before it says ready, in a fresh interpreter that
    imported torch and nothing more: its forks can use CUDA. (On a GPU, the same probe
    after ``torch.cuda.is_available()`` reports the fork bad: the template then refuses.)"""
    probe = (
        "import torch\n"
        "from opbench.run import forkserver\n"
        "clean = forkserver._forks_cannot_use_cuda()\n"
        "gpu = torch.cuda.is_available()  # asks the device count: poisons forks on a GPU\n"
        "print(clean, forkserver._forks_cannot_use_cuda() if gpu else True)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["False", "True"]


def test_a_cpu_only_torch_runs_the_steps_without_probe_forks(monkeypatch) -> None:
    """Without CUDA in the build no fork can be spoiled: the template skips its four probe
    forks (a fork and an exit each, on every start) but still runs every step."""
    import torch

    from opbench.run import forkserver

    def no_probe() -> bool:
        raise AssertionError("probed a fork on a build without CUDA")

    ran: list[str] = []
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: False)
    monkeypatch.setattr(forkserver, "_forks_cannot_use_cuda", no_probe)
    steps = [("a", lambda: ran.append("a")), ("b", lambda: ran.append("b"))]
    assert forkserver._first_poisoning_step(lambda: steps) == ""
    assert ran == ["a", "b"]
