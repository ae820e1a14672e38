"""Finding program problems (KernelBench format) and asking them what they need.

Runs in the HARNESS, on problem files only: a problem is the benchmark's own definition
of what is right (``class Model``, ``get_inputs()``, ``get_init_inputs()``), so the
harness imports it to compute references. Candidate files (``ModelNew``) are never
imported here; they are read as text and sent to a sandboxed worker.

Layout of a suite folder: ``levelN/<name>.py`` subfolders (``--levels`` picks some), or
``.py`` files directly in the folder (level ``""``). Our own set adds optional
``SIZES``, ``get_inputs(size)``, ``get_init_inputs(size)``, ``flops(size)`` and
``bytes_moved(size)``; a size is passed only to functions that take a parameter, so
KernelBench files load unchanged.

Not every problem can run everywhere: one that imports a package this machine lacks,
needs Hugging Face hub files (KernelBench level 4 builds models with
``from_pretrained``), or whose inputs and parameters exceed the memory cap is
*not runnable here*, with the reason; that is not a failure of the candidate.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import re
import sys
import threading
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from opbench.programs.inputs import call_sized, tensors_of

__all__ = [
    "OWN_PROBLEMS",
    "Problem",
    "ProblemError",
    "call_sized",
    "discover",
    "estimate_bytes",
    "load_module",
    "not_runnable_reason",
    "single_problem",
]

#: Our own problem set (``--suite programs``), written in the same format.
OWN_PROBLEMS = Path(__file__).resolve().parent / "problems"

_LEVEL_DIR = re.compile(r"^level(\d+)$")


class ProblemError(ValueError):
    """A suite or problem path that cannot be used as given (bad usage, exit code 2)."""


@dataclass(frozen=True)
class Problem:
    """One program problem: where its file is and which candidate file judges it.

    ``problem_id`` (``level1/19_ReLU``) names the test in the run directory; it is the
    path under the suite root without ``.py``, so a resumed run finds it again.
    ``candidate``: the ``ModelNew`` file, or None when a backend is judged (or when the
    candidate folder has no file for this problem: ``candidate_missing``).
    """

    problem_id: str
    path: Path
    level: str = ""
    candidate: Path | None = None
    candidate_missing: bool = False
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


def _levels_in(root: Path) -> dict[str, Path]:
    out = {}
    for d in sorted(root.iterdir()):
        m = _LEVEL_DIR.match(d.name)
        if d.is_dir() and m:
            out[m.group(1)] = d
    return out


def _problem_files(folder: Path) -> list[Path]:
    """The problem files of one folder: ``*.py`` not starting with ``_``, sorted the way
    KernelBench numbers them (``2_x`` before ``10_x``)."""

    def key(p: Path) -> tuple[int, str]:
        head = p.name.split("_", 1)[0]
        return (int(head) if head.isdigit() else 1 << 30, p.name)

    return sorted((p for p in folder.glob("*.py") if not p.name.startswith("_")), key=key)


def discover(
    root: Path,
    *,
    levels: Iterable[str] | None = None,
    candidates: Path | None = None,
) -> list[Problem]:
    """Every problem under ``root`` (``levelN/`` subfolders, else the folder's own files).

    ``levels``: level numbers to keep (``["1", "2"]``); ``candidates``: a folder that
    mirrors ``root`` (``levelN/<file>.py``) holding one ``ModelNew`` file per problem.
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ProblemError(f"no such problem folder: {root}")
    if candidates is not None and not Path(candidates).is_dir():
        raise ProblemError(f"--candidates {candidates}: no such folder")
    by_level = _levels_in(root)
    wanted = {str(int(x)) for x in levels} if levels else None
    if wanted is not None and not by_level:
        raise ProblemError(f"--levels: {root} has no level<N> subfolders")
    if wanted is not None:
        unknown = sorted(wanted - set(by_level), key=int)
        if unknown:
            raise ProblemError(
                f"--levels {','.join(unknown)}: {root} has levels {','.join(by_level) or 'none'}"
            )
    folders = (
        [(lvl, d) for lvl, d in by_level.items() if wanted is None or lvl in wanted]
        if by_level
        else [("", root)]
    )
    out = []
    for level, folder in folders:
        for path in _problem_files(folder):
            rel = path.relative_to(root)
            cand = None
            missing = False
            if candidates is not None:
                cand = Path(candidates).expanduser() / rel
                missing = not cand.is_file()
                cand = None if missing else cand.resolve()
            out.append(
                Problem(
                    problem_id=rel.with_suffix("").as_posix(),
                    path=path.resolve(),
                    level=level,
                    candidate=cand,
                    candidate_missing=missing,
                )
            )
    return out


def only(problems: list[Problem], names: Iterable[str]) -> list[Problem]:
    """``--ops`` for a program suite: the problems named by id (``level1/19_ReLU``) or by
    file stem (``19_ReLU``), in suite order; an unknown name is a usage error."""
    wanted = [n.strip().removesuffix(".py") for n in names if n.strip()]
    ids = {p.problem_id for p in problems}
    stems = {p.problem_id.rsplit("/", 1)[-1] for p in problems}
    unknown = [n for n in wanted if n not in ids and n not in stems]
    if unknown:
        some = ", ".join(sorted(ids)[:6])
        raise ProblemError(
            f"--ops: no problem {', '.join(unknown)} in this suite (ids look like {some}, ...)"
        )
    keep = set(wanted)
    return [p for p in problems if p.problem_id in keep or p.problem_id.rsplit("/", 1)[-1] in keep]


def single_problem(problem: Path, candidate: Path | None) -> Problem:
    """``--problem P.py [--candidate C.py]``: one problem named by its file's stem."""
    problem = Path(problem).expanduser()
    if not problem.is_file():
        raise ProblemError(f"--problem {problem}: no such file")
    if candidate is not None and not Path(candidate).expanduser().is_file():
        raise ProblemError(f"--candidate {candidate}: no such file")
    return Problem(
        problem_id=problem.stem,
        path=problem.resolve(),
        candidate=Path(candidate).expanduser().resolve() if candidate is not None else None,
    )


# --------------------------------------------------------------------------- importing

_modules: dict[Path, types.ModuleType] = {}
_modules_lock = threading.Lock()


def _module_name(path: Path) -> str:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    return f"opbench_problem_{stem}_{digest}"


def load_module(path: Path) -> types.ModuleType:
    """Import a problem file once per process (cached by path).

    Hugging Face hub access is switched to offline mode first unless the user set
    ``HF_HUB_OFFLINE`` (a level-4 problem then fails at once with a clear error instead of
    waiting on a network this machine may not have); cached hub files still load.
    """
    path = Path(path).resolve()
    with _modules_lock:
        if path in _modules:
            return _modules[path]
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        name = _module_name(path)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses and pickling look modules up by name
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _modules[path] = mod
        return mod


def problem_api(mod: types.ModuleType) -> str | None:
    """What a problem module lacks of the format, or None when it is complete."""
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, n)]
    return f"the problem file lacks {', '.join(missing)}" if missing else None


