"""The architectures ``check-model`` runs: tiny configs, random weights, no downloads.

* ``bert``: Hugging Face ``BertForMaskedLM`` from a ``BertConfig``
* ``gpt2``: Hugging Face ``GPT2LMHeadModel`` from a ``GPT2Config``
* ``resnet``: a ResNet-style CNN (basic blocks with batch norm) written with ``torch.nn``
* ``encoder``: ``nn.TransformerEncoderLayer`` with the fused fast path turned off

Dropout is zero everywhere so two runs differ only by the kernels that ran. ``scale``
multiplies the widths (1 = seconds on a CPU; bigger for GPU runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["MODEL_NAMES", "ModelSpec", "get_model", "Batch"]

Batch = dict[str, Any]


@dataclass(frozen=True)
class ModelSpec:
    """How to build one model, make its inputs, and get a loss from its output."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.Generator], Batch]
    loss: Callable[[Any, Batch], torch.Tensor]
    output: Callable[[Any], torch.Tensor]
    needs: str = ""  # an extra the model needs ("transformers")
    call: Callable[[nn.Module, Batch], Any] = lambda model, batch: model(**batch)


def _tokens(g: torch.Generator, vocab: int, batch: int, seq: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=g)


def _bert(scale: int) -> ModelSpec:
    vocab, seq = 96, 16

    def build() -> nn.Module:
        from transformers import BertConfig, BertForMaskedLM

        cfg = BertConfig(
            vocab_size=vocab,
            hidden_size=32 * scale,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64 * scale,
            # Like models.zoo._gpt2's config, kept apart: another model's own settings
            max_position_embeddings=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        return BertForMaskedLM(cfg)

    def inputs(g: torch.Generator) -> Batch:
        ids = _tokens(g, vocab, 2, seq)
        mask = torch.ones_like(ids)
        mask[1, -3:] = 0
        return {"input_ids": ids, "attention_mask": mask, "labels": _tokens(g, vocab, 2, seq)}

    return ModelSpec(
        "bert", build, inputs, lambda out, b: out.loss, lambda out: out.logits, "transformers"
    )


def _gpt2(scale: int) -> ModelSpec:
    vocab, seq = 96, 16

    def build() -> nn.Module:
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(
            vocab_size=vocab,
            n_positions=64,
            n_embd=32 * scale,
            n_layer=2,
            n_head=2,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            # Like models.zoo._bert's config, kept apart: another model's own settings
            attn_pdrop=0.0,
            bos_token_id=0,
            eos_token_id=0,
        )
        return GPT2LMHeadModel(cfg)

    def inputs(g: torch.Generator) -> Batch:
        ids = _tokens(g, vocab, 2, seq)
        return {"input_ids": ids, "labels": ids.clone()}

    return ModelSpec(
        "gpt2", build, inputs, lambda out, b: out.loss, lambda out: out.logits, "transformers"
    )


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.short(x))


class TinyResNet(nn.Module):
    """Stem, two stages of basic blocks, max pool, global average pool, linear head."""

    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True)
        )
        self.pool = nn.MaxPool2d(2)
        self.layer1 = _BasicBlock(width, width, 1)
        self.layer2 = _BasicBlock(width, 2 * width, 2)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.pool(self.stem(x))))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _resnet(scale: int) -> ModelSpec:
    def inputs(g: torch.Generator) -> Batch:
        return {
            "x": torch.randn(2, 3, 16, 16, generator=g),
            "target": torch.randint(0, 10, (2,), generator=g),
        }

    return ModelSpec(
        "resnet",
        lambda: TinyResNet(8 * scale),
        inputs,
        lambda out, b: nn.functional.cross_entropy(out, b["target"]),
        lambda out: out,
        call=lambda model, b: model(b["x"]),
    )


class _Encoder(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            d_model=d, nhead=2, dim_feedforward=2 * d, dropout=0.0, batch_first=True
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.layer(x, src_key_padding_mask=mask)


def _encoder(scale: int) -> ModelSpec:
    d = 32 * scale

    def inputs(g: torch.Generator) -> Batch:
        mask = torch.zeros(2, 12, dtype=torch.bool)
        mask[1, -4:] = True
        return {"x": torch.randn(2, 12, d, generator=g), "mask": mask}

    return ModelSpec(
        "encoder",
        lambda: _Encoder(d),
        inputs,
        lambda out, b: out.pow(2).mean(),
        lambda out: out,
    )


_BUILDERS: dict[str, Callable[[int], ModelSpec]] = {
    "bert": _bert,
    "gpt2": _gpt2,
    "resnet": _resnet,
    "encoder": _encoder,
}
MODEL_NAMES: tuple[str, ...] = tuple(_BUILDERS)


def get_model(name: str, scale: int = 1) -> ModelSpec:
    """The :class:`ModelSpec` for ``bert``, ``gpt2``, ``resnet`` or ``encoder``."""
    try:
        return _BUILDERS[name](scale)
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODEL_NAMES)}") from None
