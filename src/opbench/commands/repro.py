"""CLI command ``opbench repro``: a standalone script that reproduces one test of a run.

The script rebuilds the test's inputs from its seeds (the same ``materialize`` the
worker used), computes PyTorch's answer *before* the backend is loaded (a ``module:``
backend may override ATen process-wide), and then re-runs every check of the verdict
with its evidence, each on a fresh copy of the inputs:

* values, shapes, dtypes, devices and NaN/Inf positions against PyTorch
  (``wrong_result``, ``wrong_meta``, ``nan_mismatch``);
* the input elements the kernel changed that the op must not write (``mutates_input``);
* a returned tensor that is not ``self``/``out``, or that shares storage with an input
  (``bad_alias``);
* the PyTorch compute the kernel called (``calls_pytorch``);
* two runs on identical inputs that differ (``nondeterministic``);

and finally opbench's full judge in-process. It exits 1 while the test fails and 0 once
it passes, so it can sit in a kernel author's own tests.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import typer

from opbench.commands.common import fail

__all__ = ["find_result", "render_script", "register"]


class ReproError(ValueError):
    """The run directory or test id cannot be used; the message is one line."""


def find_result(run_dir: Path, test_id: str) -> dict[str, Any]:
    """The stored row of ``test_id`` (an exact id or a unique prefix) in ``run_dir``."""
    path = Path(run_dir) / "results.sqlite"
    if not path.exists():
        raise ReproError(f"{path} does not exist: is {run_dir} an opbench run directory?")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        rows = con.execute("SELECT * FROM results WHERE test_id = ?", (test_id,)).fetchall()
        if not rows:
            rows = con.execute(
                "SELECT * FROM results WHERE test_id LIKE ? ESCAPE '\\' LIMIT 6",
                (test_id.replace("%", "\\%").replace("_", "\\_") + "%",),
            ).fetchall()
    except sqlite3.DatabaseError as e:
        raise ReproError(f"{path} is not a readable results store ({e})") from None
    finally:
        con.close()
    if not rows:
        raise ReproError(f"no test {test_id!r} in {path}; ids look like add.Tensor:3f2a9c01b7de:0")
    if len(rows) > 1:
        ids = ", ".join(r["test_id"] for r in rows[:5])
        raise ReproError(f"{test_id!r} matches several tests ({ids}, ...); give the full id")
    return dict(rows[0])


def _trial_seeds(row: dict[str, Any], case: dict[str, Any]) -> list[int]:
    try:
        details = json.loads(row.get("details") or "{}")
        seeds = [int(s) for s in details.get("trials", [])]
        if seeds:
            return seeds
    except (ValueError, TypeError, AttributeError):
        pass
    from opbench.judge.evaluate import trial_seeds

    return trial_seeds(int(case.get("seed", 0)), 2)


def render_script(row: dict[str, Any]) -> str:
    """The text of a standalone Python script reproducing the stored test ``row``."""
    case_json = row.get("case_json")
    if not case_json:
        raise ReproError(f"test {row.get('test_id')} has no stored case description")
    case = json.loads(case_json) if isinstance(case_json, str) else dict(case_json)
    seeds = _trial_seeds(row, case)
    message = (row.get("message") or "").strip().splitlines()
    first_line = message[0][:300] if message else ""
    verdict = f"{row.get('status')}" + (f" / {row['category']}" if row.get("category") else "")
    return _TEMPLATE.format(
        test_id=row.get("test_id"),
        op=case.get("op"),
        verdict=verdict,
        message=first_line.replace('"""', "'''"),
        backend=row.get("backend") or "aten",
        device=row.get("device") or "cpu",
        case_json=json.dumps(case, indent=1, sort_keys=True),
        seeds=seeds,
    )


