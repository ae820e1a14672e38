"""``opbench package`` (built, pip-installed into a target dir, run in a subprocess) and
``opbench trace`` (a script's ATen calls written as a trace that parses back)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kernel_dirs import NUMPY_KERNELS, write_dir
from typer.testing import CliRunner

from opbench.backends.packaging import PackageError, build_package
from opbench.spec.args import parse_args

SRC = str(Path(__file__).resolve().parents[2] / "src")

MODEL_SCRIPT = """
import torch
try:
    import opbench  # noqa: F401
    raise SystemExit("opbench is importable in the fresh venv: the test would prove nothing")
except ImportError:
    pass
import {name}
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
x = torch.randn(4, 6)
ref = model(x) + 1.0
{name}.enable("cpu")
got = model(x) + 1.0
counts = {name}.call_counts()
{name}.disable()
torch.testing.assert_close(got, ref)
assert counts["{served}"]["served"] >= 1, counts
assert torch.relu(x).sum() == torch.relu(x).sum()  # disabled: PyTorch's own kernels again
print("PACKAGE_OK", {name}.__file__, len({name}.served_ops("cpu")))
"""


def _closure(names: list[str]) -> set[str]:
    """Installed distributions ``names`` need, transitively (extras left out)."""
    import re
    from importlib import metadata

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.split(r"[\s;<>=!~\[(]", todo.pop(), maxsplit=1)[0]
        key = name.lower().replace("_", "-")
        if not key or key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency this environment does not have
        seen.add(key)
        todo += [r for r in dist.requires or [] if "extra ==" not in r]
    return seen


def _fresh_venv(root: Path, extra: tuple[str, ...] = ()) -> Path:
    """A venv holding only torch and numpy (and ``extra``, with what they need), not
    opbench: their
    installed files are linked into one folder the venv reads through a path entry, so
    nothing else of this environment is visible there."""
    from importlib import metadata

    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120
    )
    only = root / "only-torch-numpy"
    only.mkdir()
    for key in _closure(["torch", "numpy", "pip", *extra]):  # pip: to install the wheel
        dist = metadata.distribution(key)
        for f in dist.files or []:
            top = f.parts[0]
            src = Path(dist.locate_file(top))
            if top.startswith("..") or not src.exists() or (only / top).exists():
                continue
            (only / top).symlink_to(src)
    site = next(root.glob("lib/python*/site-packages"))
    (site / "only.pth").write_text(f"{only}\n")
    return root / "bin" / "python"


def _wheel(out: Path, dist: Path) -> Path:
    w = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(dist), f"./{out.name}"],
        capture_output=True, text=True, timeout=300, cwd=out.parent,
    )  # fmt: skip
    assert w.returncode == 0, w.stderr[-2000:]
    return next(dist.glob("*.whl"))


def _install_and_use(
    tmp_path: Path, out: Path, name: str, served: str, extra: tuple[str, ...] = ()
) -> str:
    python = _fresh_venv(tmp_path / "venv", extra)
    wheel = _wheel(out, tmp_path / "dist")
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-2000:]
    script = tmp_path / "use.py"
    script.write_text(textwrap.dedent(MODEL_SCRIPT.format(name=name, served=served)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    r = subprocess.run(
        [str(python), str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "PACKAGE_OK" in r.stdout and str(tmp_path / "venv") in r.stdout
    return r.stdout


@pytest.mark.slow
def test_package_needs_only_torch_runs_a_model_and_is_judged(tmp_path: Path) -> None:
    """Packaged, pip-installed with --no-index into a venv without opbench, enabled, used
    by a model, disabled; and the same package judged as ``--backend module:NAME``."""
    kdir = write_dir(tmp_path / "kernels", NUMPY_KERNELS)
    out = build_package(kdir, "tiny_numpy_kernels", tmp_path / "pkg")
    meta = (out / "pyproject.toml").read_text()
    assert 'dependencies = ["numpy", "torch"]' in meta, meta
    _install_and_use(tmp_path, out, "tiny_numpy_kernels", "relu.default")
    # the runtime is opbench's own registration code, only its imports renamed
    from opbench.backends.packaging import RUNTIME_MODULES

    for rel in RUNTIME_MODULES:
        copied = (out / "src" / "tiny_numpy_kernels" / "_runtime" / rel).read_text()
        original = (Path(SRC) / "opbench" / rel).read_text()
        assert (
            copied.split("\n", 1)[1].replace("tiny_numpy_kernels._runtime.", "opbench.") == original
        )
    target = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--target", str(target), str(next((tmp_path / "dist").glob("*.whl")))],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-2000:]
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), SRC]))
    r = subprocess.run(
        [sys.executable, "-m", "opbench.cli", "run", "--suite", "smoke", "--backend",
         "module:tiny_numpy_kernels", "--device", "cpu", "--ops", "relu,mul.Tensor",
         "--no-perf", "--out", str(run)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    import json

    ops = json.loads((run / "summary.json").read_text())["ops"]
    assert ops["aten.relu.default"]["correct"] is True, ops
    # NUMPY_KERNELS' mul calls the op it implements: the judge still sees it
    assert ops["aten.mul.Tensor"]["failures"] == {"calls_pytorch": 1}, ops


@pytest.mark.slow
def test_reference_triton_backend_packages_without_opbench(tmp_path: Path) -> None:
    """The reference Triton backend, packaged: its shared code is vendored and imported
    from the package, triton is a dependency, and a model runs on it with opbench absent
    (on the CPU the package sets up Triton's interpreter itself)."""
    pytest.importorskip("triton")
    out = build_package(Path(SRC) / "opbench" / "kernels", "ref_triton", tmp_path / "pkg")
    meta = (out / "pyproject.toml").read_text()
    assert (
        '"triton"' in meta
        and '"torch"' in meta
        and "opbench" not in meta.split("[tool")[0].split("dependencies")[1]
    )
    from opbench.backends.packaging import _imports

    for f in (out / "src" / "ref_triton").rglob("*.py"):
        bad = [m for m in _imports(f) if m.split(".")[0] == "opbench"]
        if "_runtime" in f.parts:
            # units.layout_of's lazy `from opbench import kernels`, run only for --backend triton
            bad = [m for m in bad if m != "opbench"]
        assert not bad, (f, bad)
    stdout = _install_and_use(tmp_path, out, "ref_triton", "relu.default", ("triton",))
    assert int(stdout.split()[-1]) > 100  # overloads served


def test_package_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="does not exist"):
        build_package(tmp_path / "nope", "x", tmp_path / "o")
    kdir = write_dir(tmp_path / "k", NUMPY_KERNELS)
    with pytest.raises(PackageError, match="identifier"):
        build_package(kdir, "bad-name", tmp_path / "o")


