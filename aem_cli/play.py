"""``aem play``: a person (or a named policy) plays one episode in the terminal."""

from __future__ import annotations

import argparse
import sys

import gymnasium as gym

from aem_cli.env_kwargs import add_env_kwargs_flag, parse_env_kwargs
from aem_envs.policies import POLICIES, ExpertPolicy, RandomPolicy
from aem_envs.registration import resolve_env_id


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("play", help="play one episode in the terminal")
    parser.add_argument("env_id", help="an id from `aem envs`, e.g. aem/ALFWorld-v0")
    parser.add_argument("--policy", choices=sorted(POLICIES), help="let a policy play")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", help="task split (default: the env's first)")
    parser.add_argument("--task-id", help="play this task")
    parser.add_argument("--max-steps", type=int, help="episode step limit")
    add_env_kwargs_flag(parser)
    parser.add_argument("--quiet", action="store_true", help="print only the final result")
    parser.set_defaults(func=run)


def make_env(args: argparse.Namespace) -> gym.Env:
    """The env the flags name (id, ``--env-kwargs``, ``--max-steps``); ``aem serve`` reuses it."""
    env_id = resolve_env_id(args.env_id)
    kwargs = parse_env_kwargs(args.env_kwargs)
    if args.max_steps is not None:
        kwargs["max_steps"] = args.max_steps
    return gym.make(env_id, **kwargs)


def run(args: argparse.Namespace) -> int:
    env = make_env(args)
    policy: RandomPolicy | ExpertPolicy | None = None
    if args.policy == "random":
        policy = RandomPolicy(seed=args.seed)
    elif args.policy == "expert":
        policy = ExpertPolicy()
    options = {k: v for k, v in (("split", args.split), ("task_id", args.task_id)) if v}
    try:
        obs, info = env.reset(seed=args.seed, options=options)
        total, done = 0.0, False
        while not done:
            if not args.quiet:
                print(f"\n--- step {info['step']} ---\n{obs}")
                if info["admissible_actions"] is not None:
                    print("admissible: " + " | ".join(info["admissible_actions"]))
            if policy is None:
                try:
                    action = input("> ")
                except EOFError:
                    print("\n(end of input)")
                    break
            else:
                action = policy.act(env)
                if not args.quiet:
                    print(f"> {action}")
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            done = terminated or truncated
        if done and not args.quiet:
            print(f"\n{obs}")
        print(
            f"task {info['task_id']} ({info['task_type']}): won={info['won']} "
            f"score={info['score']:.3f} return={total:.2f} steps={info['step']}"
        )
    finally:
        env.close()
    sys.stdout.flush()
    return 0
