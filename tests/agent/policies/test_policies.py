"""Policies behind the batch interface: scripted agents, a local model, a chat endpoint."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from aem_agent.policies import (
    EndpointError,
    HFPolicy,
    OpenAIPolicy,
    PolicyInput,
    ScriptedPolicy,
    load_policy,
)
from aem_agent.prompts import build_messages
from aem_envs.core.errors import AEMError, DataError
from aem_envs.policies import ExpertPolicy, RandomPolicy
from aem_envs.wrappers import LLMActionWrapper, ReplyFormat
from tests.fixtures.corridor import FIXTURE_ID, CorridorEnv


def _inputs_of(env: LLMActionWrapper, obs: str, info: dict, history: list) -> PolicyInput:
    return PolicyInput(
        env_id=FIXTURE_ID,
        instruction=info["instruction"],
        observation=obs,
        history=list(history),
        admissible_actions=info["admissible_actions"],
        env=env,
    )


def _play(policy_spec: str, env_seed: int, **kwargs: Any) -> tuple[list[str], dict]:
    """One corridor episode driven through the reply parser; the parsed actions and last info."""
    env = LLMActionWrapper(CorridorEnv(n_rooms=4))
    policy = load_policy(policy_spec, **kwargs)
    obs, info = env.reset(seed=env_seed)
    history: list[tuple[str, str]] = []
    actions = []
    for _ in range(env.unwrapped.max_steps):
        (out,) = policy.act([_inputs_of(env, obs, info, history)])
        next_obs, _, terminated, truncated, info = env.step(out.reply)
        assert info["action_valid"], out.reply
        actions.append(info["parsed_action"])
        history.append((obs, info["parsed_action"]))
        obs = next_obs
        if terminated or truncated:
            break
    return actions, info


# ---------------------------------------------------------------- scripted policies
def test_expert_wins_through_the_reply_parser() -> None:
    actions, info = _play("expert", 3)
    assert info["won"]
    assert actions[-1].startswith("drop ")


def test_random_policy_picks_admissible_actions_reproducibly() -> None:
    first, _ = _play("random", 1, seed=7)
    again, _ = _play("random", 1, seed=7)
    assert first == again
    assert len(set(first)) > 1


def test_scripted_replies_use_the_model_reply_format() -> None:
    env = CorridorEnv()
    obs, info = env.reset(seed=0)
    inp = PolicyInput(FIXTURE_ID, info["instruction"], obs, env=env)
    for policy in (ScriptedPolicy(ExpertPolicy()), ScriptedPolicy(RandomPolicy(seed=0))):
        (out,) = policy.act([inp])
        parsed = ReplyFormat(require_think=True).parse(out.reply)
        assert parsed.action in env.admissible_actions
        assert parsed.think


def test_scripted_policies_need_the_env() -> None:
    inp = PolicyInput(FIXTURE_ID, "task", "obs")
    for policy in (ScriptedPolicy(ExpertPolicy()), ScriptedPolicy(RandomPolicy())):
        with pytest.raises(AEMError, match=r"PolicyInput\.env"):
            policy.act([inp])


def test_loading_a_scripted_policy_does_not_import_torch() -> None:
    code = (
        "import sys; from aem_agent.policies import load_policy; load_policy('expert'); "
        "load_policy('random'); print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------- load_policy specs
def test_unknown_spec_lists_the_forms() -> None:
    for spec in ("gpt", "hf:", "openai:model-without-url", "openai:m@localhost:8000"):
        with pytest.raises(AEMError, match=r"expert, random, smollm2, aem-ref, hf:.*openai:"):
            load_policy(spec)


def test_hf_spec_rejects_a_directory_that_is_no_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no config\.json"):
        load_policy(f"hf:{tmp_path}")


def test_openai_spec_splits_model_and_url() -> None:
    spec = "openai:org/model@v1@http://user@127.0.0.1:9/v1/"
    with load_policy(spec) as policy:
        assert isinstance(policy, OpenAIPolicy)
        assert policy.model == "org/model@v1"
        assert policy.url == "http://user@127.0.0.1:9/v1/chat/completions"


# ---------------------------------------------------------------- local transformers model
@pytest.fixture(scope="module")
def tiny_policy(tiny_model_dir: Path) -> Iterator[HFPolicy]:
    """The tiny model with its weights redrawn wider, so greedy replies depend on the prompt.

    At its default initialisation the random model answers every prompt with one repeated
    token, which would let a padding bug pass the batched-equals-unbatched test.
    """
    import torch

    policy = load_policy(f"hf:{tiny_model_dir}", max_new_tokens=6, temperature=0.0)
    assert isinstance(policy, HFPolicy)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for weight in policy.model.parameters():
            if weight.dim() > 1:
                weight.normal_(0.0, 0.3, generator=generator)
    yield policy
    policy.close()


def _turns(n: int) -> list[PolicyInput]:
    """Inputs of different lengths, so that a batch needs left padding."""
    return [
        PolicyInput(
            "aem/ALFWorld-v0",
            "take the key",
            "You are in a kitchen." + " There is a table." * i,
            history=[("Observation: look", "look")] * (i % 3),
            admissible_actions=["look", "take key from table"][: 1 + i % 2],
        )
        for i in range(n)
    ]


def test_hf_policy_generates_and_counts_its_tokens(tiny_policy: HFPolicy) -> None:
    tokenizer = tiny_policy.tokenizer
    outputs = tiny_policy.act(_turns(3))
    assert len(outputs) == 3
    for inp, out in zip(_turns(3), outputs, strict=True):
        prompt, completion = out.extra["prompt_ids"], out.extra["completion_ids"]
        text = tokenizer.apply_chat_template(
            build_messages(inp), add_generation_prompt=True, tokenize=False
        )
        assert prompt == tokenizer(text, add_special_tokens=False)["input_ids"]
        assert out.prompt_tokens == len(prompt) > 20
        assert 1 <= out.completion_tokens == len(completion) <= 6
        assert out.reply == tokenizer.decode(completion, skip_special_tokens=True)
        assert out.extra["finished"] == (completion[-1] == tokenizer.eos_token_id)
        assert tokenizer.pad_token_id not in completion


def test_hf_batched_greedy_equals_unbatched(tiny_policy: HFPolicy) -> None:
    inputs = _turns(4)
    batched = [out.extra["completion_ids"] for out in tiny_policy.act(inputs)]
    single = [tiny_policy.act([inp])[0].extra["completion_ids"] for inp in inputs]
    assert batched == single
    assert len({tuple(ids) for ids in batched}) > 1


def test_hf_reply_prefix_is_prompt_not_completion(tiny_policy: HFPolicy) -> None:
    prefixed = HFPolicy.from_model(
        tiny_policy.model,
        tiny_policy.tokenizer,
        max_new_tokens=4,
        temperature=0,
        reply_prefix="<think>",
    )
    (inp,) = _turns(1)
    (out,) = prefixed.act([inp])
    tokenizer = tiny_policy.tokenizer
    plain = tokenizer.decode(tiny_policy.prompt_ids(inp))
    assert tokenizer.decode(out.extra["prompt_ids"]) == plain + "<think>"
    assert plain.endswith("<|im_start|>assistant\n")
    assert out.reply == "<think>" + tokenizer.decode(
        out.extra["completion_ids"], skip_special_tokens=True
    )


def test_hf_policy_acts_in_eval_mode_and_restores_the_mode(tiny_policy: HFPolicy) -> None:
    seen: list[bool] = []
    hook = tiny_policy.model.register_forward_pre_hook(lambda m, a: seen.append(m.training))
    tiny_policy.model.train()
    try:
        tiny_policy.act(_turns(1))
    finally:
        hook.remove()
    assert tiny_policy.model.training
    tiny_policy.model.eval()
    assert seen and not any(seen)


def test_hf_completion_ends_at_any_end_token(tiny_policy: HFPolicy) -> None:
    """Chat models often have two end tokens (Qwen2.5: <|im_end|>, <|endoftext|>)."""
    (free,) = tiny_policy.act(_turns(1))
    stop = free.extra["completion_ids"][2]
    eos = tiny_policy.tokenizer.eos_token_id
    tiny_policy.model.generation_config.eos_token_id = [eos, stop]
    try:
        policy = HFPolicy.from_model(
            tiny_policy.model, tiny_policy.tokenizer, max_new_tokens=6, temperature=0.0
        )
        (out,) = policy.act(_turns(1))
    finally:
        tiny_policy.model.generation_config.eos_token_id = eos
    ids = out.extra["completion_ids"]
    assert ids[-1] == stop and stop not in ids[:-1] and len(ids) <= 3
    assert out.extra["finished"] and out.completion_tokens == len(ids)


def test_hf_sampling_repeats_under_a_seed(tiny_policy: HFPolicy) -> None:
    import torch

    def replies(seed: int) -> list[list[int]]:
        policy = HFPolicy.from_model(
            tiny_policy.model, tiny_policy.tokenizer, max_new_tokens=8, temperature=1.0, seed=seed
        )
        calls = [policy.act(_turns(2)) for _ in range(2)]
        return [out.extra["completion_ids"] for call in calls for out in call]

    state = torch.random.get_rng_state()
    first = replies(seed=5)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's RNG is untouched
    assert first == replies(seed=5)
    assert first != replies(seed=6)
    assert first[:2] != first[2:]  # successive calls draw fresh samples


def test_hf_policy_in_chunks_matches_one_batch(tiny_policy: HFPolicy) -> None:
    model, tokenizer = tiny_policy.model, tiny_policy.tokenizer
    chunked = HFPolicy.from_model(model, tokenizer, max_new_tokens=4, temperature=0, batch_size=2)
    whole = HFPolicy.from_model(model, tokenizer, max_new_tokens=4, temperature=0)
    inputs = _turns(3)
    assert [o.extra["completion_ids"] for o in chunked.act(inputs)] == [
        o.extra["completion_ids"] for o in whole.act(inputs)
    ]


def test_hf_policy_loads_a_checkpoint_directory(tiny_model_dir: Path) -> None:
    with HFPolicy(tiny_model_dir, max_new_tokens=3, temperature=0.0, num_threads=1) as policy:
        (out,) = policy.act(_turns(1))
    assert policy.source == str(tiny_model_dir)
    assert 1 <= out.completion_tokens <= 3


def test_hf_policy_needs_a_chat_template(tiny_model_dir: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(tiny_model_dir, plain)
    (plain / "chat_template.jinja").unlink()
    config = json.loads((plain / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (plain / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(DataError, match="no chat template"):
        HFPolicy(plain)


# ---------------------------------------------------------------- OpenAI-compatible endpoint
class _Server:
    """A chat-completions server on 127.0.0.1 that answers from a script of (status, body)."""

    def __init__(self, script: list[tuple[int, dict]] | None = None) -> None:
        self.script = list(script or [])
        self.requests: list[tuple[dict, dict]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append((dict(self.headers), body))
                    status, answer = server.script.pop(0) if server.script else server.echo(body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def echo(body: dict) -> tuple[int, dict]:
        """Reply with the last line of the user turn, so each answer names its request."""
        user = body["messages"][-1]["content"]
        return 200, {
            "choices": [
                {
                    "message": {"role": "assistant", "content": f"<action>{user[:40]}</action>"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 3},
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    yield srv
    srv.close()


def test_openai_policy_answers_a_batch_in_order(server: _Server) -> None:
    inputs = [PolicyInput("aem/WebShop-v0", f"buy item {i}", f"page {i}") for i in range(6)]
    with OpenAIPolicy(server.base_url, "tiny", api_key="k", concurrency=3, seed=1) as policy:
        outputs = policy.act(inputs)
    for i, out in enumerate(outputs):
        assert out.reply.startswith(f"<action>Your task is to: buy item {i}\n")
    headers, body = server.requests[0]
    assert headers["Authorization"] == "Bearer k"
    assert body["model"] == "tiny" and body["seed"] == 1 and body["max_tokens"] == 512
    assert len(server.requests) == 6
    sent = sorted((b["messages"] for _, b in server.requests), key=lambda m: m[1]["content"])
    assert sent == [build_messages(inp) for inp in inputs]
    assert outputs[0].completion_tokens == 3 and outputs[0].prompt_tokens > 0
    assert outputs[0].extra["finish_reason"] == "stop"


def test_openai_policy_retries_server_errors(server: _Server) -> None:
    server.script = [(503, {"error": "loading"}), (500, {"error": "oops"})]
    policy = OpenAIPolicy(server.base_url, "tiny", backoff=0.01, retries=2)
    (out,) = policy.act([PolicyInput("aem/SWE-v0", "fix it", "$ ")])
    assert out.reply.startswith("<action>")
    assert len(server.requests) == 3


def test_openai_policy_reports_a_rejected_request(server: _Server) -> None:
    server.script = [(404, {"error": {"message": "model 'nope' does not exist"}})]
    policy = OpenAIPolicy(server.base_url, "nope", backoff=0.01)
    with pytest.raises(EndpointError, match=r"127\.0\.0\.1.*HTTP 404.*does not exist"):
        policy.act([PolicyInput("aem/SWE-v0", "fix it", "$ ")])
    assert len(server.requests) == 1  # a 4xx is not retried


def test_openai_policy_reports_an_unreachable_server() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    policy = OpenAIPolicy(url, "m", retries=1, backoff=0.01, timeout=5)
    with pytest.raises(EndpointError, match=rf"127\.0\.0\.1:{port}/v1.*did not answer"):
        policy.act([PolicyInput("aem/SWE-v0", "fix it", "$ ")])


def test_openai_policy_rejects_a_url_without_scheme() -> None:
    with pytest.raises(AEMError, match="http://"):
        OpenAIPolicy("127.0.0.1:8000/v1", "m")
