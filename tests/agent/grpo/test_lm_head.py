"""``reply_positions_only``: TRL's fused head scores only labelled positions on CPU, with
the same log-probs and entropies as when it scores every position."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM
from trl.trainer import utils as trl_utils

from aem_agent.grpo.trl_private import reply_positions_only

PROMPT, REPLY = 9, 3
APPLY = trl_utils._ChunkedLogProbFunction.apply


def scored(model: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], Any]:
    """The number of positions the head projected per call, and the fused forward's output."""
    seen: list[int] = []

    def spy(hidden: torch.Tensor, *args: Any) -> Any:
        seen.append(hidden.shape[0])
        return APPLY(hidden, *args)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", spy)
    ids = torch.randint(3, 60, (2, PROMPT + REPLY), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # a left-padded prompt
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-REPLY] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return seen, out


def test_only_reply_positions_are_projected_and_values_stay(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    full_rows, full = scored(model, monkeypatch)
    with reply_positions_only(torch.device("cpu")):
        rows, ours = scored(model, monkeypatch)
    # Shifted by one: every position but the last is scored in full, REPLY of them otherwise.
    assert full_rows == [2 * (PROMPT + REPLY - 1)] and rows == [2 * REPLY]
    for name in ("log_probs", "entropy"):
        torch.testing.assert_close(getattr(ours, name), getattr(full, name))
    assert ours.log_probs[:, -REPLY:].ne(0).all()


def test_the_predicate_is_restored_and_graph_devices_are_left_alone() -> None:
    before = trl_utils._use_triton
    with reply_positions_only(torch.device("cpu")):
        assert trl_utils._use_triton(torch.device("cpu"))
    assert trl_utils._use_triton is before
    with reply_positions_only(torch.device("xla")):
        assert trl_utils._use_triton is before


def test_sft_trains_on_reply_positions_only(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig

    from aem_agent.grpo.lm_head import ReplyScoringSFTTrainer

    seen: list[int] = []

    def spy(hidden: torch.Tensor, *args: Any) -> Any:
        seen.append(hidden.shape[0])
        return APPLY(hidden, *args)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", spy)
    samples = [
        {
            "input_ids": list(range(3, 3 + PROMPT + REPLY)),
            "completion_mask": [0] * PROMPT + [1] * REPLY,
        }
        for _ in range(2)
    ]
    config = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        completion_only_loss=True,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = ReplyScoringSFTTrainer(
        model=str(tiny_model_dir),
        args=config,
        train_dataset=Dataset.from_list(samples),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    trainer.train()
    assert seen == [2 * REPLY]
    assert trl_utils._use_triton is not None and not trl_utils._use_triton(torch.device("cpu"))