TRACE_SCRIPT = """
import sys
import torch
m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
x = torch.randn(int(sys.argv[1]), 8)
m(x).sum().backward()
y = x.t().contiguous() + 1.0
"""


def test_trace_cli_writes_a_parseable_trace(tmp_path: Path) -> None:
    from opbench.cli import app

    script = tmp_path / "prog.py"
    script.write_text(TRACE_SCRIPT)
    dest = tmp_path / "prog_trace.txt"
    r = CliRunner().invoke(app, ["trace", str(script), "-o", str(dest), "3"])
    assert r.exit_code == 0, r.output
    text = dest.read_text()
    assert "Operator: aten.addmm.default" in text
    assert "Operator: aten.relu.default" in text
    op = None
    n_lines = 0
    for line in text.splitlines():
        if line.startswith("Operator: "):
            op = line.split()[1]
            assert op.startswith("aten.")
        else:
            assert op is not None and line.startswith("cnt: ")
            cnt, args = line[5:].split(", ", 1)
            assert int(cnt) >= 1
            parse_args(args)
            n_lines += 1
    assert n_lines >= 8
    # a transposed input keeps its strides, like the published traces
    assert "T([8, 3], f32, stride=(1, 8))" in text
    try:
        from opbench.suites.traces import load_trace_file
    except ImportError:
        return
    entries = load_trace_file(dest)
    assert len(entries) == n_lines and {e.op for e in entries} >= {"addmm.default", "relu.default"}


def test_trace_cli_missing_script(tmp_path: Path) -> None:
    from opbench.cli import app

    r = CliRunner().invoke(app, ["trace", str(tmp_path / "nope.py")])
    assert r.exit_code == 2