_TEMPLATE = """#!/usr/bin/env python
\"\"\"Reproduce opbench test {test_id}.

op: {op}    recorded verdict: {verdict}
message: {message}

Re-runs each check of the verdict with its evidence; exits 1 while the test fails, 0 once
it passes.

Usage: python this_script.py [--device DEVICE] [--backend SPEC] [--no-judge] [--profile F]
\"\"\"

import argparse
import json
import sys

import torch

from opbench.spec.call import is_written, targets, walk_inputs, written_args
from opbench.spec.ops import get_overload
from opbench.suites.case import Case
from opbench.suites.materialize import materialize

CASE = Case.from_dict(json.loads(r\"\"\"{case_json}\"\"\"))
BACKEND = {backend!r}
DEVICE = {device!r}
SEEDS = {seeds!r}  # the trials: the case's seed, then derived seeds (same shapes)
SHOW = 5  # elements listed per finding


def leaves(obj, path=""):
    if isinstance(obj, (tuple, list)):
        return [x for i, v in enumerate(obj) for x in leaves(v, f"{{path}}[{{i}}]")]
    return [(path, obj)]


def describe(v):
    if isinstance(v, torch.Tensor):
        return f"Tensor{{list(v.shape)}} {{v.dtype}} stride={{v.stride()}} on {{v.device}}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(describe(x) for x in v) + "]"
    return repr(v)


def where(mask):
    \"\"\"The first positions of a boolean tensor, as index lists.\"\"\"
    idx = mask.nonzero().tolist()
    more = f" (+{{len(idx) - SHOW}} more)" if len(idx) > SHOW else ""
    return f"{{idx[:SHOW]}}{{more}}"


def bits_differ(a, b):
    \"\"\"Elements whose bits differ (NaN equal to NaN), for same-shaped tensors.\"\"\"
    a, b = a.detach().cpu(), b.detach().cpu()
    if a.is_floating_point() or a.is_complex():
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    else:
        same = a == b
    return ~same


def check_values(got, expected):
    \"\"\"Per output: metadata, NaN/Inf positions and the largest difference. Returns the
    problems found (empty when every output agrees bit for bit or in metadata only).\"\"\"
    problems = []
    g, e = leaves(got), leaves(expected)
    if len(g) != len(e):
        problems.append(f"{{len(g)}} outputs, expected {{len(e)}}")
    for (path, a), (_, b) in zip(g, e):
        name = f"output{{path}}"
        if not isinstance(b, torch.Tensor):
            print(f"  {{name}}: got {{a!r}}, expected {{b!r}}")
            continue
        if not isinstance(a, torch.Tensor):
            problems.append(f"{{name}}: got {{type(a).__name__}}, expected a tensor")
            continue
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            problems.append(f"{{name}}: wrong_meta: got {{describe(a)}}, expected {{describe(b)}}")
            continue
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.numel() == 0:
            print(f"  {{name}}: empty, shapes agree")
            continue
        if a.is_floating_point() or a.is_complex():
            for label, fa, fb in (
                ("NaN", torch.isnan(a), torch.isnan(b)),
                ("+Inf", a == float("inf"), b == float("inf")),
                ("-Inf", a == float("-inf"), b == float("-inf")),
            ):
                if not torch.equal(fa, fb):
                    problems.append(
                        f"{{name}}: nan_mismatch: {{label}} where PyTorch has none at "
                        f"{{where(fa & ~fb)}}; missing at {{where(fb & ~fa)}}"
                    )
            ok = torch.isfinite(a) & torch.isfinite(b)
            diff = torch.zeros(a.shape, dtype=torch.float64)
            wide = torch.complex128 if a.is_complex() else torch.float64
            diff[ok] = (a[ok].to(wide) - b[ok].to(wide)).abs()
        else:
            diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
        worst = int(diff.argmax())
        idx = [int(i) for i in torch.unravel_index(torch.tensor(worst), a.shape)] if a.dim() else []
        print(
            f"  {{name}}: max |got - expected| = {{float(diff.max()):.4g}} at {{idx}} "
            f"(got {{a.reshape(-1)[worst].item()}}, expected {{b.reshape(-1)[worst].item()}}); "
            f"{{int((diff > 0).sum())}} of {{a.numel()}} elements differ"
        )
    return problems


def check_mutation(kernel, overload, device, seed):
    \"\"\"Inputs the op must not write, compared bit for bit before and after the call.\"\"\"
    args, kwargs = materialize(CASE, device, seed)
    written = written_args(overload)
    before = [
        (path, t, t.detach().clone())
        for path, top, t in walk_inputs(list(args), kwargs)
        if not is_written(top, overload, written)
    ]
    kernel(*args, **kwargs)
    problems = []
    for path, t, saved in before:
        if t.shape != saved.shape:
            problems.append(f"mutates_input: {{path}} was resized from {{list(saved.shape)}} to {{list(t.shape)}}")
            continue
        changed = bits_differ(t, saved)
        if changed.any():
            first = changed.nonzero()[0].tolist() if t.dim() else []
            at = tuple(first)
            problems.append(
                f"mutates_input: {{path}} changed at {{int(changed.sum())}} of {{t.numel()}} "
                f"elements, first {{where(changed)}}: {{saved[at].item()}} -> {{t.detach()[at].item()}}"
            )
    return problems


def check_alias(kernel, overload, device, seed):
    \"\"\"In-place/out= results must be ``self``/``out``; other outputs must not share an
    input's storage.\"\"\"
    args, kwargs = materialize(CASE, device, seed)
    want = targets(overload, list(args), kwargs)
    inputs = walk_inputs(list(args), kwargs)
    got = kernel(*args, **kwargs)
    outs = [v for _, v in leaves(got)]
    problems = []
    for i, t in enumerate(want):
        if i < len(outs) and outs[i] is not t:
            problems.append(f"bad_alias: output {{i}} is not the tensor the op must write and return ({{describe(t)}})")
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor) or any(o is t for t in want) or o.numel() == 0:
            continue
        ptr = o.untyped_storage().data_ptr()
        for path, _, t in inputs:
            if t.numel() and t.untyped_storage().data_ptr() == ptr:
                problems.append(f"bad_alias: output {{i}} shares storage with input {{path}}")
    return problems


def check_calls(kernel, device, seed):
    \"\"\"The ATen ops the kernel called, sorted by the guard's rule.\"\"\"
    from opbench.instrument.observer import DispatchRecorder
    from opbench.judge.guard import classify_calls

    args, kwargs = materialize(CASE, device, seed)
    with DispatchRecorder(targets(get_overload(CASE.op), list(args), kwargs)) as rec:
        kernel(*args, **kwargs)
    result = classify_calls(CASE.op, rec.calls)
    if result.allowed:
        print(f"  allowed calls (allocation, views, copies): {{result.allowed}}")
    return [f"calls_pytorch: {{result.message()}}"] if result.violations else []


def check_repeat(kernel, device, seed):
    \"\"\"Two runs on identical fresh inputs must agree bit for bit.\"\"\"
    runs = []
    for _ in range(2):
        args, kwargs = materialize(CASE, device, seed)
        runs.append(kernel(*args, **kwargs))
    problems = []
    for (path, a), (_, b) in zip(leaves(runs[0]), leaves(runs[1])):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
            differ = bits_differ(a, b)
            if differ.any():
                at = tuple(differ.nonzero()[0].tolist()) if a.dim() else ()
                problems.append(
                    f"nondeterministic: output{{path}} differs between two runs at "
                    f"{{int(differ.sum())}} elements, first {{where(differ)}}: "
                    f"{{a.detach().cpu()[at].item()}} vs {{b.detach().cpu()[at].item()}}"
                )
    return problems


def profile(kernel, overload, device, path, reps=5):
    \"\"\"torch.profiler over ``reps`` calls of PyTorch and of the kernel on the test's
    inputs (after two warm-up calls each, so compiles stay out), as a Chrome trace.\"\"\"
    from torch.profiler import ProfilerActivity, record_function
    from torch.profiler import profile as torch_profile

    cuda = str(device).startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sides = [("opbench::reference", overload), ("opbench::candidate", kernel)]
    inputs = {{name: materialize(CASE, device, SEEDS[0]) for name, _ in sides}}
    for _ in range(2):
        for name, fn in sides:
            fn(*inputs[name][0], **inputs[name][1])
    if cuda:
        torch.cuda.synchronize()
    with torch_profile(activities=activities, record_shapes=True) as prof:
        for _ in range(reps):
            for name, fn in sides:
                with record_function(name):
                    fn(*inputs[name][0], **inputs[name][1])
        if cuda:
            torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=15))
    print(f"wrote {{path}}: open it in chrome://tracing or https://ui.perfetto.dev "
          f"({{reps}} calls a side, marked opbench::reference and opbench::candidate)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--device", default=DEVICE)
    parser.add_argument("--backend", default=BACKEND)
    parser.add_argument("--no-judge", action="store_true", help="skip opbench's full verdict")
    parser.add_argument("--profile", metavar="TRACE_JSON", help="also profile both sides")
    opts = parser.parse_args()
    device = opts.device
    overload = get_overload(CASE.op)

    # PyTorch's answers first: a module: backend may override ATen once it is loaded.
    expected = {{}}
    for seed in SEEDS:
        args, kwargs = materialize(CASE, device, seed)
        print(f"seed {{seed}}: args = {{describe(args)}}, kwargs = {{describe(kwargs)}}")
        torch.manual_seed(seed)
        expected[seed] = overload(*args, **kwargs)

    from opbench.backends.loader import load_backend

    backend = load_backend(opts.backend, device)
    kernel = backend.kernel_for(CASE.op)
    if kernel is None:
        raise SystemExit(f"backend {{opts.backend!r}} has no kernel for {{CASE.op}}")
    problems = []
    for seed in SEEDS:
        print(f"seed {{seed}}: kernel vs PyTorch")
        try:
            args, kwargs = materialize(CASE, device, seed)  # the kernel's own copy
            problems += check_values(kernel(*args, **kwargs), expected[seed])
            problems += check_mutation(kernel, overload, device, seed)
            problems += check_alias(kernel, overload, device, seed)
            problems += check_calls(kernel, device, seed)
            problems += check_repeat(kernel, device, seed)
        except Exception as e:  # show what the kernel raised, keep going
            problems.append(f"error: the kernel raised {{type(e).__name__}}: {{e}}")
    for p in dict.fromkeys(problems):
        print(f"  FAIL {{p}}")
    if opts.profile:
        profile(kernel, overload, device, opts.profile)

    failed = bool(problems)
    if not opts.no_judge:
        from opbench.judge.evaluate import JudgeOptions, judge_in_process

        options = JudgeOptions(trials=len(SEEDS))
        verdict = judge_in_process(CASE, kernel, device, options)
        print(f"opbench verdict: {{verdict.status}} {{verdict.category or ''}} {{verdict.message}}")
        failed = verdict.status != "passed"
    print("reproduced: the test fails" if failed else "the test passes")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
"""


