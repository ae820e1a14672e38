"""Lints for program problems: find a problem that a wrong kernel could pass.

A problem (KernelBench format: ``Model``, ``get_inputs()``, ``get_init_inputs()``) is only
as strong as its inputs and output. KernelBench-style judging compares a candidate with
the reference at about atol = rtol = 1e-2, so a problem is weak when an answer that does
not compute the model would pass: its output is nearly the same for every input draw
(a batch-mean loss), an input never reaches the output, or the output is so small that
zeros pass. A forward that draws random numbers (dropout left on) cannot be judged at
all. Each check runs the problem's own code, with the model's weights fixed (seed 0) and
inputs drawn from seeds 1, 2 and 3:

* ``tiny_output``: max |out| < atol, so all-zeros passes.
* ``constant_output``: the seed-1 output, given as the answer for seeds 2 and 3, passes
  (elementwise ``|a - b| <= atol + rtol |b|``).
* ``unused_input``: redrawing one input alone leaves the output within tolerance, so an
  answer that ignores that input passes.
* ``random_forward``: the same inputs and weights, run twice with different generator
  seeds, give different outputs (beyond float rounding).
* ``nonfinite_output``: NaN or Inf in the output for ordinary inputs.
* ``load_error`` / ``run_error``: the file does not import, lacks the format's names, or
  raises while building or running; the lint goes on with the other files.

The checks are ordered by cause: a tiny output is also constant and ignores its inputs,
so only ``tiny_output`` is reported for it; a constant one is not checked per input.

Problem files run in this process: they are benchmark definitions the user supplies, not
candidate kernels (which opbench never imports outside its sandboxed workers). Each file
is imported under its own module name and dropped afterwards, so two files with the same
name (``level1/1_x.py``, ``level2/1_x.py``) never see each other.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import os
import re
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from opbench.programs.inputs import call_sized, seed_all, tensors_of, to_device

__all__ = [
    "ATOL",
    "CHECKS",
    "RTOL",
    "Finding",
    "LintResult",
    "ProblemLoadError",
    "lint_file",
    "lint_problems",
    "load_problem",
    "problem_files",
]

#: The tolerance a typical judge (KernelBench's) compares outputs with.
ATOL = 1e-2
RTOL = 1e-2
#: Two runs of a deterministic forward may still differ by float rounding (reduction
#: order on a GPU); differences beyond this are randomness.
REPEAT_ATOL = 1e-5
REPEAT_RTOL = 1e-4

WEIGHT_SEED = 0
INPUT_SEEDS = (1, 2, 3)
#: The generator is re-seeded with this before every forward, so a random forward does
#: not blur the other checks; ``random_forward`` alone runs with a second seed.
FORWARD_SEED = 1234

CHECKS = {
    "load_error": "the file does not import or lacks Model / get_inputs / get_init_inputs",
    "run_error": "building the model, drawing inputs or running forward raised",
    "nonfinite_output": "NaN or Inf in the output for ordinary inputs",
    "tiny_output": "max |out| is below atol: an all-zeros answer passes",
    "constant_output": "the output barely changes across input seeds: a fixed answer passes",
    "unused_input": "an input does not reach the output: an answer ignoring it passes",
    "random_forward": "two calls with the same inputs and weights differ",
}


@dataclass(frozen=True)
class Finding:
    """One lint result: which file, which check, what was seen (numbers in ``evidence``)."""

    path: str
    check: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class LintResult:
    """Every file linted, its findings, and files skipped (with why)."""

    files: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def by_check(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.check] = counts.get(f.check, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "findings": [asdict(f) for f in self.findings],
            "skipped": self.skipped,
            "by_check": self.by_check(),
            "tolerance": {"atol": ATOL, "rtol": RTOL},
        }


class ProblemLoadError(Exception):
    """A problem file that cannot be imported, or lacks the format's names."""


# --------------------------------------------------------------------------- finding files


def _number_key(path: Path) -> tuple[str, int, str]:
    """Sort as KernelBench numbers its files (``2_x`` before ``10_x``), folder by folder."""
    head = path.name.split("_", 1)[0]
    return (str(path.parent), int(head) if head.isdigit() else 1 << 30, path.name)


