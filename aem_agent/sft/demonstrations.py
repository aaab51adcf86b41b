"""Expert demonstrations for ``aem sft``: the teacher's replies, off-path exploration, and the
balance of action kinds in the samples.

Why apart from :mod:`aem_agent.sft.finetune`: these decide *what* the student sees; the run itself
(settings, checks, TRL's trainer, outputs) is the other module's.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from aem_envs.reply import REPLY_FORMAT


def expert_reply(action: str, think: str | None = None) -> str:
    """The reply the expert would write: the action alone, or with a fixed think first.

    Why no think by default: the expert has no reasoning to show, and a made-up fixed one
    would only teach the model to copy it.
    """
    return REPLY_FORMAT.format(action, think)


def expert_teacher(think: str | None = None) -> Any:
    """A :data:`aem_agent.rollout.recording.Teacher` replying with the env's
    ``expert_action()``."""

    def teach(env: Any) -> str:
        return expert_reply(env.get_wrapper_attr("expert_action")(), think)

    return teach


def explorer(share: float, seed: int, think: str | None = None) -> Any:
    """A :data:`aem_agent.rollout.recording.Behaviour` that plays a random other admissible
    action on a ``share`` of turns (DART-style noise), the expert's label on the rest.

    Why: the expert plans from the true state, so its own episodes never show a wrong
    receptacle, a wrong object or a repeated move; a student trained on them alone takes
    whatever it finds and loops (``benchmarks/learning/results/warm-start/README.md``).
    Off-path states labelled with the expert's recovery are what it needs to see.
    """
    rng = random.Random(seed)

    def behave(env: Any, label: str) -> str:
        actions = env.get_wrapper_attr("admissible_actions") or []
        others = [a for a in actions if REPLY_FORMAT.format(a) not in label]
        if others and rng.random() < share:
            return expert_reply(rng.choice(others), think)
        return label

    return behave


def oversample_rare(samples: list[Any], verbs: Sequence[str], most: int) -> list[Any]:
    """``samples`` with each one whose verb is rarer than the commonest repeated
    min(``most``, round(commonest count / its count)) times.

    Why: in expert episodes the decisive actions are rare (an ALFWorld episode is mostly
    ``go to``, with one ``take`` when the target is in sight); a student trained on them as
    they come went on searching past the object it was sent for.
    """
    counts = Counter(verbs)
    top = max(counts.values(), default=1)
    out = []
    for sample, kind in zip(samples, verbs, strict=True):
        out += [sample] * min(most, max(1, round(top / counts[kind])))
    return out


def verb(reply: str) -> str:
    """The first word of a reply's action (``take`` for an action ``take x``), read from a
    decoded reply that may lack the opening tag (a reply prefix holds it)."""
    action = REPLY_FORMAT.action_text(reply)
    return action.split(maxsplit=1)[0] if action else ""
