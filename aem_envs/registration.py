"""The environment ids aem provides, what each needs, and their registration with Gymnasium.

Registration is a table rather than scattered ``gym.register`` calls so that ``aem envs``
can say what every id needs without importing any engine.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import gymnasium as gym

from aem_envs.core.brief import GENERIC_BRIEF, AgentBrief
from aem_envs.core.errors import AEMError, import_problem, install_command
from aem_envs.core.limits import ADOPT_TIME_LIMIT

NAMESPACE = "aem"


@dataclass(frozen=True)
class Feature:
    """An optional part of an id (an engine) with Python dependencies of its own."""

    name: str
    extra: str
    modules: tuple[str, ...]

    @property
    def install(self) -> str:
        return install_command(self.extra)

    def problems(self) -> list[str]:
        """One line per module that does not import here (empty: the feature is ready)."""
        return [problem for problem in map(import_problem, self.modules) if problem]


@dataclass(frozen=True)
class EnvEntry:
    """One environment id: where its class lives and what it needs to run."""

    id: str
    entry_point: str
    extra: str
    modules: tuple[str, ...]
    system: str
    summary: str
    #: ``module:attribute`` of the :class:`~aem_envs.core.brief.AgentBrief` the id gives LLM
    #: agents (its env package's ``brief.py``), loaded when a prompt needs it.
    brief: str
    #: Services the id needs at run time beyond Python packages ("docker", "browser").
    resources: tuple[str, ...] = ()
    #: Optional parts with their own dependencies, reported separately by ``aem envs``.
    features: tuple[Feature, ...] = ()

    @property
    def module(self) -> str:
        return self.entry_point.split(":")[0]

    @property
    def install(self) -> str:
        """The exact command that installs this id's extra (``--no-deps`` parts included)."""
        return install_command(self.extra)

    def missing_modules(self) -> list[str]:
        """Python dependencies of this id that do not import here (by really importing)."""
        return [m for m in self.modules if import_problem(m) is not None]

    def env_class(self) -> type:
        return getattr(importlib.import_module(self.module), self.entry_point.split(":")[1])

    def agent_brief(self) -> AgentBrief:
        module, name = self.brief.split(":")
        brief: AgentBrief = getattr(importlib.import_module(module), name)
        return brief


ENTRIES: tuple[EnvEntry, ...] = (
    EnvEntry(
        id="aem/ALFWorld-v0",
        entry_point="aem_envs.alfworld.env:ALFWorldEnv",
        extra="alfworld",
        modules=(),
        system="none; the extra adds the upstream engine (engine='upstream', the generator), "
        "whose fast-downward build needs cmake < 4 and g++",
        summary="ALFWorld household tasks; aem's native engine on generated games by default, "
        "alfworld's own textworld engine with engine='upstream'",
        brief="aem_envs.alfworld.brief:BRIEF",
        features=(
            Feature(
                name="engine='upstream'",
                extra="alfworld",
                modules=(
                    "textworld",
                    "fast_downward",
                    "textworld.envs.pddl",
                    "alfworld.agents.environment.alfred_tw_env",
                    "alfworld.agents.expert.handcoded_expert_tw",
                ),
            ),
        ),
    ),
    EnvEntry(
        id="aem/WebShop-v0",
        entry_point="aem_envs.webshop.env:WebShopEnv",
        extra="webshop",
        modules=("rapidfuzz", "jinja2"),
        system="none",
        summary="WebShop shopping site with its exact reward, in-process text modes",
        brief="aem_envs.webshop.brief:BRIEF",
    ),
    EnvEntry(
        id="aem/WebShopBrowser-v0",
        entry_point="aem_envs.webshop.browser:WebShopBrowserEnv",
        extra="browser",
        modules=("rapidfuzz", "jinja2", "selenium"),
        system="/usr/bin/chromium and /usr/bin/chromedriver (apt: chromium chromium-driver)",
        summary="WebShop driven in headless Chromium through Selenium",
        brief="aem_envs.webshop.brief:BRIEF",
        resources=("browser",),
    ),
    EnvEntry(
        id="aem/SWE-v0",
        entry_point="aem_envs.swe.env:SWEEnv",
        extra="swe",
        modules=("docker", "swebench"),
        system="a Docker engine (apt: docker.io) and debootstrap, or bubblewrap",
        summary="SWE-bench-style repository tasks in a sandbox, graded like the swebench harness",
        brief="aem_envs.swe.brief:BRIEF",
        resources=("docker",),
    ),
)


def entry(env_id: str) -> EnvEntry | None:
    """The table entry for ``env_id`` (with or without the ``aem_envs:`` prefix), if any."""
    bare = env_id.split(":", 1)[-1]
    return next((item for item in ENTRIES if item.id == bare), None)


def entry_by_id(env_id: str) -> EnvEntry:
    """The table entry of an aem id (for code that describes its own id); raises if unknown."""
    item = entry(env_id)
    if item is None:
        raise AEMError(f"{env_id!r} is not an aem id; aem ids: {', '.join(e.id for e in ENTRIES)}")
    return item


def agent_brief(env_id: str) -> AgentBrief:
    """What ``env_id`` tells an LLM agent about itself; the generic brief for an id that is
    not aem's (user-registered and test envs)."""
    item = entry(env_id)
    return GENERIC_BRIEF if item is None else item.agent_brief()


def resolve_env_id(env_id: str) -> str:
    """The id to pass to ``gym.make``: an aem id, or any id registered with Gymnasium.

    Raises one clear line for an unknown id, listing the aem ids.
    """
    item = entry(env_id)
    if item is not None:
        return f"aem_envs:{item.id}"
    if env_id in gym.registry:
        return env_id
    known = ", ".join(e.id for e in ENTRIES)
    raise AEMError(f"unknown environment id {env_id!r}; aem ids: {known} (see `aem envs`)")


def register_text_env(env_id: str, entry_point: str) -> None:
    """Register one :class:`~aem_envs.core.base.TextEnv` id as aem registers its own.

    Why a function: the wrapper that hands ``max_episode_steps`` to the env (see
    :mod:`aem_envs.core.limits`) must come with every id, including test and user envs.
    """
    if env_id not in gym.registry:
        gym.register(
            id=env_id,
            entry_point=entry_point,
            disable_env_checker=False,
            additional_wrappers=(ADOPT_TIME_LIMIT,),
        )


#: The Gymnasium client of ``aem serve``. Not in ``ENTRIES``, which lists envs that run
#: here: this one plays an env that runs on a server (``gym.make(REMOTE_ID, url=...)``).
REMOTE_ID = "aem/Remote-v0"


def register_envs() -> None:
    """Register every aem id, and the remote client, with Gymnasium (idempotent)."""
    for item in ENTRIES:
        register_text_env(item.id, item.entry_point)
    if REMOTE_ID not in gym.registry:
        gym.register(id=REMOTE_ID, entry_point="aem_envs.remote.client:RemoteEnv")
