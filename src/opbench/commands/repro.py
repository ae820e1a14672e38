"""CLI command ``opbench repro``: a standalone script that reproduces one test of a run.

The script rebuilds the test's inputs from its seeds (the same ``materialize`` the
worker used), computes PyTorch's answer *before* the backend is loaded (a ``module:``
backend may override ATen process-wide), runs the backend's kernel on its own copy of
the inputs, prints where and by how much they differ, and finally runs opbench's full
judge (trials, guard, aliasing, mutation) in-process for the verdict.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import typer

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


_TEMPLATE = '''#!/usr/bin/env python
"""Reproduce opbench test {test_id}.

op: {op}    recorded verdict: {verdict}
message: {message}

Usage: python this_script.py [--device DEVICE] [--backend SPEC] [--no-judge]
"""

import argparse
import json

import torch

from opbench.spec.ops import get_overload
from opbench.suites.case import Case
from opbench.suites.materialize import materialize

CASE = Case.from_dict(json.loads(r"""{case_json}"""))
BACKEND = {backend!r}
DEVICE = {device!r}
SEEDS = {seeds!r}  # the trials: the case's seed, then derived seeds (same shapes)


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


def show_difference(got, expected):
    """Print, per output, shape/dtype agreement and the largest difference."""
    g, e = leaves(got), leaves(expected)
    if len(g) != len(e):
        print(f"  {{len(g)}} outputs, expected {{len(e)}}")
    for (path, a), (_, b) in zip(g, e):
        name = f"output{{path}}"
        if not isinstance(b, torch.Tensor):
            print(f"  {{name}}: got {{a!r}}, expected {{b!r}}")
            continue
        if not isinstance(a, torch.Tensor):
            print(f"  {{name}}: got {{type(a).__name__}}, expected a tensor")
            continue
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.shape != b.shape or a.dtype != b.dtype:
            print(f"  {{name}}: got {{describe(a)}}, expected {{describe(b)}}")
            continue
        if a.numel() == 0:
            print(f"  {{name}}: empty, shapes agree")
            continue
        if a.is_floating_point() or a.is_complex():
            nan_a, nan_b = torch.isnan(a), torch.isnan(b)
            if not torch.equal(nan_a, nan_b):
                print(f"  {{name}}: NaN positions differ at {{int((nan_a != nan_b).sum())}} elements")
            ok = torch.isfinite(a) & torch.isfinite(b)
            diff = torch.zeros(a.shape, dtype=torch.float64)
            diff[ok] = (a[ok].to(torch.complex128 if a.is_complex() else torch.float64)
                        - b[ok].to(torch.complex128 if b.is_complex() else torch.float64)).abs()
        else:
            diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
        worst = int(diff.argmax())
        idx = list(torch.unravel_index(torch.tensor(worst), a.shape)) if a.dim() else []
        idx = [int(i) for i in idx]
        print(
            f"  {{name}}: max |got - expected| = {{float(diff.max()):.4g}} at {{idx}} "
            f"(got {{a.reshape(-1)[worst].item()}}, expected {{b.reshape(-1)[worst].item()}}); "
            f"{{int((diff > 0).sum())}} of {{a.numel()}} elements differ"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--device", default=DEVICE)
    parser.add_argument("--backend", default=BACKEND)
    parser.add_argument("--no-judge", action="store_true", help="skip opbench's full verdict")
    opts = parser.parse_args()
    device = opts.device
    reference = get_overload(CASE.op)

    # PyTorch's answers first: a module: backend may override ATen once it is loaded.
    expected = {{}}
    for seed in SEEDS:
        args, kwargs = materialize(CASE, device, seed)
        print(f"seed {{seed}}: args = {{describe(args)}}, kwargs = {{describe(kwargs)}}")
        torch.manual_seed(seed)
        expected[seed] = reference(*args, **kwargs)

    from opbench.backends.loader import load_backend

    backend = load_backend(opts.backend, device)
    kernel = backend.kernel_for(CASE.op)
    if kernel is None:
        raise SystemExit(f"backend {{opts.backend!r}} has no kernel for {{CASE.op}}")
    for seed in SEEDS:
        args, kwargs = materialize(CASE, device, seed)  # the kernel's own copy
        print(f"seed {{seed}}: kernel vs PyTorch")
        try:
            got = kernel(*args, **kwargs)
        except Exception as e:  # show what the kernel raised, keep going
            print(f"  the kernel raised {{type(e).__name__}}: {{e}}")
            continue
        show_difference(got, expected[seed])

    if not opts.no_judge:
        from opbench.judge.evaluate import JudgeOptions, judge_in_process

        options = JudgeOptions(trials=len(SEEDS))
        verdict = judge_in_process(CASE, kernel, device, options)
        print(f"opbench verdict: {{verdict.status}} {{verdict.category or ''}} {{verdict.message}}")


if __name__ == "__main__":
    main()
'''


def register(app: typer.Typer) -> None:
    """Add ``opbench repro`` to the app."""

    @app.command("repro")
    def repro_cmd(
        run_dir: Path = typer.Argument(..., help="A run directory (holds results.sqlite)."),
        test_id: str = typer.Argument(..., help="The test id (or a unique prefix of it)."),
        output: Path | None = typer.Option(
            None, "-o", "--output", help="Write the script here (default: print it)."
        ),
    ) -> None:
        """Write a standalone script that reproduces one test: it rebuilds the inputs from
        their seeds, runs PyTorch and the backend's kernel, and prints the difference.

        Example: opbench repro runs/smoke 'add.Tensor:3f2a9c01b7de:0' -o repro_add.py
        """
        from opbench.cli import fail

        try:
            script = render_script(find_result(run_dir, test_id))
        except ReproError as e:
            fail(str(e))
            return
        if output is None:
            typer.echo(script, nl=False)
            return
        try:
            output.write_text(script)
        except OSError as e:
            fail(f"cannot write {output}: {e}")
        typer.echo(f"wrote {output}; run it with: python {output}", err=True)
