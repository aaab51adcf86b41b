"""aem envs in TRL's own tool loop (``environment_factory``), with GRPO and with AEM per turn.

The tiny random model cannot call a tool by chance, so :func:`tool_model_dir` gives each of
three whole tool calls one token of its tokenizer and teaches it, with a few supervised steps
on real rendered prompts, to answer every turn with one of them, about equally likely (the
three actions are valid in one env or the other, or never). What happens next is all TRL's
and the env's: TRL samples, parses the calls, steps the env, feeds the results back and
scores the rollouts with ``get_reward``; the sampled actions differ, so the rewards do too.
"""

from __future__ import annotations

import gc
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import get_json_schema
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen2_5_chat_template

from aem_agent import credit
from aem_agent.credit import Credit, CreditError, TurnBatch
from aem_agent.grpo.config import AEMConfig, ConfigError
from aem_agent.grpo.tool_env import (
    ACT_INSTRUCTION,
    EPISODE_OVER,
    INFRA_FAILED,
    environment_factory,
    reply_turns,
    tool_dataset,
)
from aem_agent.grpo.trainer import AEMGRPOTrainer
from aem_agent.grpo.trajectory_layout import run_turn_ids
from aem_agent.models.tiny import build_tiny_model
from aem_envs.alfworld.env import ALFWorldEnv
from aem_envs.core.errors import AEMError
from tests.agent.conftest import DoorsEnv

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

ALFWORLD, WEBSHOP = "aem/ALFWorld-v0", "aem/WebShop-v0"
#: WebShop episodes come from its test split, as in the WebShop env tests.
TEST_SPLIT = {"split": "test"}
#: What the taught model calls ``act`` with: valid in ALFWorld, valid in WebShop, never valid.
ACTIONS = ("look", "search[coffee]", "dance")
#: Tool calls per rollout TRL allows; the taught model always calls, so every rollout has
#: this many tool results and one more reply than that.
TOOL_ITERATIONS = 2


def tool_call(action: str) -> str:
    """A reply calling ``act`` as the Qwen2.5 template writes tool calls."""
    return f'<tool_call>\n{{"name": "act", "arguments": {{"action": "{action}"}}}}\n</tool_call>'


def contexts(tokenizer: Any, env_id: str, options: dict | None) -> list[str]:
    """Rendered contexts a rollout meets: the first prompt, then after one call."""
    env = environment_factory(env_id, options=options)()
    messages = [{"role": "user", "content": env.reset(seed=0)}]
    rendered = []
    for action in ACTIONS[:2]:
        rendered.append(
            tokenizer.apply_chat_template(
                messages, tools=[env.act], add_generation_prompt=True, tokenize=False
            )
        )
        call = {"type": "function", "function": {"name": "act", "arguments": {"action": action}}}
        messages = [
            *messages,
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "act", "content": env.act(action)},
        ]
    return rendered


