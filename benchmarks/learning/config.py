"""What a learning experiment is: its config (what varies, what is held fixed) and the names
of its output folder's parts.

Why apart from the runs: the CLI, the start builder, the grid and the report read a config
and find the folders without training anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from aem_envs.core.errors import AEMError
from aem_envs.core.io import jsonable
from aem_envs.core.yaml_file import read_settings
from aem_envs.reply import REPLY_FORMAT

#: The output folder's parts (the layout is drawn in :mod:`benchmarks.learning.experiment`).
START_DIR = "start"
START_MARKER = "start.json"
RUNS_DIR = "runs"
DONE_MARKER = "done.json"
RESULTS_FILE = "results.json"
#: What the start offers AEM, measured before any RL (:mod:`benchmarks.learning.taskcheck`).
TASK_CHECK_FILE = "task-check.json"
#: Training steps whose episodes are averaged when a run's training success is read (the status
#: table, the aem-tiny rule): one held-out cadence.
TRAIN_WINDOW = 10
#: Settings the harness owns; a config's ``train`` section may not set them.
HARNESS_KEYS = ("algo", "seed", "output_dir", "env_ids", "env_kwargs", "env_split", "model")
#: The reply format's tags, kept whole by the tiny tokenizer.
ACTION_TAGS = (REPLY_FORMAT.action_open, REPLY_FORMAT.action_close)


class ExperimentError(AEMError, ValueError):
    """A learning-experiment config is malformed or inconsistent."""


@dataclass(frozen=True)
class Warmup:
    """The supervised warm-up that makes the start checkpoint (a config's ``warmup:``; see
    :func:`benchmarks.learning.start.warm_up`). No section, or ``steps: 0``: no warm-up."""

    #: Optimizer steps (0: the start is the model as built).
    steps: int = 0
    #: Samples (one turn each) per step.
    batch_size: int = 32
    learning_rate: float = 3e-3
    #: Episodes played to draw the samples from.
    episodes: int = 256
    seed: int = 0
    #: Share of turns labelled with the env's expert action instead of a random admissible
    #: one (:func:`benchmarks.learning.start.warmup_teacher`).
    expert_share: float = 0.0

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Warmup:
        """The warm-up of a config's ``warmup:`` mapping, naming the first bad key or value."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ExperimentError(f"unknown warmup key(s) {unknown}; known: {known}")
        kinds: dict[str, Any] = {f.name: type(f.default) for f in fields(cls)}
        try:
            warmup = cls(**{name: kinds[name](value) for name, value in data.items()})
        except (TypeError, ValueError) as exc:
            raise ExperimentError(f"warmup: {exc}") from None
        if not 0.0 <= warmup.expert_share <= 1.0:
            raise ExperimentError(
                f"warmup.expert_share={warmup.expert_share} must be between 0 and 1 (the share "
                "of warm-up turns labelled with the expert's action)"
            )
        if min(warmup.steps, warmup.batch_size - 1, warmup.episodes - 1) < 0:
            raise ExperimentError("warmup.steps must be >= 0, batch_size and episodes >= 1")
        return warmup


#: The advantage estimators of the paper's table, in its row order.
ESTIMATORS = ("grpo", "dapo", "gspo")


@dataclass(frozen=True)
class Arm:
    """One arm of a grid: the algorithm, the seeds it runs and the ``train`` settings that
    differ from the experiment's own (λ, an ablation, a rival's setting).

    ``estimator`` names the advantage estimator the arm's ``train`` settings make it (GRPO,
    DAPO, GSPO): the paper's table crosses estimators with {without, with AEM}, and an arm's
    settings alone do not say which row it belongs to.
    """

    algo: str
    seeds: tuple[int, ...]
    train: dict[str, Any] = field(default_factory=dict)
    estimator: str = "grpo"


