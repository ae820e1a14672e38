"""The fork server's template must never ask CUDA anything: once a process has asked for
the device count, PyTorch marks its forks as unable to use CUDA, and every forked worker
dies on its first CUDA call (seen on the H100: ``torch.cuda.is_available()`` in the
settings reader made a whole GPU run fail at its first worker). The CPU build has no
CUDA to poison, so here every way into CUDA's device count is made to fail loudly while
the template warms up, in a fresh interpreter so nothing was imported before."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import os, sys, traceback
    import torch

    def driver(name):
        # what reaches the CUDA driver (cuInit): ends the probe, since the template's
        # warm-up swallows exceptions (it is an optimisation)
        def f(*a, **k):
            print(f"the template called torch.cuda.{name}()", file=sys.stderr)
            traceback.print_stack(limit=8)
            os._exit(3)
        return f

    def counted(name):
        # torch's NVML-based answer: from CUDA_VISIBLE_DEVICES alone when it is empty
        def f(*a, **k):
            nvml = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == "1"
            if nvml and os.environ.get("CUDA_VISIBLE_DEVICES") == "":
                return False if name == "is_available" else 0
            driver(name)()
        return f

    for name in ("is_available", "device_count"):
        setattr(torch.cuda, name, counted(name))
    for name in ("current_device", "_lazy_init", "init", "get_device_properties",
                 "get_device_capability", "set_device", "synchronize"):
        setattr(torch.cuda, name, driver(name))

    from opbench.run import forkserver, worker

    for _, step in forkserver.template_steps():
        step()
    assert worker.TEMPLATE_FINGERPRINT is not None and worker.WARMED_BY_TEMPLATE
    print("warm")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("preload", ["", "opinfo"])
def test_the_template_warms_up_without_asking_cuda_anything(preload: str) -> None:
    """Under the environment a GPU template gets (:func:`forkserver.template_env`), with
    the OpInfo preload the Scorer asks for and without: nothing reaches the driver."""
    from opbench.run.forkserver import template_env

    env = template_env({**os.environ, "OPBENCH_PRELOAD": preload}, "cuda")
    r = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("warm")


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_without_the_template_env_the_opinfo_preload_asks_cuda() -> None:
    """The probe above can fail: with the GPU visible, importing op_db asks CUDA."""
    env = {**os.environ, "OPBENCH_PRELOAD": "opinfo", "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    r = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
    assert "the template called torch.cuda.is_available()" in r.stderr


def test_a_fork_restores_the_harness_view_of_the_gpus(monkeypatch) -> None:
    from opbench.run import forkserver

    for harness_value in ("1,3", None):
        base = {} if harness_value is None else {"CUDA_VISIBLE_DEVICES": harness_value}
        env = forkserver.template_env(base, "cuda:0")
        assert env["CUDA_VISIBLE_DEVICES"] == ""
        for k in ("CUDA_VISIBLE_DEVICES", forkserver._VISIBLE_ENV):
            monkeypatch.setenv(k, env[k])
        forkserver.restore_visible_devices()
        assert os.environ.get("CUDA_VISIBLE_DEVICES") == harness_value
        assert forkserver._VISIBLE_ENV not in os.environ
    assert forkserver.template_env({"A": "1"}, "cpu") == {"A": "1"}


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


def test_op_db_is_imported_as_if_numba_were_absent() -> None:
    """numba.cuda.is_available() (asked by PyTorch's test helpers when numba exists)
    initialises the driver behind torch's back: hidden while op_db imports, and only then."""
    import importlib.util

    from opbench.run.warm_up import numba_hidden

    had = sys.modules.get("numba", 0)
    with numba_hidden():
        assert importlib.util.find_spec("numba") is None
    assert sys.modules.get("numba", 0) is had


def test_a_forked_workers_numpy_products_start_no_thread() -> None:
    """Under the workers' environment numpy's BLAS has no threads of its own, so a fork's
    first product starts none: such a thread, started inside a test, was judged the
    unit's (``tampering``) for the Triton backend's 3D transposed convolution."""
    from opbench.run.worker_config import WorkerConfig
    from opbench.run.worker_env import worker_env

    code = textwrap.dedent(
        """
        import os
        import numpy as np

        def tasks():
            return set(os.listdir("/proc/self/task"))

        a = np.ones((256, 256), dtype=np.float32)
        (a @ a).sum()
        pid = os.fork()
        if pid == 0:
            before = tasks()
            b = np.ones((512, 512), dtype=np.float32)
            (b @ b).sum()
            os._exit(0 if tasks() <= before else 1)
        _, status = os.waitpid(pid, 0)
        print("same" if os.waitstatus_to_exitcode(status) == 0 else "new threads")
        """
    )
    env = worker_env(WorkerConfig(backend="aten", device="cpu"), "cpu")
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "same", r.stdout


def test_a_gpu_template_computes_tritons_compiler_key_ahead(monkeypatch) -> None:
    """A fresh fork's first Triton compile hashed Triton's 500 MB library before it could
    read the kernel from the cache (most of a Scorer candidate's time on the H100): a
    template for GPU workers computes it once for all its forks; a CPU template (Triton's
    interpreter compiles nothing) does not spend the second."""
    from opbench.run import forkserver

    def names() -> list[str]:
        return [name for name, _ in forkserver.template_steps()]

    assert "warm-up: Triton compiler key" not in names()
    for key, value in forkserver.template_env({}, "cuda").items():
        monkeypatch.setenv(key, value)
    assert "warm-up: Triton compiler key" in names()
    code = textwrap.dedent(
        """
        import importlib
        from opbench.run.worker import warm_triton_compiler
        warm_triton_compiler()
        for module in ("triton.runtime.cache", "triton.compiler.compiler"):
            key = getattr(importlib.import_module(module), "triton_key", None)
            if key is not None:
                print(key.cache_info().currsize)
                break
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["1"]