def _run_profiled(script: str, output: Path | None, trace: Path) -> None:
    """Write the script (to ``output`` or a temporary file) and run it in its own process
    with ``--profile`` (the kernel never runs in this one); exit with its status."""
    import subprocess
    import sys
    import tempfile

    path = output or Path(tempfile.mkdtemp(prefix="opbench-repro-")) / "repro.py"
    path.write_text(script)
    code = subprocess.call([sys.executable, str(path), "--no-judge", "--profile", str(trace)])
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``opbench repro`` to the app."""

    @app.command("repro")
    def repro_cmd(
        run_dir: Path = typer.Argument(..., help="A run directory (holds results.sqlite)."),
        test_id: str = typer.Argument(..., help="The test id (or a unique prefix of it)."),
        output: Path | None = typer.Option(
            None, "-o", "--output", help="Write the script here (default: print it)."
        ),
        profile: Path | None = typer.Option(
            None,
            "--profile",
            help="Run the script now and write a torch.profiler Chrome trace of the "
            "reference and the candidate on this test's inputs (the kernels each launched "
            "and their times) to this file.",
        ),
    ) -> None:
        """Write a standalone script that reproduces one test: it rebuilds the inputs from
        their seeds, runs PyTorch and the backend's kernel, and prints the difference.

        Example: opbench repro runs/smoke 'add.Tensor:3f2a9c01b7de:0' -o repro_add.py
        """
        try:
            script = render_script(find_result(run_dir, test_id))
        except ReproError as e:
            fail(str(e))
            return
        if profile is not None:
            _run_profiled(script, output, profile)
            return
        if output is None:
            typer.echo(script, nl=False)
            return
        try:
            output.write_text(script)
        except OSError as e:
            fail(f"cannot write {output}: {e}")
        typer.echo(f"wrote {output}; run it with: python {output}", err=True)
