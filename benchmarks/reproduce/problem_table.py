"""The table of opbench's own program problems for docs/programs.md: per problem its
level, name, what it is (the docstring's first line), GFLOP and MB moved at ``--size
full`` (the problem's own ``flops``/``bytes_moved``), and the roofline lower bound on an
H100, max(FLOPs / 50 TFLOP/s (IEEE float32), bytes / 3 TB/s).

Usage: python benchmarks/reproduce/problem_table.py   (markdown on stdout)

Committed result: the problem table of ``docs/programs.md`` (not a file under
``benchmarks/results/``): paste its output there.
"""

from __future__ import annotations

from opbench.programs import loader

#: H100 rates behind the bound: float32 without tensor cores, and HBM3 copy bandwidth
FLOPS_PER_S = 50e12
BYTES_PER_S = 3e12


def rows() -> list[str]:
    out = [
        "| level | problem | what it is | GFLOP (full) | MB moved (full) | bound on an H100 (ms) |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for p in loader.discover(loader.OWN_PROBLEMS):
        mod = loader.load_module(p.path)
        fl, by = mod.flops("full"), mod.bytes_moved("full")
        what = (mod.__doc__ or "").strip().splitlines()[0].replace("|", "\\|")
        bound = max(fl / FLOPS_PER_S, by / BYTES_PER_S) * 1e3
        name = p.problem_id.split("/")[-1]
        out.append(
            f"| {p.level} | `{name}` | {what} | {fl / 1e9:,.1f} | {by / 1e6:,.0f} | {bound:.2f} |"
        )
    return out


if __name__ == "__main__":
    import sys

    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    print("\n".join(rows()))
