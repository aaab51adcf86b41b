"""Prompts: what the model is shown at each step, with what each env says of itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import aem_agent.prompts
from aem_agent.policies.base import PolicyInput
from aem_agent.prompts import HISTORY_OBSERVATION_CHARS, build_messages
from aem_envs.core.brief import GENERIC_BRIEF, AgentBrief
from aem_envs.core.errors import AEMError
from aem_envs.registration import ENTRIES, agent_brief
from aem_envs.reply import ReplyFormat

#: Prompts as rendered before the envs described themselves (commit 5408ac4, when the
#: templates were keyed by env family inside this package): every registered aem id, the
#: remote client, the test and learning-harness envs and an unknown id, in both styles, on
#: inputs from real ALFWorld and WebShop episodes and on made-up ones. After a prompt change
#: that is meant, ``python -m tests.agent.test_prompts`` renders the stored inputs anew.
FROZEN = Path(__file__).parent / "data" / "prompts.json"


def _input(env_id: str = "aem/ALFWorld-v0", steps: int = 0, **kwargs) -> PolicyInput:
    history = [(f"observation number {i}", f"action number {i}") for i in range(1, steps + 1)]
    return PolicyInput(
        env_id=env_id,
        instruction="put a clean mug in the coffeemachine",
        observation="You are in the middle of a room.",
        history=history,
        **kwargs,
    )


def _user(inp: PolicyInput, **kwargs) -> str:
    messages = build_messages(inp, **kwargs)
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_prompt_holds_task_observation_and_reply_format() -> None:
    text = _user(_input())
    example = text.split("Example reply: ", 1)[1]
    assert ReplyFormat(require_think=True).parse(example).action == "go to cabinet 1"
    assert "Your task is to: put a clean mug in the coffeemachine" in text
    assert "You are in the middle of a room." in text
    assert "<think>" in text and "</think>" in text
    assert "<action>" in text and "</action>" in text
    assert "step 1" in text
    assert "Before this step" not in text


def test_history_window_shows_only_the_most_recent_steps() -> None:
    text = _user(_input(steps=8), history_window=3)
    for i in (6, 7, 8):
        assert f"observation number {i}" in text and f"action number {i}" in text
        assert f"[Step {i}]" in text
    for i in range(1, 6):
        assert f"observation number {i}\n" not in text and f"action number {i}\n" not in text
    assert "took 8 step(s)" in text and "most recent 3" in text
    assert "step 9" in text
    assert text.index("observation number 6") < text.index("observation number 8")


def test_history_window_zero_and_short_histories() -> None:
    assert "observation number" not in _user(_input(steps=4), history_window=0)
    text = _user(_input(steps=2), history_window=5)
    assert "most recent 2" in text and "[Step 1]" in text and "[Step 2]" in text


def test_negative_history_window_is_a_clear_error() -> None:
    with pytest.raises(AEMError, match="history_window"):
        build_messages(_input(), history_window=-1)


def test_long_history_observations_are_clipped_but_not_the_current_one() -> None:
    long_page = "A" * 300 + "MIDDLE" + "Z" * 5000
    inp = PolicyInput(
        "aem/WebShop-v0", "buy socks", observation=long_page, history=[(long_page, "click[x]")]
    )
    text = _user(inp)
    assert long_page in text
    assert text.count("MIDDLE") == 1
    assert "[...]" in text
    clipped = text.split("Observation: ", 1)[1].split("\nAction:", 1)[0]
    assert len(clipped) <= HISTORY_OBSERVATION_CHARS


def test_admissible_actions_listed_when_the_env_has_them() -> None:
    actions = ["go to cabinet 1", "take mug 1 from countertop 1", "look"]
    text = _user(_input(admissible_actions=actions))
    assert "Admissible actions" in text
    for action in actions:
        assert f"- {action}\n" in text
    assert "Admissible actions" not in _user(_input("aem/SWE-v0", admissible_actions=None))


@pytest.mark.parametrize("item", ENTRIES, ids=[e.id for e in ENTRIES])
def test_every_aem_id_describes_itself_to_the_agent(item: Any) -> None:
    brief = agent_brief(item.id)
    assert isinstance(brief, AgentBrief) and brief is not GENERIC_BRIEF
    assert agent_brief(f"aem_envs:{item.id}") is brief
    messages = build_messages(_input(item.id))
    assert messages[0]["content"] == brief.role
    assert brief.action_hint in messages[1]["content"]
    example = messages[1]["content"].split("Example reply: ", 1)[1]
    assert ReplyFormat(require_think=True).parse(example).action == brief.example_action


def test_ids_without_a_brief_get_the_generic_one_and_variants_share_their_base() -> None:
    assert agent_brief("aemtest/Corridor-v0") is GENERIC_BRIEF
    assert agent_brief("user/ALFWorldLike-v0") is GENERIC_BRIEF
    assert agent_brief("aem/WebShopBrowser-v0") is agent_brief("aem/WebShop-v0")
    roles = {agent_brief(e.id).role for e in ENTRIES}
    assert len(roles) == len({e.brief for e in ENTRIES}) == len(ENTRIES) - 1
    assert "search[" in _user(_input("aem/WebShop-v0"))


def test_the_prompts_module_names_no_env() -> None:
    """What differs per env comes from its brief: adding an env never edits the agent."""
    source = Path(aem_agent.prompts.__file__).read_text(encoding="utf-8")
    names = {re.sub(r"-v\d+$", "", e.id.split("/")[-1]) for e in ENTRIES}
    assert names >= {"ALFWorld", "WebShop", "SWE"}
    assert not [name for name in names if re.search(rf"\b{name}", source, re.I)]


def _frozen_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(FROZEN.read_text(encoding="utf-8"))
    return cases


@pytest.mark.parametrize(
    "case", _frozen_cases(), ids=lambda c: f"{c['input']['env_id']}-{len(c['input']['history'])}"
)
def test_prompts_render_as_before_the_envs_described_themselves(case: dict[str, Any]) -> None:
    assert _rendered(case) == case["messages"]


def _rendered(case: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """``case``'s input in every style and window the fixture keys (``style/window``)."""
    given = case["input"]
    inp = PolicyInput(
        given["env_id"],
        given["instruction"],
        given["observation"],
        [tuple(pair) for pair in given["history"]],
        given["admissible_actions"],
    )
    rendered = {}
    for key in case["messages"]:
        style, window = key.split("/")
        rendered[key] = build_messages(inp, history_window=int(window), style=style)
    return rendered


