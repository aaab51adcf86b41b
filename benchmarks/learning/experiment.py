"""The learning experiment: a grid of {algorithm} × {seed} runs from one start checkpoint.

Why a harness of its own: "does AEM learn better than GRPO?" is only answered by several seeds
of both algorithms from the same start, on the same tasks, with the same compute, scored on
tasks no run trained on. The harness holds everything but the algorithm fixed:

* one start checkpoint (``start/``), built once — a tiny model from a config (or a local
  checkpoint) plus an optional supervised warm-up to "valid but random" actions — and read by
  every run;
* every run goes through :func:`aem_agent.train.build_config` / ``build_trainer`` (the code
  path of ``aem train``) with the same ``train`` settings; a run's seed drives its task draw,
  data order and sampling, so the AEM and GRPO runs of one seed see the same tasks;
* the held-out split is scored every ``eval.every`` steps on a fixed list of distinct tasks,
  greedily (or by sampling with a fixed seed, isolated from the training RNG).

Resumable at every level: a run folder with ``done.json`` (written last, atomically) is
skipped; a killed run resumes from its newest TRL checkpoint, its ``metrics.csv`` cut back to
that step; the start checkpoint is built in a scratch folder and renamed into place. Nothing
half-written is ever read back.

Layout of the output folder::

    start/                  model + tokenizer every run starts from; start.json (marker)
    runs/<algo>-seed<s>/    metrics.csv, checkpoint-*/ (while running), done.json
    results.json            everything the report needs (see :func:`collect_results`)
    report.md, report.html, table.md, plots/*.png
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aem_envs.core.errors import AEMError, DataError
from aem_envs.core.io import atomic_write_json, jsonable

if TYPE_CHECKING:
    from aem_agent.episodes import EpisodeSpec
    from aem_agent.rollout import MultiTurnRollout
    from aem_envs.core.base import TextEnv

START_DIR = "start"
START_MARKER = "start.json"
RUNS_DIR = "runs"
DONE_MARKER = "done.json"
RESULTS_FILE = "results.json"
#: Metric keys of the held-out evaluation rows in a run's metrics.csv.
HELDOUT_KEYS = ("heldout/success_rate", "heldout/score", "heldout/valid_rate", "heldout/turns")
#: Training metrics kept as curves in results.json (TRL's and the AEM trainer's names).
TRAIN_KEYS = (
    "reward",
    "reward_std",
    "episode/success_rate",
    "episode/turns",
    "aem/entropy_mean",
    "aem/alpha_min",
    "aem/alpha_max",
    "aem/alpha_std",
    "aem/gated_share",
    "aem/positive_advantage_share",
    "episode/valid_rate",
    "entropy",
    "loss",
)
#: Settings the harness owns; a config's ``train`` section may not set them.
HARNESS_KEYS = ("algo", "seed", "output_dir", "env_ids", "env_kwargs", "env_split", "model")
#: The reply format's tags, kept whole by the tiny tokenizer.
ACTION_TAGS = ("<action>", "</action>")


class ExperimentError(AEMError, ValueError):
    """A learning-experiment config is malformed or inconsistent."""


@dataclass(frozen=True)
class LearningConfig:
    """One experiment: what is varied (algorithms, seeds) and everything held fixed."""

    name: str
    algorithms: tuple[str, ...]
    seeds: tuple[int, ...]
    env_id: str
    env_kwargs: dict[str, Any]
    train_split: str
    eval_split: str
    eval_every: int
    eval_episodes: int
    eval_temperature: float
    eval_seed: int
    model: dict[str, Any]
    warmup: dict[str, Any]
    train: dict[str, Any]
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def run_names(self) -> list[tuple[str, int, str]]:
        """``(algo, seed, folder name)`` of every run, seeds outermost (pairs finish together)."""
        return [(a, s, f"{a}-seed{s}") for s in self.seeds for a in self.algorithms]

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


def load_config(path: str | os.PathLike[str]) -> LearningConfig:
    """Read and check an experiment YAML (see ``benchmarks/learning/configs/mechanism.yaml``)."""
    import yaml

    file = Path(path)
    if not file.is_file():
        bundled = Path(__file__).with_name("configs") / file.name
        if not bundled.is_file():
            raise DataError(f"learning config {path} does not exist")
        file = bundled
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise DataError(f"learning config {file} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise DataError(f"learning config {file} must be a mapping")
    return parse_config(data, source=str(file))


def parse_config(data: Mapping[str, Any], *, source: str = "") -> LearningConfig:
    """Build a :class:`LearningConfig` from a mapping, naming the first bad key."""
    known = {"name", "algorithms", "seeds", "env", "eval", "model", "warmup", "train"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ExperimentError(f"unknown learning-config key(s) {unknown}; known: {sorted(known)}")
    env = dict(data.get("env") or {})
    evaluation = dict(data.get("eval") or {})
    train = dict(data.get("train") or {})
    owned = sorted(set(train) & set(HARNESS_KEYS))
    if owned:
        raise ExperimentError(
            f"train settings {owned} are set by the harness (algorithms, seeds, env, start "
            "model); move them to the experiment's own keys"
        )
    algorithms = tuple(data.get("algorithms") or ("grpo", "aem"))
    bad = [a for a in algorithms if a not in ("aem", "grpo")]
    if bad:
        raise ExperimentError(f"algorithms {bad}: choose among 'aem' and 'grpo'")
    seeds = tuple(int(s) for s in data.get("seeds") or (0,))
    if len(set(seeds)) != len(seeds):
        raise ExperimentError(f"seeds {list(seeds)} repeat a seed")
    if "id" not in env:
        raise ExperimentError("env.id is missing (e.g. aem-bench/Pick-v0)")
    model = dict(data.get("model") or {"tiny": {}})
    if len(model) != 1 or next(iter(model)) not in ("tiny", "path"):
        raise ExperimentError("model must be {tiny: {...builder settings}} or {path: DIR}")
    config = LearningConfig(
        name=str(data.get("name") or Path(source).stem or "learning"),
        algorithms=algorithms,
        seeds=seeds,
        env_id=str(env["id"]),
        env_kwargs=dict(env.get("kwargs") or {}),
        train_split=str(env.get("train_split", "train")),
        eval_split=str(env.get("eval_split", "test")),
        eval_every=int(evaluation.get("every", 10)),
        eval_episodes=int(evaluation.get("episodes", 100)),
        eval_temperature=float(evaluation.get("temperature", 0.0)),
        eval_seed=int(evaluation.get("seed", 0)),
        model=model,
        warmup=dict(data.get("warmup") or {}),
        train=train,
        source=source,
    )
    if config.train_split == config.eval_split:
        raise ExperimentError(
            f"env.train_split and env.eval_split are both {config.train_split!r}; the held-out "
            "split must be one no run trains on"
        )
    if config.eval_every < 1 or config.eval_episodes < 1:
        raise ExperimentError("eval.every and eval.episodes must be at least 1")
    if config.eval_temperature < 0:
        raise ExperimentError(f"eval.temperature={config.eval_temperature} must be >= 0")
    return config


# ---------------------------------------------------------------------------- environments
#: Harness-only env ids and the function registering each with Gymnasium.
def _harness_envs() -> dict[str, Callable[[], str]]:
    from benchmarks.learning import env as pick

    return {pick.ENV_ID: pick.register}


def ensure_env(env_id: str) -> None:
    """Register a harness env (``aem-bench/...``) when ``env_id`` names one; others pass."""
    register = _harness_envs().get(env_id)
    if register is not None:
        register()


def heldout_specs(config: LearningConfig) -> list[Any]:
    """The fixed held-out episodes: the first seeds from ``eval.seed`` giving distinct tasks.

    Why distinct: the env picks a task from the seed, so consecutive seeds can repeat a task;
    scoring each held-out task once makes the success rate a plain fraction of tasks.
    """
    import gymnasium as gym

    from aem_agent.episodes import EpisodeSpec
    from aem_envs.registration import resolve_env_id

    ensure_env(config.env_id)
    env = gym.make(resolve_env_id(config.env_id), **config.env_kwargs)
    try:
        total = len(cast("TextEnv", env.unwrapped).task_ids(config.eval_split))
        wanted = min(config.eval_episodes, total)
        specs: list[EpisodeSpec] = []
        seen, seed = set(), config.eval_seed
        while len(specs) < wanted and seed < config.eval_seed + 50 * wanted:
            _, info = env.reset(seed=seed, options={"split": config.eval_split})
            if info["task_id"] not in seen:
                seen.add(info["task_id"])
                specs.append(EpisodeSpec(config.env_id, seed, config.eval_split))
            seed += 1
    finally:
        env.close()
    return specs


# ---------------------------------------------------------------------------- trainer settings
def run_settings(
    config: LearningConfig, algo: str, seed: int, output_dir: Path, **overrides: Any
) -> dict[str, Any]:
    """The ``aem train`` settings of one run: the shared ``train`` block plus what varies."""
    settings = {
        "save_strategy": "steps",
        "save_steps": config.eval_every,
        "save_total_limit": 1,
        "report_to": "none",
        # Full fine-tuning unless the config asks for LoRA: the tiny models learn from scratch.
        "use_peft": False,
        **config.train,
        **overrides,
        "algo": algo,
        "seed": seed,
        "output_dir": str(output_dir),
        "env_ids": [config.env_id],
        "env_kwargs": dict(config.env_kwargs),
        "env_split": config.train_split,
    }
    return settings


def _configure_torch(driver: Mapping[str, Any]) -> None:
    import torch

    threads = driver.get("torch_threads")
    if threads:
        torch.set_num_threads(int(threads))


# ---------------------------------------------------------------------------- held-out eval
def evaluate(
    trainer: Any,
    specs: Sequence[Any],
    *,
    temperature: float,
    seed: int,
) -> dict[str, float]:
    """Play the held-out episodes with ``trainer``'s current model; return their rates.

    Greedy when ``temperature`` is 0, else sampling at that temperature from ``seed``. The
    global RNG state is saved and restored, so evaluating never changes what training samples.
    """
    import copy

    import torch

    from aem_agent.generators import model_generator

    model = trainer.model
    generation = copy.deepcopy(trainer.generation_config)
    if temperature == 0:
        generation.do_sample = False
        for name in ("temperature", "top_k", "top_p", "min_p"):
            if hasattr(generation, name):
                setattr(generation, name, None)
    else:
        generation.do_sample = True
        generation.temperature = temperature
    generate = model_generator(
        model,
        trainer.processing_class,
        generation,
        max_new_tokens=trainer.args.max_turn_tokens,
    )
    was_training = model.training
    model.eval()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            episodes = trainer.rollout_func.play(list(specs), generate)
    finally:
        model.train(was_training)
    turns = [t for e in episodes for t in e.turns]
    n = max(len(episodes), 1)
    return {
        "heldout/success_rate": sum(e.won for e in episodes) / n,
        "heldout/score": sum(e.score for e in episodes) / n,
        "heldout/valid_rate": sum(t.action_valid for t in turns) / max(len(turns), 1),
        "heldout/turns": len(turns) / n,
    }


def heldout_callback(
    specs: Sequence[Any], every: int, *, temperature: float, seed: int, writer: Any
) -> Any:
    """A ``TrainerCallback`` scoring the held-out split at step 0, every ``every`` steps and at
    the last step, writing one ``heldout/*`` row per evaluation into ``writer`` (metrics.csv).

    Steps already scored in ``writer``'s rows (a resumed run) are not scored again. Call
    ``.bind(trainer)`` once the trainer exists (a callback is built before its trainer).
    """
    from transformers import TrainerCallback

    class HeldOut(TrainerCallback):
        def __init__(self) -> None:
            self.trainer: Any = None
            self.scored = {
                int(float(r["step"]))
                for r in writer.rows
                if str(r.get(HELDOUT_KEYS[0], "")).strip() != ""
            }

        def bind(self, trainer: Any) -> HeldOut:
            self.trainer = trainer
            return self

        def _score(self, step: int) -> None:
            if step in self.scored or self.trainer is None:
                return
            started = time.perf_counter()
            stats = evaluate(self.trainer, specs, temperature=temperature, seed=seed)
            stats["heldout/seconds"] = time.perf_counter() - started
            writer.add(step, stats)
            self.scored.add(step)

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self._score(state.global_step)

        def on_step_end(self, args, state, control, **kwargs):
            last = state.global_step >= state.max_steps
            if state.is_world_process_zero and (state.global_step % every == 0 or last):
                self._score(state.global_step)

    return HeldOut()


# ---------------------------------------------------------------------------- one run
def run_one(
    config: LearningConfig,
    algo: str,
    seed: int,
    start_dir: Path,
    run_dir: Path,
    *,
    callbacks: Sequence[Any] = (),
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train one (algo, seed) run to its end, resuming from its newest checkpoint if any.

    Returns the run's ``done.json`` content. A run already marked done is returned as is.
    ``callbacks`` are extra ``TrainerCallback`` objects (tests use one to kill a run).
    """
    from aem_agent.metrics import MetricsWriter
    from aem_agent.train import METRICS_FILE, build_config, build_trainer, last_checkpoint

    done = run_dir / DONE_MARKER
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    ensure_env(config.env_id)
    train_config, driver = build_config(run_settings(config, algo, seed, run_dir))
    _configure_torch(driver)
    checkpoint = last_checkpoint(run_dir)
    resume_step = int(checkpoint.name.split("-")[1]) if checkpoint is not None else None
    writer = MetricsWriter(run_dir / METRICS_FILE, resume_step=resume_step)
    specs = heldout_specs(config)
    heldout = heldout_callback(
        specs,
        config.eval_every,
        temperature=config.eval_temperature,
        seed=config.eval_seed,
        writer=writer,
    )
    trainer = build_trainer(
        train_config, start_dir, callbacks=[writer.callback(), heldout, *callbacks]
    )
    heldout.bind(trainer)
    log(
        f"[{algo}-seed{seed}] "
        + (f"resuming from {checkpoint.name}" if checkpoint else "starting")
        + f" ({train_config.max_steps} steps)"
    )
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    finally:
        cast("MultiTurnRollout", trainer.rollout_func).close()  # the one the trainer built
    rows = writer.rows
    final = _last_value(rows, HELDOUT_KEYS[0])
    summary = {
        "algo": algo,
        "seed": seed,
        "global_step": trainer.state.global_step,
        "final_heldout_success": final,
        "resumed_from": checkpoint.name if checkpoint else None,
        "seconds_last_session": round(time.perf_counter() - started, 1),
        "heldout_episodes": len(specs),
    }
    atomic_write_json(done, summary)  # the marker: written last, atomically
    for stale in run_dir.glob("checkpoint-*"):  # done runs are never resumed
        shutil.rmtree(stale, ignore_errors=True)
    log(f"[{algo}-seed{seed}] done at step {summary['global_step']}: held-out success {final}")
    return summary


def _last_value(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    for row in reversed(rows):
        value = _number(row.get(key))
        if value is not None:
            return value
    return None


def _number(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------- results.json
def read_metrics(path: Path) -> list[dict[str, Any]]:
    """A run's metrics.csv as rows of numbers (empty cells dropped); [] when absent."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        rows = []
        for raw in csv.DictReader(handle):
            row = {k: _number(v) for k, v in raw.items() if k is not None}
            rows.append({k: v for k, v in row.items() if v is not None})
    return rows


def curves(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, list[list[float]]]:
    """``key → [[step, value], …]`` for every key with at least one value."""
    out: dict[str, list[list[float]]] = {}
    for key in keys:
        points = [[int(r["step"]), float(r[key])] for r in rows if key in r and "step" in r]
        if points:
            out[key] = points
    return out


def collect_results(config: LearningConfig, out: Path) -> dict[str, Any]:
    """Everything the report shows, from the run folders: per-run curves and final values,
    and per algorithm the final held-out success as mean ± std over the finished seeds."""
    import statistics

    from aem_agent.train import METRICS_FILE

    start_file = out / START_DIR / START_MARKER
    start = json.loads(start_file.read_text(encoding="utf-8")) if start_file.is_file() else None
    runs: list[dict[str, Any]] = []
    for algo, seed, name in config.run_names():
        run_dir = out / RUNS_DIR / name
        done_file = run_dir / DONE_MARKER
        done = json.loads(done_file.read_text(encoding="utf-8")) if done_file.is_file() else None
        rows = read_metrics(run_dir / METRICS_FILE)
        status = "done" if done else ("partial" if rows else "pending")
        runs.append(
            {
                "name": name,
                "algo": algo,
                "seed": seed,
                "status": status,
                "final_heldout_success": _last_value(rows, HELDOUT_KEYS[0]) if done else None,
                "global_step": done.get("global_step") if done else None,
                "curves": curves(rows, (*HELDOUT_KEYS, *TRAIN_KEYS)),
            }
        )
    summary = []
    for algo in config.algorithms:
        finished = [r for r in runs if r["algo"] == algo and r["status"] == "done"]
        values = [r["final_heldout_success"] for r in finished]
        values = [v for v in values if v is not None]
        start_success = start.get("heldout_success") if start else None
        summary.append(
            {
                "algo": algo,
                "runs_done": len(finished),
                "runs_planned": len(config.seeds),
                "final_heldout_success_mean": statistics.fmean(values) if values else None,
                # Sample standard deviation over seeds (0 for a single seed).
                "final_heldout_success_std": (
                    (statistics.stdev(values) if len(values) > 1 else 0.0) if values else None
                ),
                "per_seed": {str(r["seed"]): r["final_heldout_success"] for r in finished},
                "start_heldout_success": start_success,
            }
        )
    return {
        "experiment": config.name,
        "config": config.to_dict(),
        "start": start,
        "runs": runs,
        "summary": summary,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_results(out: Path, config: LearningConfig) -> dict[str, Any]:
    """Collect and write ``results.json`` atomically; return it."""
    results = collect_results(config, out)
    atomic_write_json(out / RESULTS_FILE, results)
    return results


def load_results(out: Path) -> dict[str, Any]:
    """Read a results.json (a run folder or the file itself)."""
    path = out / RESULTS_FILE if out.is_dir() else out
    if not path.is_file():
        raise DataError(f"no {RESULTS_FILE} at {out}; run `aem bench learning CONFIG` first")
    return json.loads(path.read_text(encoding="utf-8"))
