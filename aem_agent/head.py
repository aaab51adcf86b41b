"""Score only the reply positions in TRL's fused LM head, on CPU as on GPU.

TRL's fused head (``add_fused_lm_head`` in ``trl.trainer.utils``) projects onto the
vocabulary only the positions that carry a label when Triton runs its kernel, and every
position of every row otherwise, so that devices which compile one program per tensor shape
(Neuron) always see the same shape. On CPU that projects each prompt position onto the whole
vocabulary and throws the result away: a step-layout row of SmolLM2 is about 150 prompt and
at most 32 reply tokens, and the head's forward and backward over the prompt positions were
about 40 % of a training step (``benchmarks/perf/train_step.py``). The values are the same
either way; only the positions nobody reads are skipped. ``AEMGRPOTrainer`` scores its
forwards inside :func:`reply_positions_only`; ``aem sft`` trains with
:class:`ReplyScoringSFTTrainer`, where the skipped share is larger still (a reply of a dozen
tokens after a prompt of hundreds).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from trl import SFTTrainer
from trl.trainer import utils as trl_utils

#: Graph-compiling device types (Neuron runs as ``xla``), which TRL scores in full on purpose so
#: that each compiled program keeps one shape; left as TRL has them.
FIXED_SHAPE_DEVICES = frozenset({"xla", "hpu", "lazy"})


@contextmanager
def reply_positions_only(device: torch.device) -> Iterator[None]:
    """Within: TRL's fused head scores only labelled positions of forwards on ``device``.

    TRL reads one module-level predicate for that choice (``_use_triton``, looked up at call
    time); it is swapped for the duration and restored after, so other trainers in the
    process are untouched. The kernel module keeps its own reference, so the projection
    itself still runs in torch on CPU.
    """
    if device.type in FIXED_SHAPE_DEVICES:
        yield
        return
    saved = trl_utils._use_triton
    trl_utils._use_triton = _labelled_positions_only
    try:
        yield
    finally:
        trl_utils._use_triton = saved


def _labelled_positions_only(device: torch.device) -> bool:
    """TRL's ``compact`` choice, answered yes: project only positions that carry a label."""
    return True


class ReplyScoringSFTTrainer(SFTTrainer):
    """TRL's ``SFTTrainer`` whose loss forward scores only the labelled (reply) positions."""

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        with reply_positions_only(self.accelerator.device):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
