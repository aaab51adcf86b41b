"""``AEMConfig``: TRL's ``GRPOConfig`` plus the AEM and multi-turn rollout settings.

Why a subclass of ``GRPOConfig``: every TRL setting (learning rate, group size via
``num_generations``, sampling temperature, logging, checkpoints, vLLM) keeps its meaning and its
documentation, and ``HfArgumentParser``/YAML loading work unchanged. The defaults of the AEM
settings are the ones ``design/AEM.md`` states (λ = 1.0, ε = 1e-6, response level, no
re-normalisation); the rollout defaults follow the paper's setup (50-step episodes, the
10 / 0 / −0.1 reward scheme of the envs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from aem_agent.aem import LEVELS
from aem_envs.core.errors import AEMError

LAYOUTS: tuple[str, ...] = ("trajectory", "step")


class ConfigError(AEMError, ValueError):
    """A training setting is out of range or inconsistent with another one."""


@dataclass
class AEMConfig(GRPOConfig):
    """Settings of :class:`aem_agent.trainer.AEMGRPOTrainer` (all of ``GRPOConfig`` plus these)."""

    aem_enabled: bool = field(
        default=True,
        metadata={"help": "Apply AEM after the GRPO advantage; False trains plain GRPO."},
    )
    aem_lambda: float = field(
        default=1.0,
        metadata={"help": "λ: strength of the entropy modulation (0 = plain GRPO; sweep 0.5-2)."},
    )
    aem_eps: float = field(
        default=1e-6, metadata={"help": "ε of the in-group min-max normalisation of entropy."}
    )
    aem_level: str = field(
        default="response",
        metadata={
            "help": "'response': one α per trajectory; 'turn': one α per assistant turn, "
            "giving per-token advantages (trajectory layout only)."
        },
    )
    env_ids: list[str] = field(
        default_factory=lambda: ["aem/ALFWorld-v0"],
        metadata={"help": "Environment ids to train on; tasks are drawn round-robin."},
    )
    env_kwargs: dict = field(
        default_factory=dict,
        metadata={"help": "Keyword arguments for gym.make of every env (e.g. data paths)."},
    )
    env_split: str | None = field(
        default=None, metadata={"help": "Task split to train on (default: the env's first split)."}
    )
    num_tasks: int = field(
        default=256,
        metadata={"help": "Distinct (task, seed) episodes in the training set; each is a group."},
    )
    max_turns: int = field(default=50, metadata={"help": "Episode step limit (the paper uses 50)."})
    max_turn_tokens: int = field(
        default=256, metadata={"help": "Most new tokens the policy may generate in one turn."}
    )
    history_window: int = field(
        default=5,
        metadata={"help": "Earlier (observation, action) pairs shown in a prompt (step layout)."},
    )
    rollout_layout: str = field(
        default="trajectory",
        metadata={
            "help": "'trajectory': one sequence per episode, observation tokens masked; "
            "'step': one sample per step sharing the episode advantage."
        },
    )
    env_workers: int = field(
        default=8, metadata={"help": "Threads stepping the batch's environments concurrently."}
    )
    reply_prefix: str | None = field(
        default=None,
        metadata={
            "help": "Text pre-filled at the start of every reply (default: none). Its tokens "
            "end the model's context and it is put back in front of the reply before parsing; "
            "'<action>' gets very small models (SmolLM2-135M) to answer with actions."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.aem_level not in LEVELS:
            raise ConfigError(f"aem_level={self.aem_level!r}; choose one of {list(LEVELS)}")
        if self.aem_lambda < 0:
            raise ConfigError(f"aem_lambda={self.aem_lambda} must be >= 0 (0 = plain GRPO)")
        if self.aem_eps < 0:
            raise ConfigError(f"aem_eps={self.aem_eps} must be >= 0")
        if self.rollout_layout not in LAYOUTS:
            raise ConfigError(
                f"rollout_layout={self.rollout_layout!r}; choose one of {list(LAYOUTS)}"
            )
        if self.rollout_layout == "step" and self.aem_level == "turn":
            raise ConfigError(
                "aem_level='turn' needs rollout_layout='trajectory' (in the step layout every "
                "sample already is one turn: use aem_level='response')"
            )
        for name in ("num_tasks", "max_turns", "max_turn_tokens", "env_workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be at least 1")
        if self.history_window < 0:
            raise ConfigError(f"history_window={self.history_window} must be >= 0")
        if not self.env_ids:
            raise ConfigError("env_ids is empty; name at least one env id, e.g. aem/ALFWorld-v0")

    @property
    def aem_active(self) -> bool:
        """Whether advantages are modulated at all (AEM on and λ > 0)."""
        return self.aem_enabled and self.aem_lambda > 0
