"""TRL's private surface stays in ``aem_agent/grpo/trl_private.py``; its Triton switch is scoped.

A private TRL name is one that starts with a single underscore: an import of one from a
``trl`` module, an attribute of a ``trl`` module, a method of a TRL trainer defined again in
a subclass (an override), or a private instance attribute TRL's trainers set (``_step``,
``_metrics``, ``_prepare_inputs`` ...) read or written on an object.
"""

from __future__ import annotations

import ast
import inspect
import re
import threading
from pathlib import Path

import pytest
import torch
from trl import GRPOTrainer, SFTTrainer
from trl.trainer import utils as trl_utils

from aem_agent.grpo.trl_private import TiedHeadResume, reply_positions_only

ROOT = Path(__file__).parents[3]
PACKAGES = ("aem_agent", "aem_cli", "aem_envs", "benchmarks", "sandboxes")
HOME = "aem_agent/grpo/trl_private.py"


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def trl_private_attributes() -> set[str]:
    """Private methods and instance attributes of TRL's trainers."""
    names = {n for cls in (GRPOTrainer, SFTTrainer) for n in dir(cls) if private(n)}
    names -= {n for n in dir(object) if private(n)}
    for cls in (GRPOTrainer, SFTTrainer):
        names |= set(re.findall(r"self\.(_[a-z]\w*)\s*=", inspect.getsource(cls)))
    return names


