"""Fixtures shared by the run tests."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray with two CPUs for one test module (the Ray tests skip without Ray)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'opbench[ray]')")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    tmp = tempfile.mkdtemp(prefix="opray", dir="/tmp")  # Ray's socket paths must stay short
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, log_to_driver=False)
    yield
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
