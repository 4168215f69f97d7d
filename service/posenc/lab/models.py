"""A tiny decoder-only Transformer whose positional scheme is whatever `Signals` it is handed: an
absolute table added at the input, cos/sin rotating queries and keys, an additive attention bias
(always causal). The same module trains every scheme, so the schemes differ in their signal only.

Pre-LayerNorm blocks, GELU MLP, no dropout, untied output head. Attention is written out (not
`scaled_dot_product_attention`) because the lab measures its weights: `forward(..., entropy=True)`
also returns each layer's mean attention entropy.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .signals import Signals

#: Initial spread of a learned position table: the RMS of a sinusoidal table (each sin/cos column
#: has mean square 1/2), so both absolute schemes start with a position signal of one size.
LEARNED_INIT_STD = math.sqrt(0.5)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[-x2, x1] of the halves x1, x2 of the last axis: RoPE's "half" layout, which the "cat"
    arrangement of cos/sin (halves duplicated) goes with."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., length, head_dim] rotated by the angles whose cos/sin ("cat") are given."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, signals: Signals) -> tuple[torch.Tensor, torch.Tensor]:
        """(output, entropy [batch, heads, length] of each query's attention weights, in nats)."""
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if signals.cos is not None:
            q, k = apply_rotary(q, signals.cos, signals.sin), apply_rotary(k, signals.cos, signals.sin)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + signals.bias
        weights = scores.softmax(dim=-1)
        entropy = torch.special.entr(weights.detach()).sum(dim=-1)  # measured, never trained on
        mixed = (weights @ v).transpose(1, 2).reshape(batch, length, width)
        return self.out(mixed), entropy


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.attention_norm, self.mlp_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attention = Attention(d_model, n_heads)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor, signals: Signals) -> tuple[torch.Tensor, torch.Tensor]:
        attended, entropy = self.attention(self.attention_norm(x), signals)
        x = x + attended
        return x + self.mlp(self.mlp_norm(x)), entropy


class TinyDecoder(nn.Module):
    """`learned_positions`: rows of a trained position table (0: the scheme brings its own signal)."""

    def __init__(self, *, vocab_size: int, d_model: int, n_heads: int, n_layers: int, d_ff: int,
                 learned_positions: int = 0):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = None
        if learned_positions:
            self.positions = nn.Embedding(learned_positions, d_model)
            nn.init.normal_(self.positions.weight, std=LEARNED_INIT_STD)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor, signals: Signals) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(logits [batch, length, vocab], per layer the attention entropy [batch, heads, length])."""
        x = self.tokens(tokens)
        if signals.absolute is not None:
            x = x + signals.absolute
        if self.positions is not None:
            x = x + self.positions.weight[:tokens.shape[1]]
        entropies = []
        for block in self.blocks:
            x, entropy = block(x, signals)
            entropies.append(entropy)
        return self.head(self.norm(x)), entropies
