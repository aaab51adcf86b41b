"""``MultiTurnRollout(ray_address=...)``: the envs live in Ray actors and the episodes are the
ones played here, token for token (observations are in the masked segments)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from transformers import AutoTokenizer

from aem_agent.grpo.config import AEMConfig
from aem_agent.rollout.groups import MultiTurnRollout
from aem_agent.rollout.records import Episode, EpisodeSpec
from aem_agent.sft.demonstrations import expert_teacher
from aem_envs.vector import LOCAL, RayEnv
from tests.agent.rollout.test_groups import ScriptedGenerator

pytestmark = pytest.mark.ray

#: Two GRPO groups of two on ALFWorld; seeds pick the tasks.
SPECS = [EpisodeSpec("aem/ALFWorld-v0", seed=s) for s in (0, 0, 5, 5)]
#: Valid moves and replies without an action (the env's invalid-action path).
REPLIES = [
    "<think>start</think><action>look</action>",
    "I am not sure.",
    "<action>inventory</action>",
    "<action>go to desk 1</action>",
    "<action>examine desk 1</action>",
]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _played(episodes: list[Episode]) -> list[tuple[Any, ...]]:
    """Everything an episode is made of, observations included (as token ids)."""
    return [
        (
            e.prompt_ids,
            e.completion_ids,
            e.env_mask,
            e.reward,
            e.won,
            e.score,
            e.done,
            [(t.prompt_ids, t.reply.ids, t.text, t.reward, t.action_valid) for t in e.turns],
        )
        for e in episodes
    ]


def _play(tokenizer: Any, ray_address: str | None, layout: str, **play: Any) -> list[Episode]:
    rollout = MultiTurnRollout(
        tokenizer,
        layout=layout,  # type: ignore[arg-type]
        max_turns=5,
        max_turn_tokens=48,
        max_total_tokens=2048,
        workers=2,
        ray_address=ray_address,
    )
    try:
        episodes = rollout.play(SPECS, **play)
        envs = rollout.envs.idle()
        assert len(envs) == len(SPECS)
        assert all(isinstance(env.unwrapped, RayEnv) == (ray_address is not None) for env in envs)
        return episodes
    finally:
        rollout.close()


def test_scripted_replies_play_the_same_episodes_in_ray_actors(
    ray_cluster: ModuleType, tokenizer: Any
) -> None:
    here = _play(tokenizer, None, "trajectory", generate=ScriptedGenerator(tokenizer, REPLIES))
    there = _play(tokenizer, LOCAL, "trajectory", generate=ScriptedGenerator(tokenizer, REPLIES))
    assert _played(there) == _played(here)
    turns = [t for e in here for t in e.turns]
    assert len(turns) == 20 and {t.action_valid for t in turns} == {True, False}
    assert here[0].completion_ids != here[2].completion_ids  # two tasks, told apart


def test_the_expert_teacher_reads_envs_in_ray_actors(
    ray_cluster: ModuleType, tokenizer: Any
) -> None:
    """A teacher reads the live env (``expert_action()``), here through the actor."""
    here = _play(tokenizer, None, "step", teacher=expert_teacher())
    there = _play(tokenizer, LOCAL, "step", teacher=expert_teacher())
    assert _played(there) == _played(here)
    assert all(t.action_valid for e in here for t in e.turns)


def test_the_config_field_reaches_the_rollout(
    ray_cluster: ModuleType, tokenizer: Any, tmp_path: Path
) -> None:
    config = AEMConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to=[],
        max_completion_length=64,
        env_ray_address=LOCAL,
    )
    rollout = MultiTurnRollout.from_config(config, tokenizer)
    try:
        assert rollout.ray_address == LOCAL
        assert not rollout._owns_ray  # the session's head was running: not this one's to stop
    finally:
        rollout.close()
    assert ray_cluster.is_initialized()