# --------------------------------------------------------------------------- runnable here?

_HUB = ("from_pretrained", "huggingface", "AutoModel", "AutoConfig")


def not_runnable_reason(path: Path, error: BaseException) -> str:
    """Why a problem that raised ``error`` while loading or building cannot run here.

    A missing package and hub files that cannot be fetched are this machine's limits,
    named as such; anything else is the problem file's own error, quoted."""
    first = (str(error).strip().splitlines() or [""])[0][:300]
    if isinstance(error, ModuleNotFoundError):
        return f"needs the Python package {error.name!r}, which is not installed here"
    try:
        source = Path(path).read_text(errors="replace")
    except OSError:
        source = ""
    if any(h in source for h in _HUB):
        return (
            "needs Hugging Face hub files (model config and weights via from_pretrained), "
            "which this machine cannot fetch (no network, or HF_HUB_OFFLINE): "
            f"{type(error).__name__}: {first}"
        )
    return f"the problem itself fails to load or build: {type(error).__name__}: {first}"


def _nbytes(tensors: Iterable[torch.Tensor]) -> int:
    seen: set[tuple[Any, int]] = set()
    total = 0
    for t in tensors:
        key = (t.device, id(t)) if t.device.type == "meta" else (t.device, t.data_ptr())
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def estimate_bytes(mod: types.ModuleType, size: str | None) -> tuple[int, str, int | None]:
    """Bytes of the inputs, the model's parameters and buffers and its outputs, how they
    were found, and the outputs' bytes alone (None when unknown).

    On the ``meta`` device first (shapes only, nothing allocated: a KernelBench level-1
    ReLU asks for 6.4 GB of input, and a small-K matmul returns 4 GB from 16 MB of
    inputs); the forward pass runs there too when every op it calls has a meta kernel
    (else outputs are not counted). A problem that cannot be built on ``meta`` is built
    for real on the CPU and measured (inputs and parameters only)."""
    init = call_sized(mod.get_init_inputs, size)
    try:
        with torch.device("meta"):
            inputs = call_sized(mod.get_inputs, size)
            model = mod.Model(*init)
        how = "meta"
    except Exception:
        inputs = call_sized(mod.get_inputs, size)
        model = mod.Model(*init)
        how = "built"
    state = [*model.parameters(), *model.buffers()]
    total = _nbytes(tensors_of(inputs)) + _nbytes(state)
    outputs = None
    if how == "meta":
        try:
            with torch.device("meta"), torch.no_grad():
                outputs = _nbytes(tensors_of(model(*inputs)))
        except Exception:
            how = "meta, without outputs"
    return total + (outputs or 0), how, outputs


