"""A small Vision Transformer: patch embedding, class token, pre-norm encoder blocks, linear head.

Full: 32 images of 224^2, patch 16 (197 tokens), width 384, 4 blocks, 6 heads: 101 GFLOP,
~2-3 ms on an H100 in float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_dim: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp_dim)
        self.fc2 = nn.Linear(mlp_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (b, heads, t, head_dim)
        attn = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Model(nn.Module):
    def __init__(
        self,
        image_size: int,
        patch: int,
        dim: int,
        depth: int,
        heads: int,
        mlp_dim: int,
        classes: int,
    ) -> None:
        super().__init__()
        tokens = (image_size // patch) ** 2 + 1
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, mlp_dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (b, patches, dim)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


SIZES = {
    "small": {
        "batch": 2,
        "image_size": 32,
        "patch": 8,
        "dim": 32,
        "depth": 2,
        "heads": 2,
        "mlp_dim": 64,
        "classes": 10,
    },
    "full": {
        "batch": 32,
        "image_size": 224,
        "patch": 16,
        "dim": 384,
        "depth": 4,
        "heads": 6,
        "mlp_dim": 1536,
        "classes": 1000,
    },
}
_ARGS = ("image_size", "patch", "dim", "depth", "heads", "mlp_dim", "classes")


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], 3, s["image_size"], s["image_size"])]


def get_init_inputs(size: str = "full") -> list:
    return [SIZES[size][k] for k in _ARGS]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    n, d, m, h = s["batch"], s["dim"], s["mlp_dim"], s["heads"]
    patches = (s["image_size"] // s["patch"]) ** 2
    t = patches + 1
    embed = 2 * n * patches * d * 3 * s["patch"] ** 2 + n * patches * d + n * t * d
    gemms = 2 * n * t * d * (3 * d + d + 2 * m) + n * t * (3 * d + d + m + d)  # with biases
    attention = 4 * n * t * t * d + 5 * n * h * t * t
    pointwise = 2 * 8 * n * t * d + 5 * n * t * m + 2 * n * t * d  # norms, gelu, residuals
    head = 8 * n * d + 2 * n * d * s["classes"] + n * s["classes"]
    return embed + s["depth"] * (gemms + attention + pointwise) + head


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, d, m, c = s["batch"], s["dim"], s["mlp_dim"], s["classes"]
    t = (s["image_size"] // s["patch"]) ** 2 + 1
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (m * d + m) + (d * m + d)
    params = (d * 3 * s["patch"] ** 2 + d) + d + t * d + s["depth"] * block + 2 * d + c * d + c
    return 4 * (n * 3 * s["image_size"] ** 2 + params + n * c)
