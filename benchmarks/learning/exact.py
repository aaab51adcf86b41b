"""Exact held-out success: the policy's probability of winning each task, from its reply
probabilities, instead of a count of sampled episodes.

Why: a sampled held-out score of 120 episodes at 80 % success has a standard error of about
3.6 points, the size of the effects a learning experiment looks for. Where every state offers
a short list of replies and any other reply ends the episode (``aem-bench/Fetch-v0``), the
success probability is a finite sum over the tree of reply sequences:

    V(state) = Σ_a π(a | context) · (1 if a wins, 0 if it ends the episode, else V(next)),

computed breadth-first with the model's log-probabilities of each listed item's reply tokens
(the tokens the warm-up taught: :func:`benchmarks.learning.start.warmup_reply`). Branches the
env says can no longer win (``winnable()``) are not expanded. The contexts are the rollout's
own (its env construction, its step-layout prompt), so the probabilities are those of the
contexts ``play`` sends.

What is exact and what is not: a reply spelled with other tokens than the warm-up's (say
``red`` in two pieces) or a reply the parser cannot read (it costs a turn in play) counts as
a loss here; ``heldout/offlist_mass`` reports the mean probability of such replies per
context, the most the exact score can be below the played one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from benchmarks.learning.config import ExperimentError

if TYPE_CHECKING:
    from aem_agent.rollout.engine import Live
    from aem_agent.rollout.groups import MultiTurnRollout
    from aem_agent.rollout.records import EpisodeSpec

#: Most (context + reply) sequences in one forward: bounds memory, not the result.
BATCH_SEQUENCES = 256


@dataclass
class _Node:
    """One reachable state: the episode in it (its env and what the policy is shown) and its
    probability."""

    task: int
    episode: Live[Any]
    probability: float


def exact_success(
    model: Any,
    rollout: MultiTurnRollout,
    specs: Sequence[EpisodeSpec],
    *,
    temperature: float = 1.0,
) -> dict[str, Any]:
    """The exact success probability of sampling from ``model`` at ``temperature`` on every
    spec, and their mean (``heldout/success_rate``).

    Returns ``heldout/success_rate``, ``heldout/offlist_mass`` (mean probability, over the
    contexts visited, of a reply that is not a listed item's warm-up spelling),
    ``heldout/contexts`` (how many were scored) and ``per_task`` (the success of each spec).
    """
    import torch

    from aem_agent.rollout.records import Episode

    if rollout.layout != "step":
        raise ExperimentError(
            "exact evaluation scores step-layout prompts; set rollout_layout: step"
        )
    if temperature <= 0:
        raise ExperimentError("exact evaluation scores the sampling policy: eval.temperature > 0")
    frontier: list[_Node] = []
    for task, spec in enumerate(specs):
        start = rollout.start(spec)  # the rollout's env: its parser, its step limit
        frontier.append(_Node(task, start, 1.0))
        if not callable(getattr(start.env.unwrapped, "winnable", None)):
            raise ExperimentError(
                f"{spec.env_id} has no winnable(): exact evaluation needs an env whose every "
                "unlisted reply ends the episode (aem-bench/Fetch-v0); use eval.method: play"
            )
    starts = [node.episode for node in frontier]
    success = [0.0] * len(specs)
    offlist, contexts = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        while frontier:
            pairs = [(n, a) for n in frontier for a in n.episode.input.admissible_actions or []]
            replies = [_reply_ids(rollout, action) for _, action in pairs]
            prompts = {
                id(node): rollout.context(Episode(specs[node.task]), node.episode.input)
                for node in frontier
            }
            logps = _sequence_logps(
                model, [prompts[id(n)] for n, _ in pairs], replies, temperature=temperature
            )
            listed: dict[int, float] = {}
            children: list[_Node] = []
            for (node, _), ids, logp in zip(pairs, replies, logps, strict=True):
                p = float(torch.exp(torch.tensor(logp)))
                listed[id(node)] = listed.get(id(node), 0.0) + p
                child = _step(rollout, node, ids, node.probability * p)
                if child == "won":
                    success[node.task] += node.probability * p
                elif child is not None:
                    children.append(child)
            offlist += sum(max(0.0, 1.0 - listed.get(id(n), 0.0)) for n in frontier)
            contexts += len(frontier)
            frontier = children
    finally:
        model.train(was_training)
        for start in starts:  # still as reset: every branch stepped a copy
            rollout.release(start)
    return {
        "heldout/success_rate": sum(success) / max(len(success), 1),
        "heldout/offlist_mass": offlist / max(contexts, 1),
        "heldout/contexts": float(contexts),
        "per_task": success,
    }


def _reply_ids(rollout: MultiTurnRollout, action: str) -> list[int]:
    """The warm-up's token ids of ``action``'s reply, up to the turn's token limit (the
    end-of-turn token is not needed: the closing tag ends the action)."""
    from benchmarks.learning.start import warmup_reply

    ids = rollout.teacher_reply(warmup_reply(action)).ids[:-1]  # without the end-of-turn
    if len(ids) > rollout.max_turn_tokens:
        raise ExperimentError(
            f"the reply of {action!r} is {len(ids)} tokens, more than max_turn_tokens="
            f"{rollout.max_turn_tokens}: raise max_turn_tokens to spell every action"
        )
    return ids


def _step(rollout: MultiTurnRollout, node: _Node, ids: list[int], probability: float) -> Any:
    """The child of ``node`` after the reply ``ids``: ``"won"``, None (lost, or no longer
    winnable) or the child :class:`_Node` (a copy of the episode, stepped as the rollout
    steps one)."""
    episode = copy.deepcopy(node.episode)
    decoded = cast("str", rollout.tokenizer.decode(ids, skip_special_tokens=True))
    step = episode.step(rollout.reply_prefix + decoded)
    assert step is not None  # errors are not contained: an env failure propagates
    if step.info["won"]:
        return "won"
    if episode.done or not episode.env.unwrapped.winnable():  # type: ignore[attr-defined]
        return None
    return _Node(node.task, episode, probability)


def _sequence_logps(
    model: Any,
    contexts: Sequence[list[int]],
    replies: Sequence[list[int]],
    *,
    temperature: float,
) -> list[float]:
    """log π(reply | context) of every pair, left-padded (as the sampler pads) so that only
    the last positions' logits are computed."""
    import torch

    device = next(model.parameters()).device
    out: list[float] = []
    for start in range(0, len(contexts), BATCH_SEQUENCES):
        batch = list(zip(contexts[start : start + BATCH_SEQUENCES], replies[start:], strict=False))
        width = max(len(c) + len(r) for c, r in batch)
        keep = max(len(r) for _, r in batch) + 1
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (context, reply) in enumerate(batch):
            seq = [*context, *reply]
            ids[row, width - len(seq) :] = torch.tensor(seq)
            attention[row, width - len(seq) :] = 1
        positions = (attention.cumsum(1) - 1).clamp(min=0)
        with torch.no_grad():
            logits = model(
                input_ids=ids.to(device),
                attention_mask=attention.to(device),
                position_ids=positions.to(device),
                logits_to_keep=keep,
            ).logits
        logp = torch.log_softmax(logits.float() / temperature, dim=-1).cpu()
        for row, (_, reply) in enumerate(batch):
            # logits at column j of the kept ones predict token width - keep + j + 1
            first = keep - 1 - len(reply)
            rows = logp[row, first : first + len(reply)]
            out.append(float(rows.gather(1, torch.tensor(reply).unsqueeze(1)).sum()))
    return out