_READS_TRAINING: dict[type, bool] = {}


def _reads_training(cls: type) -> bool:
    """Whether a module class's own source (or a base's, short of ``nn.Module``) reads
    ``self.training``; a class whose source cannot be read counts as not reading it."""
    if cls not in _READS_TRAINING:
        found = False
        for base in cls.__mro__:
            if base is torch.nn.Module or not issubclass(base, torch.nn.Module):
                break
            try:
                found = "self.training" in inspect.getsource(base)
            except (OSError, TypeError):
                continue
            if found:
                break
        _READS_TRAINING[cls] = found
    return _READS_TRAINING[cls]


def mode_dependent(mod: types.ModuleType, size: str | None = None) -> list[str]:
    """The classes in a problem's ``Model`` whose forward may differ between training and
    eval mode (batch norm, dropout, recurrent and attention layers...), sorted; empty when
    ``model.eval()`` changes nothing.

    KernelBench and opbench's judge run problems as built, in training mode: a baseline
    timed after ``.eval()`` times another computation (a level-3 EfficientNet-B2's eager
    time fell to a fifth of KernelBench's). Built on ``meta`` (nothing allocated); a source that cannot be read
    counts as mode-independent; norms without running statistics and dropout with p = 0
    are left out (both modes compute the same), and the rule is a superset otherwise. A model that cannot be built on
    ``meta`` (Swin's constructor calls ``.item()``) is built on the CPU."""
    init = call_sized(mod.get_init_inputs, size)
    try:
        with torch.device("meta"):
            model = mod.Model(*init)
    except Exception:
        model = mod.Model(*init)
    return sorted({type(m).__name__ for m in model.modules() if _mode_matters(m)})


def _mode_matters(m: torch.nn.Module) -> bool:
    nn = torch.nn.modules
    if isinstance(m, nn.batchnorm._NormBase) and not m.track_running_stats:
        return False  # batch statistics in both modes
    if isinstance(m, nn.dropout._DropoutNd) and m.p == 0:
        return False
    return _reads_training(type(m))


def default_max_bytes(device: str) -> int:
    """The memory cap of one problem's inputs and parameters: an eighth of the GPU's
    memory (the harness holds a float64 reference and the worker two models and their
    activations beside it), 2 GiB on the CPU."""
    if device.startswith("cuda") and torch.cuda.is_available():
        dev = torch.device(device)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return torch.cuda.get_device_properties(index).total_memory // 8
    return 2 << 30