def problem_files(path: Path) -> list[Path]:
    """The problem files named by ``path``: the file itself, or every ``*.py`` under the
    folder (level subfolders included), skipping ``_private.py`` files and caches."""
    path = Path(path).expanduser()
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no such problem file or folder: {path}")
    found = [
        p for p in path.rglob("*.py") if not p.name.startswith("_") and "__pycache__" not in p.parts
    ]
    return sorted(found, key=_number_key)


# --------------------------------------------------------------------------- loading

_load_counter = itertools.count()


def _module_name(path: Path) -> str:
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    stem = re.sub(r"\W", "_", path.stem)
    return f"opbench_lint_{stem}_{digest}_{next(_load_counter)}"


def load_problem(path: Path) -> types.ModuleType:
    """Import one problem file under a fresh module name; raise ProblemLoadError with the
    reason when it fails or lacks ``Model``, ``get_inputs`` or ``get_init_inputs``.

    The module stays in ``sys.modules`` (dataclasses and pickling look it up by name)
    until :func:`unload_problem`. Hugging Face hub access is switched to offline mode
    unless the user set ``HF_HUB_OFFLINE``: a problem that builds a model with
    ``from_pretrained`` (KernelBench level 4) then fails at once instead of downloading."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemLoadError("not a Python file that can be imported")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException as e:  # noqa: BLE001 - any failure is the file's, reported
        sys.modules.pop(name, None)
        if isinstance(e, KeyboardInterrupt):
            raise
        raise ProblemLoadError(f"import failed: {type(e).__name__}: {_first_line(e)}") from e
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, n)]
    if missing:
        sys.modules.pop(name, None)
        raise ProblemLoadError(f"the file lacks {', '.join(missing)}")
    if not (isinstance(mod.Model, type) and issubclass(mod.Model, torch.nn.Module)):
        sys.modules.pop(name, None)
        raise ProblemLoadError("Model is not an nn.Module subclass")
    return mod


def unload_problem(mod: types.ModuleType) -> None:
    sys.modules.pop(mod.__name__, None)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0][:300]


# --------------------------------------------------------------------------- running


@dataclass
class _Problem:
    """A loaded problem ready to run: the model (weights from WEIGHT_SEED) and its size."""

    mod: types.ModuleType
    model: torch.nn.Module
    size: str
    device: str

    def inputs(self, seed: int) -> list[Any]:
        """The inputs drawn from ``seed``: on an accelerator, drawn there (``get_inputs``
        under ``torch.device``): KernelBench's level-1 inputs take several GB, and
        drawing them on the CPU took most of 17 s per file on an H100 machine. The draws
        differ from the CPU's, which no check depends on (each only needs a fixed draw
        per seed); a ``get_inputs`` that fails there is drawn on the CPU."""
        if self.device != "cpu":
            seed_all(seed)
            try:
                with torch.device(self.device):
                    args = list(call_sized(self.mod.get_inputs, self.size))
                return list(to_device(args, self.device))
            except Exception:
                pass
        seed_all(seed)
        return list(to_device(list(call_sized(self.mod.get_inputs, self.size)), self.device))

    def run(self, args: Sequence[Any], forward_seed: int = FORWARD_SEED) -> list[torch.Tensor]:
        """The forward's output tensors as float32 (inputs cloned: a forward that writes
        into its inputs must not change the next call's)."""
        fresh = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        torch.manual_seed(forward_seed)
        with torch.no_grad():
            out = self.model(*fresh)
        tensors = tensors_of(out)
        if not tensors:
            raise TypeError(f"forward returned no tensor ({type(out).__name__})")
        return [t.detach().to(torch.float32) for t in tensors]


def _build(mod: types.ModuleType, size: str, device: str) -> _Problem:
    seed_all(WEIGHT_SEED)
    init = call_sized(mod.get_init_inputs, size)
    seed_all(WEIGHT_SEED)
    model = mod.Model(*init).to(device)
    return _Problem(mod=mod, model=model, size=size, device=device)


# --------------------------------------------------------------------------- comparing


