"""``aem play``: a person plays one episode in the terminal, or watches a policy play it.

Each step shows the step count against the limit, the last reward, the running return and
the score, then the observation. A person sees the admissible actions numbered and may type
a number or an action; a policy (``--policy expert``, ``aem-ref``, ``hf:DIR``, ...) shows its
reply and the action parsed from it. The last line sums the episode up.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from aem_cli.arguments import policy_spec, positive_int
from aem_cli.env_kwargs import add_env_kwargs_flag
from aem_envs.core.base import TextEnv
from aem_envs.core.errors import ArgumentError
from aem_envs.registration import resolve_env_id

if TYPE_CHECKING:
    from aem_agent.policies import Policy

#: What a person types to stop before the episode ends.
QUIT = ("quit", "exit", ":q")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "play",
        help="play one episode in the terminal, or watch a policy play it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("env_id", help="an id from `aem envs`, e.g. aem/ALFWorld-v0")
    parser.add_argument(
        "--policy",
        type=policy_spec,
        metavar="SPEC",
        help="watch a policy play: expert, random, smollm2, aem-ref, hf:<path>, "
        "openai:<model>@<url> (models play as the quick suite plays them: greedy)",
    )
    parser.add_argument("--seed", type=int, default=0, help="reset seed (default: 0)")
    parser.add_argument("--split", help="task split (default: the env's first)")
    parser.add_argument("--task-id", help="play this task (see `aem envs ID --tasks`)")
    parser.add_argument("--max-steps", type=positive_int, help="episode step limit")
    add_env_kwargs_flag(parser)
    parser.add_argument("--quiet", action="store_true", help="print only the final result")
    parser.set_defaults(func=run)


def make_env(args: argparse.Namespace) -> gym.Env:
    """The env the flags name (id, ``--env-kwargs``, ``--max-steps``); ``aem serve`` reuses it."""
    env_id = resolve_env_id(args.env_id)
    kwargs = dict(args.env_kwargs)
    if args.max_steps is not None:
        kwargs["max_steps"] = args.max_steps
    return gym.make(env_id, **kwargs)


def check_split(env_id: str, split: str | None) -> None:
    """Refuse a split the id's class does not have, in one line, before anything is built."""
    module, _, bare = env_id.rpartition(":")
    if module:  # "aem_envs:aem/..." registers its ids on import, as gym.make would
        importlib.import_module(module)
    creator = gym.spec(bare).entry_point
    env_class = load_env_creator(creator) if isinstance(creator, str) else None
    splits = getattr(env_class, "splits", None)
    if split is not None and splits is not None and split not in splits:
        raise ArgumentError(f"--split {split!r}: {bare} has splits {list(splits)}")


def check_task_id(env: gym.Env, split: str | None, task_id: str | None) -> None:
    """Refuse a task id the env does not have (its task set may come from ``--env-kwargs``)
    in one line, before a model is loaded."""
    inner = env.unwrapped
    if task_id is None or not isinstance(inner, TextEnv):
        return
    chosen = split or inner.splits[0]
    if task_id not in set(inner.task_ids(chosen)):
        raise ArgumentError(
            f"--task-id {task_id!r} is not in split {chosen!r} of {env_name(env)}; "
            f"list them with `aem envs {env_name(env)} --tasks --split {chosen}`"
        )


def env_name(env: gym.Env) -> str:
    """The id ``env`` was made with, as ``aem envs`` lists it."""
    return env.spec.id.split(":", 1)[-1] if env.spec else type(env.unwrapped).__name__


def load_watched(spec: str) -> Policy:
    """The policy ``spec`` as the quick suite plays it (its ``policies:`` entry: greedy)."""
    from aem_agent.policies import load_policy
    from benchmarks.suite import load_suite

    return load_policy(spec, **load_suite("quick").kwargs_for(spec))


def run(args: argparse.Namespace) -> int:
    check_split(resolve_env_id(args.env_id), args.split)
    env = make_env(args)
    try:
        check_task_id(env, args.split, args.task_id)
        policy = load_watched(args.policy) if args.policy else None
        try:
            return play(env, policy, args)
        finally:
            if policy is not None:
                policy.close()
    finally:
        env.close()
        sys.stdout.flush()