def uses(path: Path, names: set[str]) -> list[tuple[str, str, int]]:
    """``(function, name, line)`` of every private TRL name the module uses.

    Only modules that import ``trl`` or ``aem_agent`` can reach a trainer (bundled task
    repositories under ``aem_envs`` are data, not code of the package).
    """
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    if not imported & {"trl", "aem_agent"}:
        return []
    trl_modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "trl":
            for alias in node.names:
                if private(alias.name):
                    found.append((node, alias.name))
                trl_modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            trl_modules |= {a.asname or a.name for a in node.names if a.name.startswith("trl")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = node.value
            if (isinstance(base, ast.Name) and base.id in trl_modules) or node.attr in names:
                found.append((node, node.attr))
        elif isinstance(node, ast.ClassDef):  # a method of TRL's defined again: an override
            for method in node.body:
                if isinstance(method, ast.FunctionDef) and method.name in names:
                    found.append((method, method.name))
    owners = {}
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(function):
                owners.setdefault(id(inner), function.name)  # outermost function wins
    return [(owners.get(id(n), "<module>"), name, n.lineno) for n, name in found]


def test_exactly_one_module_touches_private_trl_names() -> None:
    names = trl_private_attributes()
    assert {"_generate_and_score_completions", "_step", "_metrics", "_use_triton"} - names == {
        "_use_triton"
    }  # the trainer-side names are found (the module attribute is matched by module)
    offenders, home = [], []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for function, name, line in uses(path, names):
                if rel == HOME:
                    home.append(name)
                else:
                    offenders.append(f"{rel}:{line} {function}: {name}")
    assert not offenders, "private TRL names outside " + HOME + ":\n" + "\n".join(offenders)
    assert {"_generate_and_score_completions", "_use_triton", "_metrics"} <= set(home)


def test_the_triton_switch_is_trls_outside_the_scope_and_only_inside_it() -> None:
    trls = trl_utils._use_triton
    cpu = torch.device("cpu")
    seen: dict[str, bool] = {}
    with reply_positions_only(cpu):
        seen["inside"] = trl_utils._use_triton(cpu)
        other = threading.Thread(target=lambda: seen.update(other=trl_utils._use_triton(cpu)))
        other.start()
        other.join()
    assert seen == {"inside": True, "other": trls(cpu)}  # another thread asks TRL's predicate
    assert trl_utils._use_triton is trls


def test_a_training_step_leaves_trls_predicate(
    tiny_model_dir, tmp_path, doors_env_id, monkeypatch
) -> None:
    """Every fused-head projection of a training step (old policy, entropies, loss) runs
    inside the switch; generation and everything after the step see TRL's predicate."""
    from tests.agent.grpo.test_trainer import make_config, make_trainer

    trls = trl_utils._use_triton
    trainer = make_trainer(
        tiny_model_dir, make_config(tmp_path, doors_env_id, rollout_layout="step", max_steps=1)
    )
    during: list[bool] = []
    apply = trl_utils._ChunkedLogProbFunction.apply

    def spying(*args):
        during.append(trl_utils._use_triton is not trls)
        return apply(*args)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", spying)
    trainer.train()
    assert during and all(during)
    assert trl_utils._use_triton is trls


def test_entropies_come_from_trls_old_policy_forward(tiny_model_dir, tmp_path) -> None:
    """Plain prompts (no sampler entropies) with two iterations per generation: TRL runs its
    old-policy forward anyway, and AEM takes the entropies from it (source 2), no extra one."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from aem_agent.grpo.step_layout import SOURCE_OLD_POLICY
    from aem_agent.grpo.trainer import AEMGRPOTrainer
    from tests.agent.grpo.test_trainer import make_config, reply_reward

    config = make_config(tmp_path, "unused/Env-v0", max_completion_length=8, num_iterations=2)
    trainer = AEMGRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=[reply_reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": ["look", "open"]}),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    assert trainer.old_policy_forward_runs()
    torch.manual_seed(0)
    trainer.model.train()
    out = trainer._generate_and_score_completions([{"prompt": "look"}] * 4)
    assert "old_per_token_logps" in out
    metrics = trainer._metrics["train"]
    assert metrics["aem/entropy_source"] == [SOURCE_OLD_POLICY]
    assert metrics["aem/entropy_mean"][0] > 0


@pytest.mark.parametrize("layout", ["step", "trajectory"])
def test_with_trls_advantage_hook_the_same_batch_is_trained(
    tiny_model_dir, tmp_path, doors_env_id, layout
) -> None:
    """The hook path (a stand-in TRL that calls PR #7298's hook) and the override path (TRL
    1.16) train one and the same batch; only the first took TRL's advantage from the hook."""
    from aem_agent.grpo.trainer import AEMGRPOTrainer
    from tests.agent.grpo.test_trainer import assert_same, batch_out, make_config, make_trainer
    from tests.agent.grpo.test_trl_contract import FutureGRPOTrainer

    class HookedTrainer(AEMGRPOTrainer, FutureGRPOTrainer):
        pass

    config = make_config(tmp_path, doors_env_id, rollout_layout=layout, credit="gigpo+aem")
    hooked = make_trainer(tiny_model_dir, config, trainer=HookedTrainer)
    overriding = make_trainer(tiny_model_dir, config)
    (via_hook, _), (via_override, _) = batch_out(hooked), batch_out(overriding)
    assert hooked._hooked is not None and overriding._hooked is None
    assert len(hooked._hooked) == config.per_device_train_batch_size  # gathered, one process
    assert_same(via_hook, via_override)


class Clock:
    """A ``time`` stand-in whose every reading is 500 s after the last."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 500.0
        return self.now


def test_a_chunked_step_counts_its_rollout_in_step_time(
    monkeypatch, tiny_model_dir, tmp_path, doors_env_id
) -> None:
    """TRL times ``training_step``, rollout included; the chunked step prepares its batch
    before TRL's timer runs, so it adds that time itself (here 500 s of a stand-in clock)."""
    from aem_agent.grpo import trainer as trainer_module
    from tests.agent.grpo.test_trainer import make_config, make_trainer

    config = make_config(tmp_path, doors_env_id, rollout_layout="step", max_steps=1)
    trainer = make_trainer(tiny_model_dir, config)
    assert trainer._chunking_exact()  # the path under test
    monkeypatch.setattr(trainer_module, "time", Clock())
    trainer.train()
    [logged] = [row["step_time"] for row in trainer.state.log_history if "step_time" in row]
    assert 500.0 <= logged < 600.0


@pytest.fixture
def tied_trainer(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True)
    return TiedHeadResume(model=model, args=args)


@pytest.fixture
def trainer_warnings():
    """The warnings ``transformers.trainer`` logs while the test runs (its own handler: the
    library's loggers do not propagate to pytest's)."""
    import logging

    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler, logger = Collect(logging.WARNING), logging.getLogger("transformers.trainer")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def test_resume_loads_the_tied_head_from_the_embedding_without_a_missing_key(
    tied_trainer, trainer_warnings, tmp_path
) -> None:
    model = tied_trainer.model
    checkpoint = tmp_path / "checkpoint-1"
    with torch.no_grad():
        model.get_input_embeddings().weight.add_(1.0)  # the trained weights
    model.save_pretrained(checkpoint)  # one copy of the tie: no lm_head.weight
    trained = model.get_input_embeddings().weight.clone()
    with torch.no_grad():
        model.get_input_embeddings().weight.zero_()
    tied_trainer._load_from_checkpoint(str(checkpoint))
    assert not [w for w in trainer_warnings if "missing keys" in w]
    assert torch.equal(model.get_output_embeddings().weight, trained)


def test_resume_refuses_a_head_the_model_ties_only_by_its_config(tied_trainer, tmp_path) -> None:
    model = tied_trainer.model
    model.save_pretrained(tmp_path / "checkpoint-1")
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    with pytest.raises(ValueError, match=r"lm_head\.weight.*without sharing the tensor"):
        tied_trainer._load_from_checkpoint(str(tmp_path / "checkpoint-1"))
