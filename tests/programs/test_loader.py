"""Finding program problems and deciding, without running them, what they need:
levels and candidate folders, sizes passed only where a function takes one, the memory
estimate on the meta device (nothing allocated), and why a problem is not runnable."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from opbench.programs import loader
from opbench.programs.inputs import call_sized, make_inputs
from opbench.report.metrics import fast_p

SIMPLE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return []
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_discover_levels_candidates_and_order(tmp_path):
    root = tmp_path / "problems"
    for rel in ("level1/10_b.py", "level1/2_a.py", "level2/1_c.py", "level1/_helper.py"):
        _write(root / rel, SIMPLE)
    _write(tmp_path / "cands" / "level1" / "2_a.py", "class ModelNew: pass\n")

    got = loader.discover(root, candidates=tmp_path / "cands")
    assert [p.problem_id for p in got] == ["level1/2_a", "level1/10_b", "level2/1_c"]
    assert [p.level for p in got] == ["1", "1", "2"]
    assert got[0].candidate == (tmp_path / "cands" / "level1" / "2_a.py").resolve()
    assert [p.candidate_missing for p in got] == [False, True, True]

    only2 = loader.discover(root, levels=["2"])
    assert [p.problem_id for p in only2] == ["level2/1_c"]
    with pytest.raises(loader.ProblemError, match="--levels 3"):
        loader.discover(root, levels=["3"])


def test_flat_folder_and_single_file(tmp_path):
    p = _write(tmp_path / "flat" / "relu.py", SIMPLE)
    got = loader.discover(tmp_path / "flat")
    assert [(x.problem_id, x.level) for x in got] == [("relu", "")]
    one = loader.single_problem(p, None)
    assert one.problem_id == "relu" and one.candidate is None
    with pytest.raises(loader.ProblemError, match="no such file"):
        loader.single_problem(tmp_path / "missing.py", None)
    with pytest.raises(loader.ProblemError, match="no such problem folder"):
        loader.discover(tmp_path / "nowhere")


def test_size_reaches_only_functions_that_take_it():
    assert call_sized(lambda: "none", "small") == "none"
    assert call_sized(lambda size="full": size, "small") == "small"
    assert call_sized(lambda *a: a, "full") == ("full",)
    assert call_sized(lambda size="full": size, None) == "full"


def test_inputs_follow_the_seed(tmp_path):
    mod = loader.load_module(_write(tmp_path / "p.py", SIMPLE))
    a = make_inputs(mod, 7, None, "cpu")
    b = make_inputs(mod, 7, None, "cpu")
    c = make_inputs(mod, 8, None, "cpu")
    assert torch.equal(a[0], b[0])
    assert not torch.equal(a[0], c[0])


def test_estimate_counts_inputs_params_and_outputs_without_allocating(tmp_path):
    huge = """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)

        def forward(self, a, b):
            return self.fc(a) @ b  # (1<<16, 1<<16) float32: 16 GiB of output


    def get_inputs():
        return [torch.rand(1 << 16, 64), torch.rand(64, 1 << 16)]


    def get_init_inputs():
        return [64]
    """
    mod = loader.load_module(_write(tmp_path / "huge.py", huge))
    nbytes, how, out = loader.estimate_bytes(mod, None)
    inputs = 2 * (1 << 16) * 64 * 4
    params = (64 * 64 + 64) * 4
    output = (1 << 16) * (1 << 16) * 4
    assert how == "meta"
    assert nbytes == inputs + params + output and out == output


def test_not_runnable_reasons(tmp_path):
    missing = _write(tmp_path / "needs_pkg.py", "import not_a_real_package_xyz\n")
    with pytest.raises(ModuleNotFoundError) as e:
        loader.load_module(missing)
    assert "not_a_real_package_xyz" in loader.not_runnable_reason(missing, e.value)
    assert "not installed" in loader.not_runnable_reason(missing, e.value)

    hub = _write(
        tmp_path / "hub.py",
        "from transformers import AutoConfig\nconfig = AutoConfig.from_pretrained('x/y')\n",
    )
    why = loader.not_runnable_reason(hub, OSError("We couldn't connect to huggingface.co"))
    assert "Hugging Face hub" in why

    broken = _write(tmp_path / "broken.py", "raise ValueError('bad problem')\n")
    why = loader.not_runnable_reason(broken, ValueError("bad problem"))
    assert why.startswith("the problem itself fails") and "bad problem" in why


def test_problem_api_names_what_is_missing(tmp_path):
    mod = loader.load_module(_write(tmp_path / "partial.py", "def get_inputs():\n    return []\n"))
    assert loader.problem_api(mod) == "the problem file lacks Model, get_init_inputs"


def test_fast_p_counts_only_correct_and_faster():
    correct = ["a", "b", "d"]  # "c" is fast but wrong; "d" correct but not timed
    speed = {"a": 2.5, "b": 1.2, "c": 9.0, "d": None}
    got = fast_p(correct, speed, 5)
    # KernelBench's thresholds; "faster than p" is strict (b's 1.2 is not above 1.2)
    assert got == {
        "0": 3 / 5,
        "0.5": 2 / 5,
        "0.8": 2 / 5,
        "1.0": 2 / 5,
        "1.2": 1 / 5,
        "1.5": 1 / 5,
        "2.0": 1 / 5,
    }
    assert fast_p(correct, {}, 5)["1.0"] is None
    assert fast_p([], {}, 0)["0"] is None


MODE_PROBLEM = """
import torch
import torch.nn as nn


class Doubler(nn.Module):
    def forward(self, x):
        return x * 2 if self.training else x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = {layer}

    def forward(self, x):
        return self.layer(x)


def get_inputs():
    return [torch.randn(8, 3, 4, 4)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    ("layer", "listed"),
    [
        ("nn.BatchNorm2d(3)", ["BatchNorm2d"]),
        ("nn.BatchNorm2d(3, track_running_stats=False)", []),
        ("nn.InstanceNorm2d(3)", []),
        ("nn.Dropout(0.5)", ["Dropout"]),
        ("nn.Dropout(0.0)", []),
        ("nn.Conv2d(3, 3, 1)", []),
        ("nn.Sequential(nn.ReLU(), Doubler())", ["Doubler"]),
    ],
)
def test_mode_dependent_lists_exactly_the_layers_eval_mode_changes(tmp_path, layer, listed):
    """Checked against PyTorch itself: a model's train and eval outputs differ exactly when
    the layer is listed (a baseline timed after .eval() then times another computation)."""
    mod = loader.load_module(_write(tmp_path / "p.py", MODE_PROBLEM.format(layer=layer)))
    assert loader.mode_dependent(mod) == listed
    model = mod.Model()
    x = torch.randn(8, 3, 4, 4)
    with torch.no_grad():
        torch.manual_seed(0)
        trained = model.train()(x)
        torch.manual_seed(0)
        evaluated = model.eval()(x)
    assert (not torch.equal(trained, evaluated)) == bool(listed)
