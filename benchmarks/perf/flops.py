"""Model-FLOP utilisation on one CPU core: the core's matmul rate and a decoder's FLOPs.

Model FLOPs count the matrix products only: 2 per weight of the blocks' linear layers per
token, the vocabulary projection per scored position, and attention's two products over the
context (:class:`Shape`); a utilisation is a model's FLOP/s over the matmul rate of the same
core taken beside it (:func:`beside_peak`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def matmul_rate(dtype: torch.dtype, *, size: int = 1024, seconds: float = 1.0) -> float:
    """FLOP/s of one thread multiplying two ``size`` × ``size`` matrices of ``dtype``."""
    import torch

    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    a @ b  # warm-up: first-call allocation and kernel selection
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        done += 1
    return 2 * size**3 * done / (time.perf_counter() - start)


@dataclass(frozen=True)
class Shape:
    """The matrix-product sizes of a decoder: per-token block weights, head, attention."""

    block_weights: int
    head_weights: int
    layers: int
    attention_width: int

    @classmethod
    def of(cls, model: Any) -> Shape:
        import torch

        config = model.config
        blocks = sum(
            m.weight.numel()
            for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and ".layers." in name and "lora" not in name
        )
        return cls(
            blocks,
            config.hidden_size * config.vocab_size,
            config.num_hidden_layers,
            config.num_attention_heads * (config.hidden_size // config.num_attention_heads),
        )

    def forward_flops(self, tokens: int, scored: int, attended: int) -> float:
        """Forward FLOPs of ``tokens`` positions, ``scored`` of them projected onto the
        vocabulary, with ``attended`` (query, key) pairs in all."""
        return (
            2.0 * self.block_weights * tokens
            + 2.0 * self.head_weights * scored
            + 4.0 * self.layers * self.attention_width * attended
        )


def beside_peak(
    measure: Callable[[], tuple[float, float]], dtype: torch.dtype
) -> tuple[float, float, float]:
    """``measure()``'s (rate, model FLOP/s) and the ``dtype`` matmul rate of the same core
    taken just before and just after it, averaged.

    Why beside each measurement: on shared cores the rate a core gives moves from one minute
    to the next, so a utilisation is only meaningful against the peak of the same minutes.
    """
    before = matmul_rate(dtype, seconds=0.5)
    rate, flops = measure()
    return rate, flops, (before + matmul_rate(dtype, seconds=0.5)) / 2
