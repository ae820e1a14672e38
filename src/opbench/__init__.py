"""opbench: judge PyTorch operator backends for correctness and speed."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "enable", "disable", "backend", "Scorer", "HostScorers", "score"]


def __getattr__(name: str):
    # Lazy: importing opbench must stay cheap; registration pulls in torch.library.
    if name in ("enable", "disable", "backend"):
        from opbench.backends import api

        return getattr(api, name)
    if name in ("Scorer", "score"):  # reward loops: opbench.agent.scorer
        from opbench.agent import scorer

        return getattr(scorer, name)
    if name == "HostScorers":  # a Scorer on each Ray node: opbench.agent.scorer_hosts
        from opbench.agent.scorer_hosts import HostScorers

        return HostScorers
    raise AttributeError(name)