# Outputs of KernelBench's level-1 problems reach 2**31 elements: elementwise
# comparisons run over flat slices so their temporaries stay small beside them.
_SLICE = 1 << 26


def _slices(*tensors: torch.Tensor) -> Iterator[tuple[torch.Tensor, ...]]:
    """Equal flat slices of same-shaped tensors."""
    flat = [t.reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), _SLICE):
        yield tuple(f[start : start + _SLICE] for f in flat)


def _max_abs(outs: Sequence[torch.Tensor]) -> float:
    return max(
        (max(float(s.abs().max()) for (s,) in _slices(t)) if t.numel() else 0.0) for t in outs
    )


def _max_diff(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return float("inf")
    return max(
        (max(float((xs - ys).abs().max()) for xs, ys in _slices(x, y)) if x.numel() else 0.0)
        for x, y in zip(a, b)
    )


def _passes(
    answer: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], atol: float, rtol: float
) -> bool:
    """Would ``answer`` pass a judge that expects ``expected`` (elementwise
    ``|answer - expected| <= atol + rtol |expected|``, NaN matching NaN)?"""
    if len(answer) != len(expected):
        return False
    return all(
        x.shape == y.shape
        and all(
            bool(torch.isclose(xs, ys, rtol=rtol, atol=atol, equal_nan=True).all())
            for xs, ys in _slices(x, y)
        )
        for x, y in zip(answer, expected)
    )


def _g(x: float) -> float | str:
    """A number for the evidence: 4 significant digits; inf and NaN as text (not JSON)."""
    return float(f"{x:.4g}") if x == x and abs(x) != float("inf") else str(x)


# --------------------------------------------------------------------------- the checks


def _perturbed(original: torch.Tensor, redraw: Any) -> torch.Tensor | None:
    """A different value for one input: the other seed's draw when it differs, else a
    change that keeps the input's kind (noise for floats, a shuffle for integers, the
    negation for bools); None when nothing different can be made (all elements equal
    integers)."""
    if (
        isinstance(redraw, torch.Tensor)
        and redraw.shape == original.shape
        and redraw.dtype == original.dtype
        and not torch.equal(redraw, original)
    ):
        return redraw
    if original.numel() == 0:
        return None
    gen = torch.Generator().manual_seed(99)
    if original.dtype == torch.bool:
        return ~original
    if original.is_floating_point() or original.is_complex():
        scale = float(original.abs().float().mean()) + 1.0
        noise = torch.randn(original.shape, generator=gen).to(original.device, original.dtype)
        return original + 0.5 * scale * noise
    flat = original.flatten()
    shuffled = flat[torch.randperm(flat.numel(), generator=gen).to(flat.device)]
    return None if torch.equal(shuffled, flat) else shuffled.view_as(original)


def _describe(arg: Any) -> str:
    if isinstance(arg, torch.Tensor):
        dt = str(arg.dtype).replace("torch.", "")
        return f"{dt}{list(arg.shape)}"
    return type(arg).__name__


def _check_inputs(
    prob: _Problem, args: list[Any], redraw: list[Any], base: list[torch.Tensor], path: str
) -> list[Finding]:
    """``unused_input``: redraw each tensor input alone; flag when the output stays within
    tolerance of the unperturbed one."""
    found = []
    for i, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor):
            continue
        other = redraw[i] if i < len(redraw) else None
        new = _perturbed(arg, other)
        if new is None:
            continue
        out = prob.run([*args[:i], new, *args[i + 1 :]])
        if not _passes(base, out, ATOL, RTOL):
            continue
        diff = _max_diff(base, out)
        how = "leaves the output identical" if diff == 0 else "barely changes the output"
        found.append(
            Finding(
                path,
                "unused_input",
                f"input {i} ({_describe(arg)}): redrawing it {how} (max |change| {_g(diff)}, "
                f"max |out| {_g(_max_abs(base))}); an answer that ignores it passes "
                f"atol={ATOL}/rtol={RTOL}",
                {"input": i, "input_desc": _describe(arg), "max_abs_change": _g(diff)},
            )
        )
    return found


