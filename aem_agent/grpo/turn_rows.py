"""The step layout's batch: one training row per turn, built from TRL's per-episode batch.

Why a batch rewrite at all: TRL scores and normalises rewards per *row*, in groups of
``num_generations`` consecutive rows, so the rollout hands TRL one row per episode (a one-token
stand-in: TRL's forwards over it cost nothing) with the episode's turns attached (``steps``).
After TRL computed the group advantages, the trainer replaces every episode row by one
row per turn — the exact context the model saw and the reply it sampled — sharing the
episode's advantage.

How TRL's keys are carried (checked against TRL's output in a contract test, so that a TRL
upgrade that adds a key fails a test instead of a run):

* per-token keys are rebuilt on the step rows (:data:`PER_TOKEN_KEYS`); the old-policy and
  reference log-probabilities and the vLLM importance-sampling ratio are recomputed there;
* per-episode keys (``advantages``, any other tensor with one entry per episode row) are
  indexed by each step's episode;
* everything else (counts, ``None`` image fields) passes through unchanged.

Row counts differ between processes (episodes have different lengths), and ZeRO-3 needs every
process to make the same number of forward calls: rows are padded to the largest count over
processes (a multiple of ``steps_per_generation``), and no-grad forwards are micro-batched into
the same number of calls on every process, each within a token budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

#: TRL batch keys holding one value per completion token; rebuilt on the step rows.
PER_TOKEN_KEYS: frozenset[str] = frozenset(
    {
        "prompt_ids",
        "prompt_mask",
        "completion_ids",
        "completion_mask",
        "tool_mask",
        "sampling_per_token_logps",
        "old_per_token_logps",
        "ref_per_token_logps",
        "importance_sampling_ratio",
    }
)
#: TRL batch keys that are not per row (passed through as they are).
GLOBAL_KEYS: frozenset[str] = frozenset({"num_items_in_batch"})

#: ``forward(input_ids, attention_mask, logits_to_keep) -> (logps, entropies)``, no grad.
Forward = Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, torch.Tensor | None]]


@dataclass
class StepRows:
    """The step rows of one process, before they become TRL's batch.

    ``episode`` is each row's local episode index (−1 for padding rows).
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    logprobs: torch.Tensor
    entropies: torch.Tensor | None
    episode: torch.Tensor

    @property
    def real(self) -> torch.Tensor:
        return self.episode >= 0


def collect_steps(steps: Sequence[Sequence[dict[str, Any]]], pad_id: int, *, rows: int) -> StepRows:
    """Stack every episode's steps into padded tensors, padded with empty rows to ``rows``.

    ``steps[b]`` lists episode ``b``'s turns as dicts of ``prompt_ids``, ``completion_ids``,
    ``logprobs`` and optionally ``entropies`` (sampler entropies, one per reply token).
    """
    flat = [(b, t, step) for b, turns in enumerate(steps) for t, step in enumerate(turns)]
    if rows < len(flat):
        raise ValueError(f"rows={rows} is less than the {len(flat)} step rows")
    pad_step = {"prompt_ids": [pad_id], "completion_ids": [pad_id], "logprobs": [0.0]}
    flat += [(-1, 0, pad_step)] * (rows - len(flat))
    real = torch.tensor([b >= 0 for b, _, _ in flat], dtype=torch.long).unsqueeze(1)
    prompt_ids, prompt_mask = _stack([s["prompt_ids"] for _, _, s in flat], pad_id, left=True)
    completion_ids, completion_mask = _stack([s["completion_ids"] for _, _, s in flat], pad_id)
    logprobs, _ = _stack([s["logprobs"] for _, _, s in flat], 0.0)
    with_entropies = all("entropies" in s for b, _, s in flat if b >= 0)
    entropies = _stack([s.get("entropies", [0.0]) for _, _, s in flat], 0.0)[0]
    return StepRows(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask * real,
        completion_ids=completion_ids,
        completion_mask=completion_mask * real,
        logprobs=logprobs,
        entropies=entropies if with_entropies else None,
        episode=torch.tensor([b for b, _, _ in flat], dtype=torch.long),
    )


def padded_row_count(local_rows: int, all_rows: Sequence[int], chunks: int) -> int:
    """Rows every process pads to: the largest count, rounded up to a multiple of ``chunks``."""
    largest = max([local_rows, *all_rows, 1])
    return math.ceil(largest / chunks) * chunks


def plan_calls(lengths: Sequence[int], budget: int) -> int:
    """The fewest forward calls whose even row split (:func:`split_even`) keeps every call
    within ``budget`` padded tokens (a single row may exceed it: it cannot be split)."""
    for n in range(1, max(len(lengths), 1) + 1):
        spans = split_even(len(lengths), n)
        if all(len(s) <= 1 or max(lengths[i] for i in s) * len(s) <= budget for s in spans):
            return n
    return max(len(lengths), 1)


