"""The kept Triton cache (opbench.run.triton_cache): a unit gets back exactly what its own
workers compiled, laid out as Triton reads it, and nothing a worker could smuggle in
(links, odd names, another folder's files)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opbench.run.triton_cache import UnitCache, unit_folder


@pytest.fixture(autouse=True)
def _cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))


def _worker_compiles(cache: UnitCache, key: str, files: dict[str, bytes]) -> None:
    """What Triton's FileCacheManager leaves: files under the key, and a group file that
    names them by the absolute path the worker saw."""
    folder = cache.host_path / key
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    group = {n: f"{cache.worker_path}/{key}/{n}" for n in files}
    (folder / "__grp__k.json").write_text(json.dumps({"child_paths": group}))


def test_a_units_kernels_come_back_to_its_next_worker_with_their_group(tmp_path: Path) -> None:
    host_tmp = tmp_path / "tmp1"
    first = UnitCache("/b", ("add.Tensor",), str(host_tmp))
    assert first.seed() == 0
    key = "A" * 40
    _worker_compiles(first, key, {"k.cubin": b"\x7fELF", "k.json": b"{}"})
    assert first.harvest() == 3
    assert not first.host_path.exists()

    second = UnitCache("/b", ("add.Tensor",), str(tmp_path / "tmp2"))
    assert second.worker_path != first.worker_path
    assert second.seed() == 3
    assert (second.host_path / key / "k.cubin").read_bytes() == b"\x7fELF"
    group = json.loads((second.host_path / key / "__grp__k.json").read_text())["child_paths"]
    # Triton opens the members by these paths: the new worker's folder, not the old one's
    assert group == {n: f"{second.worker_path}/{key}/{n}" for n in ("k.cubin", "k.json")}

    other = UnitCache("/b", ("mul.Tensor",), str(tmp_path / "tmp3"))
    assert other.seed() == 0  # another unit never sees them
    assert unit_folder("/b", ("add.Tensor",)) != unit_folder("/c", ("add.Tensor",))


def test_another_source_in_the_same_folder_gets_another_cache(tmp_path: Path) -> None:
    """A Scorer lane rewrites one folder per candidate: candidates never share."""
    backend = tmp_path / "lane"
    (backend / "relu__default").mkdir(parents=True)
    impl = backend / "relu__default" / "relu__default_implementation.py"
    impl.write_text("A = 1\n")
    first = unit_folder(str(backend), ("relu__default",))
    impl.write_text("A = 2\n")
    assert unit_folder(str(backend), ("relu__default",)) != first
    impl.write_text("A = 1\n")
    assert unit_folder(str(backend), ("relu__default",)) == first


def test_links_odd_names_and_foreign_group_members_are_not_kept(tmp_path: Path) -> None:
    cache = UnitCache("/b", ("relu.default",), str(tmp_path / "tmp"))
    cache.seed()
    key = "B" * 40
    secret = tmp_path / "harness-secret"
    secret.write_text("x")
    (cache.host_path / key).mkdir()
    os.symlink(secret, cache.host_path / key / "k.cubin")
    (cache.host_path / "short").mkdir()
    (cache.host_path / "short" / "k.ptx").write_text("ptx")
    (cache.host_path / key / "deep").mkdir()
    (cache.host_path / key / "deep" / "k.ptx").write_text("ptx")
    (cache.host_path / key / "__grp__k.json").write_text(
        json.dumps({"child_paths": {"k.ptx": "/etc/passwd"}})
    )
    (cache.host_path / key / "k.ttir").write_text("ir")
    assert cache.harvest() == 1
    kept = unit_folder("/b", ("relu.default",))
    assert sorted(p.name for p in (kept / key).iterdir()) == ["k.ttir"]


def test_existing_files_are_never_overwritten(tmp_path: Path) -> None:
    key = "C" * 40
    kept = unit_folder("/b", None)
    (kept / key).mkdir(parents=True)
    (kept / key / "k.cubin").write_bytes(b"first")
    cache = UnitCache("/b", None, str(tmp_path / "tmp"))
    cache.seed()
    (cache.host_path / key / "k.cubin").write_bytes(b"forged")
    assert cache.harvest() == 0
    assert (kept / key / "k.cubin").read_bytes() == b"first"


def test_the_harness_built_driver_module_is_seeded_and_never_harvested(tmp_path: Path) -> None:
    driver = tmp_path / "driver"
    key = "D" * 40
    (driver / key).mkdir(parents=True)
    (driver / key / "cuda_utils.so").write_bytes(b"trusted")
    cache = UnitCache("/b", ("abs.default",), str(tmp_path / "tmp"), driver=driver)
    assert cache.seed() == 1
    assert (cache.host_path / key / "cuda_utils.so").read_bytes() == b"trusted"
    (cache.host_path / key / "cuda_utils.so").write_bytes(b"forged by the unit")
    assert cache.harvest() == 0  # the unit's folder never holds the harness's build
    assert not (unit_folder("/b", ("abs.default",)) / key).exists()
    assert (driver / key / "cuda_utils.so").read_bytes() == b"trusted"


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_without_a_gpu_driver_no_driver_folder_is_claimed() -> None:
    import torch

    from opbench.run.triton_cache import driver_folder

    if torch.cuda.is_available():
        pytest.skip("a GPU machine builds the module")
    assert driver_folder() is None


def test_a_backend_keeps_only_its_newest_unit_folders(tmp_path: Path) -> None:
    import time

    from opbench.run.triton_cache import prune

    root = tmp_path / "backend"
    for i in range(5):
        (root / f"unit{i}").mkdir(parents=True)
        t = time.time() - 100 + i
        os.utime(root / f"unit{i}", (t, t))
    assert prune(root, 3) == 2
    assert sorted(p.name for p in root.iterdir()) == ["unit2", "unit3", "unit4"]