def _check_outputs(outs: list[list[torch.Tensor]], path: str) -> tuple[list[Finding], bool]:
    """``tiny_output`` and ``constant_output`` from the outputs of the input seeds; the
    bool says whether the per-input check still has anything to tell."""
    base = outs[0]
    peak = _max_abs(base)
    if max(_max_abs(o) for o in outs) < ATOL:
        msg = (
            f"max |out| is {_g(max(_max_abs(o) for o in outs))} over seeds {list(INPUT_SEEDS)}, "
            f"below atol={ATOL}: an all-zeros answer passes"
        )
        return [Finding(path, "tiny_output", msg, {"max_abs_out": _g(peak), "atol": ATOL})], False
    if all(_passes(base, other, ATOL, RTOL) for other in outs[1:]):
        spread = max(_max_diff(base, other) for other in outs[1:])
        msg = (
            f"outputs for input seeds {list(INPUT_SEEDS)} differ by at most {_g(spread)} "
            f"(max |out| {_g(peak)}, relative spread {_g(spread / peak)}): the seed-"
            f"{INPUT_SEEDS[0]} output as a fixed answer passes atol={ATOL}/rtol={RTOL}"
        )
        evidence = {
            "max_abs_diff_across_seeds": _g(spread),
            "max_abs_out": _g(peak),
            "relative_spread": _g(spread / peak),
        }
        return [Finding(path, "constant_output", msg, evidence)], False
    return [], True


def _check_random(
    prob: _Problem, args: list[Any], base: list[torch.Tensor], path: str
) -> list[Finding]:
    """``random_forward``: the same call under another generator seed."""
    again = prob.run(args, forward_seed=FORWARD_SEED + 1)
    if _passes(again, base, REPEAT_ATOL, REPEAT_RTOL):
        return []
    diff = _max_diff(base, again)
    return [
        Finding(
            path,
            "random_forward",
            f"two calls with the same inputs and weights differ by up to {_g(diff)} "
            f"(max |out| {_g(_max_abs(base))}): forward draws random numbers (dropout in "
            "training mode?), so no fixed reference exists",
            {"max_abs_diff": _g(diff)},
        )
    ]


def _nonfinite(outs: list[torch.Tensor], path: str) -> list[Finding]:
    bad = sum(int((~torch.isfinite(t)).sum()) for t in outs)
    if not bad:
        return []
    total = sum(t.numel() for t in outs)
    return [
        Finding(
            path,
            "nonfinite_output",
            f"{bad} of {total} output elements are NaN or Inf for input seed {INPUT_SEEDS[0]}",
            {"nonfinite": bad, "elements": total},
        )
    ]


def _lint_loaded(mod: types.ModuleType, size: str, device: str, path: str) -> list[Finding]:
    stage = "building the model"
    try:
        prob = _build(mod, size, device)
        stage = "drawing inputs"
        args = [prob.inputs(seed) for seed in INPUT_SEEDS]
        stage = "running forward"
        outs = [prob.run(a) for a in args]
    except (torch.OutOfMemoryError, MemoryError):
        raise  # the machine's limit, not the problem's fault: lint_file skips the file
    except Exception as e:  # noqa: BLE001 - the problem's own error, reported
        return [
            Finding(
                path,
                "run_error",
                f"{stage} raised {type(e).__name__}: {_first_line(e)}",
                {"stage": stage, "error": type(e).__name__},
            )
        ]
    found = _nonfinite(outs[0], path)
    if found:
        return found
    found = _check_random(prob, args[0], outs[0], path)
    output_findings, go_on = _check_outputs(outs, path)
    found += output_findings
    if go_on:
        found += _check_inputs(prob, args[0], args[1], outs[0], path)
    return found


# --------------------------------------------------------------------------- entry points