def split_even(n_rows: int, n_batches: int) -> list[range]:
    """``n_batches`` contiguous row ranges covering ``n_rows`` (some empty when rows are few)."""
    bounds = [round(i * n_rows / n_batches) for i in range(n_batches + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(n_batches)]


def batched_forward(
    forward: Forward,
    rows: StepRows,
    n_batches: int,
    *,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) over the step rows in exactly ``n_batches`` calls.

    Each call sees only its rows' own width (leading prompt padding and trailing completion
    padding are cut), so short steps do not pay for the longest one. An empty range still
    makes one call on a single padding row, keeping every process's call count equal.
    """
    logps = torch.zeros(rows.completion_ids.shape, dtype=torch.float32)
    entropies = torch.zeros_like(logps) if with_entropy else None
    for span in split_even(len(rows.episode), n_batches):
        index = list(span) or [len(rows.episode) - 1]
        p_ids, p_mask = rows.prompt_ids[index], rows.prompt_mask[index]
        c_ids, c_mask = rows.completion_ids[index], rows.completion_mask[index]
        p_keep = max(int(p_mask.sum(1).max()), 1)
        c_keep = max(int(c_mask.sum(1).max()), 1)
        p_ids, p_mask = p_ids[:, -p_keep:], p_mask[:, -p_keep:]
        c_ids, c_mask = c_ids[:, :c_keep], c_mask[:, :c_keep]
        out_logps, out_entropies = forward(
            torch.cat([p_ids, c_ids], dim=1), torch.cat([p_mask, c_mask], dim=1), c_keep
        )
        if not span:
            continue
        logps[index, :c_keep] = out_logps.float().cpu()
        if entropies is not None and out_entropies is not None:
            entropies[index, :c_keep] = out_entropies.float().cpu()
    return logps, entropies


#: Per-token keys aligned with the completion (trimmed on the right); prompt keys are
#: left-padded (trimmed on the left).
PROMPT_KEYS: frozenset[str] = frozenset({"prompt_ids", "prompt_mask"})


def chunk_batch(batch: dict[str, Any], n_chunks: int) -> list[dict[str, Any]]:
    """Split a TRL training batch into ``n_chunks`` row ranges, each trimmed to its own width.

    Tensors with one entry per row are sliced; prompt columns that are padding in every row
    of a chunk are cut from the left, completion columns from the right; everything else
    (``num_items_in_batch``) is shared. An empty range becomes one padding row with nothing
    to learn (mask 0), so every process still makes ``n_chunks`` forward and backward calls.
    """
    rows = batch["completion_ids"].shape[0]
    chunks = []
    for span in split_even(rows, n_chunks):
        index = list(span) or [rows - 1]
        part = {
            key: value[index]
            if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == rows
            else value
            for key, value in batch.items()
        }
        if not span:
            part["completion_mask"] = torch.zeros_like(part["completion_mask"])
        p_keep = max(int(part["prompt_mask"].sum(1).max()), 1)
        c_keep = max(int(part["completion_mask"].sum(1).max()), 1)
        width = part["completion_ids"].shape[1]
        for key, value in part.items():
            if not isinstance(value, torch.Tensor) or value.dim() < 2:
                continue
            if key in PROMPT_KEYS:
                part[key] = value[:, -p_keep:]
            elif value.shape[1] == width:
                part[key] = value[:, :c_keep]
        chunks.append(part)
    return chunks


def importance_ratio(
    old: torch.Tensor,
    sampling: torch.Tensor,
    mask: torch.Tensor,
    *,
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
) -> torch.Tensor:
    """The vLLM importance-sampling correction π_old/π_sampler, by TRL's modes.

    ``token_*`` modes give a ``(B, T)`` ratio, ``sequence_*`` a ``(B, 1)`` one; ``*_truncate``
    clamps it to ``[clip_min, clip_max]``, ``*_mask`` zeroes values outside. Tokens whose
    sampling log-prob is unknown (NaN) get ratio 1.
    """
    diff = torch.nan_to_num((old - sampling) * mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    if mode.endswith("truncate"):
        return ratio.clamp(min=low, max=high)
    if mode.endswith("mask"):
        return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    raise ValueError(f"unknown vllm_importance_sampling_mode {mode!r}")


def check_keys(out: dict[str, Any], n_episodes: int) -> None:
    """Fail loudly on a TRL batch key this module does not know how to carry."""
    for key, value in out.items():
        known = key in PER_TOKEN_KEYS or key in GLOBAL_KEYS or key == "advantages"
        per_row = isinstance(value, torch.Tensor) and value.dim() >= 2
        if not known and per_row and value.shape[0] == n_episodes:
            raise RuntimeError(
                f"TRL's batch has a per-token key {key!r} that the step layout does not "
                "rebuild; this TRL version is not supported by aem_agent.grpo.turn_rows (see "
                "PER_TOKEN_KEYS)"
            )


def per_episode(out: dict[str, Any], n_episodes: int) -> dict[str, torch.Tensor]:
    """TRL's per-episode tensors (one entry per episode row), to index by each step's episode."""
    return {
        key: value
        for key, value in out.items()
        if key not in PER_TOKEN_KEYS
        and key not in GLOBAL_KEYS
        and isinstance(value, torch.Tensor)
        and value.dim() >= 1
        and value.shape[0] == n_episodes
    }


def _stack(
    rows: Sequence[Sequence[Any]], fill: float | int, *, left: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad ragged rows into a (B, T) tensor and its 0/1 mask (left padding for prompts)."""
    width = max((len(r) for r in rows), default=1)
    values, mask = [], []
    for row in rows:
        gap = [fill] * (width - len(row))
        values.append([*gap, *row] if left else [*row, *gap])
        ones, zeros = [1] * len(row), [0] * (width - len(row))
        mask.append(zeros + ones if left else ones + zeros)
    dtype = torch.float32 if isinstance(fill, float) else torch.long
    return torch.tensor(values, dtype=dtype), torch.tensor(mask, dtype=torch.long)