def play(env: gym.Env, policy: Policy | None, args: argparse.Namespace) -> int:
    """One episode: a person's or ``policy``'s actions, printed step by step unless quiet."""
    from aem_envs.wrappers import LLMActionWrapper

    show = (lambda *_: None) if args.quiet else print
    stepper = env if policy is None else LLMActionWrapper(env)
    options = {k: v for k, v in (("split", args.split), ("task_id", args.task_id)) if v}
    obs, info = stepper.reset(seed=args.seed, options=options)
    limit = int(getattr(env.unwrapped, "max_steps", 0)) or None
    history: list[tuple[str, str]] = []
    total, reward, done, stopped = 0.0, None, False, False
    show(
        f"{env_name(env)} · task {info['task_id']} ({info['task_type']}) · "
        f"split {args.split or getattr(env.unwrapped, 'splits', ['?'])[0]} · seed {args.seed}"
        + (f" · policy {args.policy}" if args.policy else "")
    )
    while not done:
        show("\n" + status_line(limit, reward, total, info))
        show(obs)
        admissible = info.get("admissible_actions")
        if policy is None:
            if admissible:
                show(numbered(admissible))
            action = ask(admissible)
            if action is None:
                stopped = True
                break
            show(f"action: {action}")
        else:
            action = watched_reply(policy, env, info, obs, history)
            show(f"reply:  {action!r}")
        previous = obs
        obs, reward, terminated, truncated, info = stepper.step(action)
        if policy is not None:
            parsed = info.get("parsed_action")
            show(f"action: {parsed if parsed is not None else '(none: the reply holds no action)'}")
            history.append((previous, parsed if parsed is not None else action))
        total += float(reward)
        done = bool(terminated or truncated)
    if done:
        show("\n" + status_line(limit, reward, total, info))
        show(obs)
    print(result_line(info, total, limit, stopped=stopped))
    return 0


def status_line(limit: int | None, reward: Any, total: float, info: dict[str, Any]) -> str:
    """``── step 3/15 · reward -0.10 (invalid action) · return -0.20 · score 0.000 ──``."""
    step = info["step"]
    parts = [f"step {step}/{limit}" if limit else f"step {step}"]
    if reward is not None:
        invalid = "" if info.get("action_valid", True) else " (invalid action)"
        parts.append(f"reward {float(reward):+.2f}{invalid}")
    parts += [f"return {total:+.2f}", f"score {float(info['score']):.3f}"]
    return "── " + " · ".join(parts) + " ──"


def result_line(info: dict[str, Any], total: float, limit: int | None, *, stopped: bool) -> str:
    steps = f"{info['step']}/{limit}" if limit else str(info["step"])
    end = "stopped" if stopped else ("won" if info["won"] else "lost")
    return (
        f"{end}: won={info['won']} score={float(info['score']):.3f} return={total:.2f} "
        f"steps={steps} task={info['task_id']} ({info['task_type']})"
    )


def numbered(actions: Sequence[str]) -> str:
    """The actions as ``  1 go to bed 1   2 look ...`` in as many columns as the terminal fits."""
    cells = [f"{i:>3} {a}" for i, a in enumerate(actions, 1)]
    width = max(len(c) for c in cells) + 2
    columns = max(1, shutil.get_terminal_size((100, 24)).columns // width)
    rows = -(-len(cells) // columns)
    lines = ["".join(c.ljust(width) for c in cells[r::rows]).rstrip() for r in range(rows)]
    return "\n".join(lines)


def ask(admissible: Sequence[str] | None) -> str | None:
    """A person's next action: a number picks an admissible one; ``quit`` or end of input
    stops (None)."""
    while True:
        try:
            text = input("> ").strip()
        except EOFError:
            print("\n(end of input)")
            return None
        if text.lower() in QUIT:
            return None
        if text.isdigit() and admissible:
            if 1 <= int(text) <= len(admissible):
                return admissible[int(text) - 1]
            print(f"no action {text}: pick 1-{len(admissible)} or type an action")
            continue
        if text:
            return text


def watched_reply(
    policy: Policy, env: gym.Env, info: dict[str, Any], obs: str, history: list[tuple[str, str]]
) -> str:
    """The policy's raw reply to this step, given what a benchmark episode would give it."""
    from aem_agent.policies import PolicyInput

    inp = PolicyInput(
        env_id=env_name(env),
        instruction=str(info.get("instruction", "")),
        observation=obs,
        history=list(history),
        admissible_actions=info.get("admissible_actions"),
        env=env,
    )
    return policy.act([inp])[0].reply