@pytest.fixture(scope="module")
def tool_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model with a tool-calling (Qwen2.5) template, taught to call ``act``.

    Each whole tool call is one token of its tokenizer (as :mod:`aem_agent.models.tiny` makes an
    action one or two tokens for the learning experiments), so a few steps teach the reply.
    """
    scratch = build_tiny_model(tmp_path_factory.mktemp("tool-tokenizer"))
    tokenizer = AutoTokenizer.from_pretrained(scratch)
    tokenizer.chat_template = qwen2_5_chat_template
    texts = contexts(tokenizer, ALFWORLD, None) + contexts(tokenizer, WEBSHOP, TEST_SPLIT)
    calls = [tool_call(action) for action in ACTIONS]
    # A vocabulary learnt on the rendered prompts keeps them short (~500 tokens, not ~1300).
    directory = build_tiny_model(
        tmp_path_factory.mktemp("tool-model"),
        vocab_size=1024,
        corpus=texts,
        added_tokens=calls,
        max_positions=4096,
    )
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.save_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory)
    teach(model, tokenizer, [(text, call + "<|im_end|>") for text in texts for call in calls])
    model.save_pretrained(directory)
    return directory


def teach(model: Any, tokenizer: Any, pairs: list[tuple[str, str]], steps: int = 40) -> None:
    """Supervised steps on (context, reply) pairs, the loss on the reply tokens only."""
    rows, labels = [], []
    for context, reply in pairs:
        head = tokenizer(context, add_special_tokens=False)["input_ids"]
        tail = tokenizer(reply, add_special_tokens=False)["input_ids"]
        rows.append(head + tail)
        labels.append([-100] * len(head) + tail)
    width = max(map(len, rows))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    target = torch.tensor([lab + [-100] * (width - len(lab)) for lab in labels])
    attention = (torch.arange(width) < torch.tensor([len(r) for r in rows])[:, None]).long()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    torch.manual_seed(0)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=attention, labels=target).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # Three equally likely calls: the least loss is ln 3 / 2 per reply token (≈ 0.55).
    assert loss.item() < 0.7, f"the tiny model did not learn to call the tool (loss {loss:.2f})"


def settings(tmp_path: Path) -> dict:
    return dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=1024,
        max_tool_calling_iterations=TOOL_ITERATIONS,
        max_steps=1,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=3,
        temperature=1.0,
        top_k=0,
    )


def weights(model: Any) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters() if p.requires_grad]


def moved(before: list[torch.Tensor], model: Any) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, weights(model), strict=True))


# ---------------------------------------------------------------------- the environment
@pytest.mark.parametrize(("env_id", "options"), [(ALFWORLD, None), (WEBSHOP, TEST_SPLIT)])
def test_expert_episode_through_the_tool(env_id: str, options: dict | None) -> None:
    env = environment_factory(env_id, options=options)()
    first = env.reset(prompt=[{"role": "user", "content": ""}], seed=1)
    assert first.endswith(ACT_INSTRUCTION)
    assert "Admissible actions now:" in first
    result = ""
    for _ in range(env.env.unwrapped.max_steps):
        result = env.act(env.env.unwrapped.expert_action())
        if "The episode is over" in result:
            break
    assert "The episode is over (won, score 1)" in result
    assert env.get_reward() == 10.0  # the paper's scheme: +10 on success, no invalid action
    assert env.act("look") == EPISODE_OVER
    assert env.get_reward() == 10.0


def test_rows_pick_the_task_and_the_counter_seeds_the_rest() -> None:
    make = environment_factory(ALFWORLD)
    a, b = make(), make()
    assert a.reset(seed=5) == b.reset(seed=5)  # a group's rollouts share a row: one task
    assert a.reset(seed=5) != a.reset(seed=6)
    firsts = {make().reset() for _ in range(3)}  # no seed: the shared counter, 0, 1, 2
    assert len(firsts) == 3
    assert b.reset() not in firsts  # the counter goes on (3)


def test_invalid_actions_cost_the_scheme_penalty() -> None:
    env = environment_factory(ALFWORLD, max_steps=3)()
    env.reset(seed=0)
    env.act("dance")
    env.act("look")
    result = env.act("dance")
    assert "The episode is over (not won" in result  # the step limit
    assert env.get_reward() == pytest.approx(-0.2)


def test_the_tool_schema_is_what_trl_builds() -> None:
    env = environment_factory(ALFWORLD)()
    schema = get_json_schema(env.act)["function"]
    assert schema["name"] == "act"
    assert list(schema["parameters"]["properties"]) == ["action"]
    assert "admissible" in schema["parameters"]["properties"]["action"]["description"]


def test_the_env_closes_when_the_instance_is_collected() -> None:
    env = environment_factory(ALFWORLD)()
    env.reset(seed=0)
    inner = env.env.unwrapped
    del env
    gc.collect()
    assert inner._closed


def test_unknown_id_fails_at_the_factory() -> None:
    with pytest.raises(AEMError, match="unknown environment id"):
        environment_factory("aem/Nope-v0")


# ---------------------------------------------------------------------- the trainers
def test_run_turn_ids_number_the_runs_of_model_tokens() -> None:
    mask = torch.tensor([[1, 1, 0, 0, 1, 0, 1, 1], [0, 1, 1, 1, 0, 0, 0, 0]])
    expected = torch.tensor([[0, 0, -1, -1, 1, -1, 2, 2], [-1, 0, 0, 0, -1, -1, -1, -1]])
    assert torch.equal(run_turn_ids(mask), expected)


def on_the_factory(trainer_class: type, model_dir: Path, args: Any, *, tasks: int) -> Any:
    """A ``trainer_class`` (TRL's or aem's) on ALFWorld through :func:`environment_factory`."""
    return trainer_class(
        model=str(model_dir),
        args=args,
        train_dataset=tool_dataset(ALFWORLD, tasks),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        environment_factory=environment_factory(ALFWORLD, max_steps=5),
    )


def test_grpo_trains_through_the_factory(tool_model_dir: Path, tmp_path: Path) -> None:
    """Plain TRL: the factory is all it needs (the env's ``get_reward`` is the reward)."""
    trainer = on_the_factory(GRPOTrainer, tool_model_dir, GRPOConfig(**settings(tmp_path)), tasks=4)
    before = weights(trainer.model)
    trainer.train()
    [row] = [row for row in trainer.state.log_history if "tools/call_frequency" in row]
    assert row["tools/call_frequency"] > 1  # several tool calls per rollout
    assert row["reward_std"] > 0  # the sampled actions differ in validity ...
    assert moved(before, trainer.model)  # ... so the advantages, and the weights, move


@pytest.mark.parametrize(("env_id", "options"), [(ALFWORLD, None), (WEBSHOP, TEST_SPLIT)])
def test_aem_modulates_each_tool_call_turn(
    tool_model_dir: Path, tmp_path: Path, env_id: str, options: dict | None
) -> None:
    config = AEMConfig(**settings(tmp_path), rollout_layout="trajectory")
    trainer = AEMGRPOTrainer(
        model=str(tool_model_dir),
        args=config,
        train_dataset=tool_dataset(env_id, 4),
        processing_class=AutoTokenizer.from_pretrained(tool_model_dir),
        environment_factory=environment_factory(env_id, options=options, max_steps=5),
    )
    assert trainer.rollout_func is None  # TRL's loop, not aem's own rollout
    before = weights(trainer.model)
    trainer.train()
    [row] = [row for row in trainer.state.log_history if "aem/units" in row]
    rollouts = config.per_device_train_batch_size
    # One unit per model reply: more units than rollouts, as many as the loop allowed.
    assert rollouts < row["aem/units"] <= rollouts * (TOOL_ITERATIONS + 1)
    assert row["aem/entropy_mean"] > 0
    assert row["reward_std"] > 0
    assert moved(before, trainer.model)


def test_the_tool_loop_needs_the_trajectory_layout(tool_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rollout_layout='trajectory'"):
        AEMGRPOTrainer(
            model=str(tool_model_dir),
            args=AEMConfig(**settings(tmp_path)),
            train_dataset=tool_dataset(ALFWORLD, 4),
            environment_factory=environment_factory(ALFWORLD),
        )


def test_each_tool_call_turn_gets_its_own_alpha(tool_model_dir: Path, tmp_path: Path) -> None:
    """On TRL's batch itself: the advantage is per token, one α per run of model tokens."""
    config = AEMConfig(**settings(tmp_path), rollout_layout="trajectory", aem_min_range=0.0)
    trainer = on_the_factory(AEMGRPOTrainer, tool_model_dir, config, tasks=1)
    torch.manual_seed(1)  # a sample whose rollouts differ in reward: advantages are not all 0
    trainer.model.train()
    out = trainer._generate_and_score_completions([trainer.train_dataset[0]] * 4)
    turns = run_turn_ids(out["completion_mask"] * out["tool_mask"])
    advantages = out["advantages"]
    assert advantages.shape == turns.shape  # per token: rows hold several units
    assert advantages.abs().sum() > 0
    per_turn = []
    for row in range(len(turns)):
        for turn in range(int(turns[row].max()) + 1):
            values = advantages[row][turns[row] == turn]
            assert torch.all(values == values[0])  # one α for the whole turn
            per_turn.append(float(values[0]))
    assert len(per_turn) > len(turns)  # more turns than rollouts ...
    assert len(set(per_turn)) > len(set(advantages[:, 0].tolist()))  # ... with their own α


class LostEngineDoors(DoorsEnv):
    """Doors whose engine is lost at the first step: ``info["infra_error"]`` is reported."""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "infra_error": "engine lost"}


def test_an_infrastructure_failure_ends_the_episode_unscored() -> None:
    env_id = "aemtest/LostEngineDoors-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=LostEngineDoors)
    env = environment_factory(env_id)()
    env.reset(seed=0)
    assert INFRA_FAILED in env.act("open red")
    assert env.get_reward() is None  # TRL leaves an unscored rollout out of the baseline
    assert env.act("open blue") == EPISODE_OVER
    env.reset(seed=0)
    assert env.get_reward() == 0.0  # a new episode is scored again


# ---------------------------------------------------------------------- turns for credit
def reply(*calls: tuple[str, Any]) -> dict[str, Any]:
    """A reply as TRL's ``parse_response`` reads it, calling ``(name, arguments)`` in order."""
    tool_calls = [
        {"type": "function", "function": {"name": name, "arguments": arguments}}
        for name, arguments in calls
    ]
    return {"role": "assistant", "content": "", "tool_calls": tool_calls}


def test_the_trace_records_every_call() -> None:
    env = environment_factory(ALFWORLD, max_steps=2)()
    env.reset(seed=0)
    first = env.trace.first
    assert first and first in env.reset(seed=0)  # the raw observation, inside the prompt tail
    env.act("dance")
    env.act("look")
    env.act("look")  # after the step limit: not stepped, 0, the state stays
    trace = env.trace
    assert len(trace.rewards) == len(trace.observations) == 3
    assert sum(trace.rewards) == pytest.approx(env.get_reward())
    assert trace.rewards[2] == 0.0 and trace.observations[2] == trace.observations[1]
    env.reset(seed=0)
    assert env.trace.rewards == ()  # a new episode, a new trace


def test_each_reply_takes_the_calls_it_made(doors_env_id: str) -> None:
    env = environment_factory(doors_env_id)()
    env.reset(seed=0)
    for action in ("open purple", "open red", "open green"):
        env.act(action)
    trace = env.trace
    replies = [
        reply(("act", {"action": "open purple"}), ("act", {"action": "open red"})),
        # One call that reaches the env; one to an unknown tool and one with arguments that
        # do not fit ``act`` never did (TRL answered them with an error).
        reply(("act", {"action": "open green"}), ("jump", {}), ("act", {"door": "red"})),
        reply(),
    ]
    anchors, rewards = reply_turns(env, replies)
    assert anchors == [trace.first, trace.observations[1], trace.observations[2]]
    assert rewards == [sum(trace.rewards[:2]), trace.rewards[2], 0.0]
    # The last reply's calls ran when TRL dropped their results for lack of room.
    anchors, rewards = reply_turns(env, [replies[0], reply(("act", {"action": "x"}))])
    assert anchors == [trace.first, trace.observations[1]]
    assert rewards == [sum(trace.rewards[:2]), trace.rewards[2]]
    with pytest.raises(CreditError, match="cannot be told apart"):
        reply_turns(env, [reply(("act", {"action": "x"})), reply()])


@dataclass
class Spy:
    """A user-written estimator that reads the turns' rewards and states and passes the
    advantage on unchanged (what it saw is kept for the test)."""

    name: str = "spy"
    needs: frozenset[str] = frozenset({"reward", "anchor"})
    seen: list[TurnBatch] = field(default_factory=list)

    def __call__(self, batch: TurnBatch) -> Credit:
        batch.require(self.name, "reward", "anchor")
        self.seen.append(batch)
        return Credit(batch.advantage, {"spy/turns": float(len(batch))})


@pytest.fixture
def spy() -> Iterator[Spy]:
    estimator = Spy()
    credit.register("spy", lambda config: estimator)
    yield estimator
    credit.unregister("spy")


def test_gigpo_and_a_users_estimator_see_the_tool_loops_turns(
    tool_model_dir: Path, tmp_path: Path, spy: Spy
) -> None:
    """On TRL's batch: each reply is a turn whose state is what the env showed before it and
    whose reward is what its call earned; all rollouts of the group start in one state, so
    every first turn gets GRPO's advantage plus its standardised discounted return."""
    config = AEMConfig(**settings(tmp_path), rollout_layout="trajectory", credit="spy+gigpo")
    trainer = on_the_factory(AEMGRPOTrainer, tool_model_dir, config, tasks=1)
    torch.manual_seed(1)  # rollouts whose rewards differ
    trainer.model.train()
    out = trainer._generate_and_score_completions([trainer.train_dataset[0]] * 4)
    [batch] = spy.seen
    envs = trainer.environments
    turns = run_turn_ids(out["completion_mask"] * out["tool_mask"])
    for e, env in enumerate(envs):
        mine = batch.episode == e
        count = int(turns[e].max()) + 1
        assert batch.turn[mine].tolist() == list(range(count))
        trace = env.trace  # the taught model calls once per reply; the last call never ran
        assert len(trace.rewards) == count - 1 == TOOL_ITERATIONS
        states = [trace.first, *trace.observations][:count]
        assert [batch.anchor[u] for u in mine.nonzero().flatten()] == states
        assert batch.reward[mine].tolist() == pytest.approx([*trace.rewards, 0.0])
    first = batch.turn == 0
    assert len({batch.anchor[u] for u in first.nonzero().flatten()}) == 1
    returns = torch.zeros(len(envs), dtype=torch.float64)
    for u in range(len(batch)):
        returns[batch.episode[u]] += 0.95 ** int(batch.turn[u]) * batch.reward[u]
    assert returns.std() > 0  # the rollouts' returns differ
    step = (returns - returns.mean()) / (returns.std() + 1e-6)
    expected = batch.advantage[first] + step
    got = torch.stack([out["advantages"][e][turns[e] == 0][0] for e in range(len(envs))])
    assert torch.allclose(got.double(), expected, atol=1e-5)
    assert trainer._metrics["train"]["spy/turns"] == [float(len(batch))]


def test_gigpo_with_aem_trains_through_the_factory(tool_model_dir: Path, tmp_path: Path) -> None:
    config = AEMConfig(**settings(tmp_path), rollout_layout="trajectory", credit="gigpo+aem")
    trainer = on_the_factory(AEMGRPOTrainer, tool_model_dir, config, tasks=4)
    before = weights(trainer.model)
    trainer.train()
    [row] = [row for row in trainer.state.log_history if "gigpo/step_groups" in row]
    assert row["gigpo/repeated_state_share"] > 0  # the group's first turns share a state
    assert row["aem/units"] > config.per_device_train_batch_size  # AEM per reply, after GiGPO
    assert moved(before, trainer.model)


class LostEngineALFWorld(ALFWorldEnv):
    """ALFWorld whose second instance loses its engine at the first step."""

    made = itertools.count()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = next(self.made) % 4

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        if self.index == 1:
            info = {**info, "infra_error": "engine lost"}
        return obs, reward, terminated, truncated, info


def test_an_infrastructure_failure_on_the_tool_loop_is_counted_and_out_of_the_loss(
    tool_model_dir: Path, tmp_path: Path
) -> None:
    env_id = "aemtest/LostEngineALFWorld-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=LostEngineALFWorld)
    trainer = AEMGRPOTrainer(
        model=str(tool_model_dir),
        args=AEMConfig(**settings(tmp_path), rollout_layout="trajectory"),
        train_dataset=tool_dataset(ALFWORLD, 1),
        processing_class=AutoTokenizer.from_pretrained(tool_model_dir),
        environment_factory=environment_factory(env_id, max_steps=5),
    )
    torch.manual_seed(1)
    trainer.model.train()
    out = trainer._generate_and_score_completions([trainer.train_dataset[0]] * 4)
    lost = [bool(env.infra_error) for env in trainer.environments]
    assert lost == [False, True, False, False]  # the pool plays rollouts in input order
    assert trainer._metrics["train"]["episode/infra_failed"] == [1.0]
    assert out["completion_mask"][1].sum() == 0  # out of the loss ...
    assert torch.all(out["advantages"][1] == 0)  # ... and of the baseline (TRL, reward None)
    assert out["num_items_in_batch"] == (out["completion_mask"] * out["tool_mask"]).sum()
    assert out["completion_mask"][[0, 2, 3]].sum() > 0