def test_system_prompt_override() -> None:
    messages = build_messages(_input(), system_prompt="Be brief.")
    assert messages[0] == {"role": "system", "content": "Be brief."}


def test_prompts_import_on_their_own() -> None:
    """The policies import the prompts; importing the prompts first must work too."""
    code = "import aem_agent.prompts, aem_agent.policies; print('ok')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


@pytest.mark.parametrize("env_id", ["aem/ALFWorld-v0", "aem/WebShop-v0", "aem/SWE-v0"])
def test_compact_prompt_is_shorter_and_keeps_task_observation_and_actions(env_id: str) -> None:
    inp = _input(env_id, steps=3, admissible_actions=["open drawer 1", "go to shelf 1"])
    full = _user(inp, history_window=2)
    compact = _user(inp, history_window=2, style="compact")
    assert len(compact) < len(full) / 2
    assert f"Task: {inp.instruction}" in compact
    assert "open drawer 1" in compact
    assert "Did: action number 3" in compact and "Did: action number 1" not in compact
    system = build_messages(inp, style="compact")[0]["content"]
    assert "<action>" in system


def test_compact_alfworld_prompt_states_the_memory_instead_of_places() -> None:
    inp = PolicyInput(
        env_id="aem/ALFWorld-v0",
        instruction="put a mug in shelf",
        observation="You arrive at drawer 1. The drawer 1 is open. In it, you see a pen 1.",
        history=[
            (
                "You are in the middle of a room. Looking quickly around you, you see a "
                "drawer 1, and a shelf 1.",
                "go to drawer 1",
            )
        ],
        admissible_actions=["go to shelf 1", "take pen 1 from drawer 1", "look"],
    )
    user = _user(inp, history_window=1, style="compact")
    assert "Searched: drawer 1 (pen 1)." in user
    assert "Not searched yet (likely first): shelf 1." in user
    assert "Actions: take pen 1 from drawer 1" in user and "go to shelf 1 |" not in user


def test_unknown_prompt_style_is_one_clear_error() -> None:
    with pytest.raises(AEMError, match="prompt style 'tiny' is unknown"):
        build_messages(_input(), style="tiny")  # type: ignore[arg-type]


if __name__ == "__main__":
    from aem_envs.core.io import atomic_write_text

    cases = [{**case, "messages": _rendered(case)} for case in _frozen_cases()]
    atomic_write_text(FROZEN, json.dumps(cases, indent=1, ensure_ascii=False))