def lint_file(
    path: Path, size: str = "small", device: str = "cpu", max_bytes: int | None = None
) -> tuple[list[Finding], str | None]:
    """Lint one problem file: its findings, and the reason it was skipped (or None).

    ``size`` is passed to ``get_inputs``/``get_init_inputs`` only when they take a
    parameter (KernelBench files do not). ``max_bytes``: skip a problem whose inputs and
    parameters exceed it (measured on the meta device, nothing allocated)."""
    shown = str(path)
    try:
        mod = load_problem(Path(path))
    except ProblemLoadError as e:
        return [Finding(shown, "load_error", str(e), {})], None
    try:
        if max_bytes is not None:
            need = _problem_bytes(mod, size)
            if need is not None and need > max_bytes:
                return [], (
                    f"inputs and parameters need {need / 2**30:.2f} GiB, over the "
                    f"{max_bytes / 2**30:.2f} GiB limit (try --size small or a GPU)"
                )
        return _lint_loaded(mod, size, device, shown), None
    except (torch.OutOfMemoryError, MemoryError) as e:
        # the problem's size, not a finding: the next file may well fit
        return [], f"out of memory on {device}: {type(e).__name__}: {_first_line(e)}"
    finally:
        unload_problem(mod)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def _problem_bytes(mod: types.ModuleType, size: str) -> int | None:
    """Bytes of the inputs plus parameters and buffers, from shapes on the meta device;
    None when the problem cannot be built there (then it is simply run)."""
    try:
        with torch.device("meta"):
            init = call_sized(mod.get_init_inputs, size)
            inputs = call_sized(mod.get_inputs, size)
            model = mod.Model(*init)
    except Exception:  # noqa: BLE001 - some problems cannot be built on meta
        return None
    state = [*model.parameters(), *model.buffers(), *tensors_of(list(inputs))]
    return sum(t.numel() * t.element_size() for t in state)


def default_max_bytes(device: str) -> int:
    """Inputs and parameters allowed per problem: the lint holds several copies of the
    inputs and outputs at once, so an eighth of the GPU's memory, 2 GiB on the CPU."""
    if device.startswith("cuda") and torch.cuda.is_available():
        dev = torch.device(device)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return torch.cuda.get_device_properties(index).total_memory // 8
    return 2 << 30


def lint_problems(
    path: Path,
    size: str = "small",
    device: str = "cpu",
    *,
    max_bytes: int | None = None,
    on_file: Callable[[Path, int, int], None] | None = None,
    journal: Path | None = None,
) -> LintResult:
    """Lint every problem file under ``path`` (a file or a folder, recursively).

    ``on_file(path, index, total)`` is called before each file (for a progress bar).
    ``journal``: a JSON-lines file each file's result is appended to as it finishes;
    files already recorded there (at the same size and device) are not linted again, so
    a lint cut off by a time limit (KernelBench's levels take minutes on a GPU) resumes.
    Raises FileNotFoundError when ``path`` does not exist, ValueError on a journal line
    that cannot be read or was written at another size or device."""
    files = problem_files(path)
    done = read_journal(journal, size, device) if journal is not None else {}
    result = LintResult()
    for i, f in enumerate(files):
        if on_file is not None:
            on_file(f, i, len(files))
        if str(f) in done:
            findings, skipped = done[str(f)]
        else:
            findings, skipped = lint_file(f, size, device, max_bytes)
            if journal is not None:
                line = {"file": str(f), "size": size, "device": device, "skipped": skipped,
                        "findings": [asdict(x) for x in findings]}  # fmt: skip
                with open(journal, "a") as out:
                    out.write(json.dumps(line) + "\n")
        result.files.append(str(f))
        result.findings += findings
        if skipped:
            result.skipped[str(f)] = skipped
    return result


# Like run/journal.read_records's loop, kept apart: each line here is also checked
# against this run's size and device, and that error must name the line too.
def read_journal(
    journal: Path, size: str, device: str
) -> dict[str, tuple[list[Finding], str | None]]:
    """The files a journal records, with their findings and skip reasons."""
    done: dict[str, tuple[list[Finding], str | None]] = {}
    if not journal.exists():
        return done
    for n, text in enumerate(journal.read_text().splitlines(), 1):
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
            findings = [Finding(**x) for x in rec["findings"]]
            key, skipped = rec["file"], rec["skipped"]
            was = (rec["size"], rec["device"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(
                f"{journal}:{n}: not a lint journal line ({type(e).__name__}: {e})"
            ) from None
        if was != (size, device):
            raise ValueError(
                f"{journal}:{n}: written at size {was[0]} on {was[1]}, not {size} on {device}; "
                "use another journal"
            )
        done[key] = (findings, skipped)
    return done
