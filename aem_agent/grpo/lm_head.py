"""Score only the reply positions in TRL's fused LM head, on CPU as on GPU.

TRL's fused head (``add_fused_lm_head`` in ``trl.trainer.utils``) projects onto the
vocabulary only the positions that carry a label when Triton runs its kernel, and every
position of every row otherwise, so that devices which compile one program per tensor shape
(Neuron) always see the same shape. On CPU that projects each prompt position onto the whole
vocabulary and throws the result away: a step-layout row of SmolLM2 is about 150 prompt and
at most 32 reply tokens, and the head's forward and backward over the prompt positions are
a large share of a training step (measured in docs/training.md). The values are the same
either way; only the positions nobody reads are skipped. ``AEMGRPOTrainer`` scores its
forwards inside :func:`aem_agent.grpo.trl_private.reply_positions_only` (where the switch of
TRL's private predicate lives, scoped to those forwards); ``aem sft`` trains with
:class:`ReplyScoringSFTTrainer`, where the skipped share is larger still (a reply of a dozen
tokens after a prompt of hundreds).
"""

from __future__ import annotations

from typing import Any

from trl import SFTTrainer

from aem_agent.grpo.trl_private import TiedHeadResume, reply_positions_only


class ReplyScoringSFTTrainer(TiedHeadResume, SFTTrainer):
    """TRL's ``SFTTrainer`` whose loss forward scores only the labelled (reply) positions (and
    whose resume knows tied weights: :class:`~aem_agent.grpo.trl_private.TiedHeadResume`)."""

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        with reply_positions_only(self.accelerator.device):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