@dataclass(frozen=True)
class SampledEval:
    """A second held-out pass during a run (``eval.sampled`` in the YAML): every held-out
    task played ``samples`` times at ``temperature``, every ``every`` steps, and at the last
    unless ``at_last`` is false: the small-agent grid scores each final model with its own
    pass, the same suite as the start's (``configs/alfworld-small-grid.sh``), and a run that
    also scored it would pay for one pass twice.

    Why: the greedy pass of a weak start sits near the floor (its one action per state can
    repeat a wrong move forever), so its curve cannot show learning where sampled success,
    over enough episodes for a small standard error, can. Not at step 0: the grid scores the
    start's sampled success once, not once per run.
    """

    every: int
    samples: int
    temperature: float = 1.0
    seed: int = 0
    at_last: bool = True

    @classmethod
    def parse(cls, data: Any) -> SampledEval | None:
        if data is None:
            return None
        if not isinstance(data, Mapping):
            raise ExperimentError("eval.sampled must be a mapping {every, samples, temperature}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ExperimentError(f"unknown eval.sampled key(s) {unknown}; known: {sorted(known)}")
        missing = sorted({"every", "samples"} - set(data))
        if missing:
            raise ExperimentError(f"eval.sampled needs {missing} (e.g. every: 50, samples: 10)")
        sampled = cls(
            every=int(data["every"]),
            samples=int(data["samples"]),
            temperature=float(data.get("temperature", 1.0)),
            seed=int(data.get("seed", 0)),
            at_last=bool(data.get("at_last", True)),
        )
        if min(sampled.every, sampled.samples) < 1 or sampled.temperature <= 0:
            raise ExperimentError(
                "eval.sampled: every and samples must be at least 1 and temperature above 0 "
                "(a greedy pass is eval's own)"
            )
        return sampled


@dataclass(frozen=True)
class LearningConfig:
    """One experiment: what is varied (arms, seeds) and everything held fixed.

    ``algorithms`` names the arms in order. A config's ``algorithms: [grpo, aem]`` gives one
    arm per algorithm with every seed; its ``arms:`` mapping gives named arms with their own
    seeds and settings (``configs/mechanism-fetch.yaml``). Seed s of every arm starts from the
    same checkpoint and plays the same tasks and sampling stream: the arms are paired by seed.
    """

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
    warmup: Warmup
    train: dict[str, Any]
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: Held-out tasks spread over the split as a suite's ``tasks: N`` picks them, each reset
    #: with ``eval_seed`` (``eval.tasks`` in the YAML), instead of the first seeds giving
    #: distinct tasks: the harness then scores exactly the games a suite scores.
    eval_spread: bool = False
    #: Arm name → :class:`Arm`; every name of ``algorithms`` has one.
    arms: dict[str, Arm] = field(default_factory=dict)
    #: The arm every other one is compared with, seed by seed (the report's paired differences).
    baseline: str = ""
    #: ``"exact"``: the held-out success is computed from the policy's reply probabilities
    #: (:mod:`benchmarks.learning.exact`); ``"play"``: episodes are played and counted.
    eval_method: str = "play"
    #: The sampled held-out pass during runs (``eval.sampled``), if any.
    sampled_eval: SampledEval | None = None
    #: The entropy-drift probe (:mod:`benchmarks.learning.drift`) scores every this many
    #: steps (``eval.drift_every``): it is a forward over all of a step's rows.
    drift_every: int = 1

    def arm(self, name: str) -> Arm:
        return self.arms.get(name) or Arm(name, self.seeds)

    def run_names(self) -> list[tuple[str, int, str]]:
        """``(arm, seed, folder name)`` of every run, seeds outermost (pairs finish together)."""
        return [
            (a, s, f"{a}-seed{s}")
            for s in self.seeds
            for a in self.algorithms
            if s in self.arm(a).seeds
        ]

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


def load_config(path: str | os.PathLike[str]) -> LearningConfig:
    """Read and check an experiment YAML (see ``benchmarks/learning/configs/mechanism.yaml``);
    a name that is not a file is one of the bundled ``configs/``."""
    bundled = Path(__file__).with_name("configs")
    data = read_settings(path, bundled=bundled, what="learning config")
    file = Path(path) if Path(path).is_file() else bundled / Path(path).name
    return parse_config(data, source=str(file))


def parse_config(data: Mapping[str, Any], *, source: str = "") -> LearningConfig:
    """Build a :class:`LearningConfig` from a mapping, naming the first bad key."""
    known = {"name", "algorithms", "arms", "baseline", "seeds", "env", "eval", "model"}
    known |= {"warmup", "train"}
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
    seeds = tuple(int(s) for s in data.get("seeds") or (0,))
    if len(set(seeds)) != len(seeds):
        raise ExperimentError(f"seeds {list(seeds)} repeat a seed")
    if "arms" in data and "algorithms" in data:
        raise ExperimentError("give either algorithms (one arm each) or arms, not both")
    arms = _parse_arms(data["arms"], seeds) if "arms" in data else {}
    algorithms = tuple(arms) if arms else tuple(data.get("algorithms") or ("grpo", "aem"))
    bad = [a for a in algorithms if a not in ("aem", "grpo") and a not in arms]
    if bad:
        raise ExperimentError(f"algorithms {bad}: choose among 'aem' and 'grpo'")
    all_seeds = sorted({s for arm in arms.values() for s in arm.seeds} | set(seeds))
    baseline = str(data.get("baseline") or algorithms[0])
    if baseline not in algorithms:
        raise ExperimentError(f"baseline {baseline!r} is not one of the arms {list(algorithms)}")
    method = str(evaluation.get("method", "play"))
    if method not in ("play", "exact"):
        raise ExperimentError(f"eval.method={method!r}; choose 'play' or 'exact'")
    if "id" not in env:
        raise ExperimentError("env.id is missing (e.g. aem-bench/Pick-v0)")
    if "tasks" in evaluation and "episodes" in evaluation:
        raise ExperimentError(
            "eval.tasks and eval.episodes both given: use tasks (N tasks spread over the split, "
            "as a suite picks them) or episodes (the first seeds giving distinct tasks)"
        )
    warmup = Warmup.parse(data.get("warmup") or {})
    model = dict(data.get("model") or {"tiny": {}})
    if len(model) != 1 or next(iter(model)) not in ("tiny", "path"):
        raise ExperimentError("model must be {tiny: {...builder settings}} or {path: DIR}")
    config = LearningConfig(
        name=str(data.get("name") or Path(source).stem or "learning"),
        algorithms=algorithms,
        seeds=tuple(all_seeds),
        env_id=str(env["id"]),
        env_kwargs=dict(env.get("kwargs") or {}),
        train_split=str(env.get("train_split", "train")),
        eval_split=str(env.get("eval_split", "test")),
        eval_every=int(evaluation.get("every", 10)),
        eval_episodes=int(
            evaluation["tasks"] if "tasks" in evaluation else evaluation.get("episodes", 100)
        ),
        eval_temperature=float(evaluation.get("temperature", 0.0)),
        eval_seed=int(evaluation.get("seed", 0)),
        model=model,
        warmup=warmup,
        train=train,
        source=source,
        eval_spread="tasks" in evaluation,
        arms=arms,
        baseline=baseline,
        eval_method=method,
        sampled_eval=SampledEval.parse(evaluation.get("sampled")),
        drift_every=int(evaluation.get("drift_every", 1)),
    )
    if config.train_split == config.eval_split:
        raise ExperimentError(
            f"env.train_split and env.eval_split are both {config.train_split!r}; the held-out "
            "split must be one no run trains on"
        )
    if min(config.eval_every, config.eval_episodes, config.drift_every) < 1:
        raise ExperimentError("eval.every, eval.episodes and eval.drift_every must be at least 1")
    if config.eval_temperature < 0:
        raise ExperimentError(f"eval.temperature={config.eval_temperature} must be >= 0")
    return config


def _parse_arms(raw: Any, seeds: tuple[int, ...]) -> dict[str, Arm]:
    """``arms:`` of a config: name → ``{algo, seeds, train, estimator}``, each checked."""
    if not isinstance(raw, Mapping) or not raw:
        raise ExperimentError(
            "arms must be a mapping of arm name to {algo, seeds, train, estimator}"
        )
    arms = {}
    for name, spec in raw.items():
        spec = dict(spec or {})
        unknown = sorted(set(spec) - {"algo", "seeds", "train", "estimator"})
        if unknown:
            raise ExperimentError(
                f"arm {name!r}: unknown key(s) {unknown}; known: algo, seeds, train, estimator"
            )
        algo = str(spec.get("algo", "aem"))
        if algo not in ("aem", "grpo"):
            raise ExperimentError(f"arm {name!r}: algo={algo!r}; choose 'aem' or 'grpo'")
        train = dict(spec.get("train") or {})
        owned = sorted(set(train) & set(HARNESS_KEYS))
        if owned:
            raise ExperimentError(f"arm {name!r}: train settings {owned} are set by the harness")
        arm_seeds = tuple(int(s) for s in spec.get("seeds") or seeds)
        if len(set(arm_seeds)) != len(arm_seeds):
            raise ExperimentError(f"arm {name!r}: seeds {list(arm_seeds)} repeat a seed")
        estimator = str(spec.get("estimator", "grpo"))
        if estimator not in ESTIMATORS:
            raise ExperimentError(
                f"arm {name!r}: estimator={estimator!r}; choose among {list(ESTIMATORS)}"
            )
        arms[str(name)] = Arm(algo, arm_seeds, train, estimator)
    return arms
