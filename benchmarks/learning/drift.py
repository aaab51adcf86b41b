"""The entropy-drift law, checked on every training step: predicted against measured.

Why: AEM's argument is that under natural-gradient updates one sampled response y moves the
policy's entropy by about η · A · (S(y) − H), S the response's surprisal and H the policy's
entropy, so weighting typical responses (low H̄) up steers entropy by the sign of A. Here,
after each update, the step's own units are scored again:

* ``drift/predicted`` = mean over units of α · A · (S̄ − H̄), S̄ the mean per-token surprisal of
  the sampled reply and H̄ its mean token entropy, both from the sampler before the update —
  the law's per-token form, summed over the batch as the update sums the units;
* ``drift/measured`` = mean over units of H̄_after − H̄, H̄_after the mean token entropy of the
  same reply positions under the updated weights.

The law is a statement about natural gradients; the runs use Adam, so this measures how much
of it survives (correlation and sign agreement over steps, in the report). Every unit's A, α,
S̄, H̄ and H̄_after is also written to ``units.csv.gz`` of the run, with its turn's reward and
command (the reply's first word), for the task check, for :mod:`benchmarks.learning.push` and
for anyone who wants to look closer.
"""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path
from typing import Any

from aem_envs.core.io import atomic_write_bytes
from benchmarks.actionmix import reply_command

#: The per-unit file of a run.
UNITS_FILE = "units.csv.gz"
UNIT_COLUMNS = (
    "step",
    "group",
    "advantage",
    "alpha",
    "surprisal",
    "entropy",
    "entropy_after",
    "reward",
    "command",
)
#: The columns of :data:`UNIT_COLUMNS` that hold text; the others are numbers.
TEXT_COLUMNS = ("command",)
#: Per-step keys this probe adds to metrics.csv.
DRIFT_KEYS = ("drift/predicted", "drift/measured")


class UnitsWriter:
    """Keeps every unit row of a run and rewrites ``units.csv.gz`` atomically after each step;
    on resume it keeps the rows up to the checkpoint's step (as ``MetricsWriter`` does)."""

    def __init__(self, path: Path, *, resume_step: int | None = None) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        if resume_step is not None and path.is_file():
            with gzip.open(path, "rt", newline="") as handle:
                self.rows = [r for r in csv.DictReader(handle) if int(r["step"]) <= resume_step]

    def add(self, rows: list[dict[str, Any]]) -> None:
        self.rows.extend(rows)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=UNIT_COLUMNS)
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_bytes(self.path, gzip.compress(buffer.getvalue().encode(), mtime=0))


def drift_callback(writer: Any, units: UnitsWriter, *, updates: int = 1, every: int = 1) -> Any:
    """A ``TrainerCallback`` that, after each rollout batch's last optimizer step (of
    ``updates``), scores the batch's units again (:mod:`this module
    <benchmarks.learning.drift>`) and adds ``drift/*`` to ``writer``, at the batch's step;
    only every ``every`` batches (the probe is a forward over all the batch's rows: on a
    small model as much as a third of a step). Call ``.bind(trainer)`` once the trainer
    exists."""
    from transformers import TrainerCallback

    class Drift(TrainerCallback):
        def __init__(self) -> None:
            self.trainer: Any = None

        def bind(self, trainer: Any) -> Drift:
            self.trainer = trainer
            return self

        def on_step_end(self, args, state, control, **kwargs):
            record = getattr(self.trainer, "aem_record", None)
            step, within = divmod(state.global_step, updates)
            if record is None or within or not state.is_world_process_zero:
                return
            self.trainer.aem_record = None  # scored once, or not at all
            if step % every:
                return
            step_rows, stats = measure(self.trainer, record, step)
            units.add(step_rows)
            writer.add(step, stats)

    return Drift()


def measure(trainer: Any, record: Any, step: int) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The unit rows and the step's ``drift/*`` values for one :class:`AEMRecord`."""
    import torch

    from aem_agent.credit.modulation import unit_mean_entropy

    batch = record.batch
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    model = trainer.model
    was_training = model.training
    model.eval()
    # rows per forward within the trainer's no-grad token budget: one forward over every row
    # of a step held gigabytes and ran slower than the same rows in parts
    rows = max(1, trainer.args.step_token_budget // ids.size(1))
    try:
        with torch.no_grad():
            _, entropies = trainer.score_tokens(
                model,
                ids,
                attention,
                batch["completion_ids"].size(1),
                compute_entropy=True,
                batch_size=rows,
            )
    finally:
        model.train(was_training)
    after, _ = unit_mean_entropy(entropies.cpu(), record.units)
    valid = record.valid
    change = (after - record.hbar)[valid]
    stats = {"drift/measured": float(change.mean()) if len(change) else 0.0}
    surprisal = record.surprisal
    if surprisal is not None:
        predicted = record.alpha * record.advantage * (surprisal - record.hbar)
        stats["drift/predicted"] = float(predicted[valid].mean()) if bool(valid.any()) else 0.0
    rows = []
    replies = unit_replies(trainer.processing_class, batch["completion_ids"], record.units)
    reward = record.reward
    for u in valid.nonzero().squeeze(1).tolist():
        rows.append(
            {
                "step": step,
                "group": int(record.units.group[u]),
                "advantage": round(float(record.advantage[u]), 6),
                "alpha": round(float(record.alpha[u]), 6),
                "surprisal": round(float(surprisal[u]), 6) if surprisal is not None else "",
                "entropy": round(float(record.hbar[u]), 6),
                "entropy_after": round(float(after[u]), 6),
                "reward": round(float(reward[u]), 6) if reward is not None else "",
                "command": reply_command(replies[u]),
            }
        )
    return rows, stats


def unit_replies(tokenizer: Any, completion_ids: Any, units: Any) -> list[str]:
    """Each unit's reply text: its own completion tokens (``units.token_unit``), decoded."""
    ids: list[list[int]] = [[] for _ in range(units.count)]
    for row, position in (units.token_unit >= 0).nonzero().tolist():
        ids[int(units.token_unit[row, position])].append(int(completion_ids[row, position]))
    return [tokenizer.decode(unit_ids, skip_special_tokens=True) for unit_ids in ids]


def read_units(run_dir: Path) -> list[dict[str, Any]]:
    """A run's unit rows ([] when it has none): numbers, but :data:`TEXT_COLUMNS` as text; a
    number a row left empty (written before its column existed, or not known) is absent."""
    path = run_dir / UNITS_FILE
    if not path.is_file():
        return []
    with gzip.open(path, "rt", newline="") as handle:
        return [
            {
                k: v if k in TEXT_COLUMNS else float(v)
                for k, v in r.items()
                if v is not None and (v != "" or k in TEXT_COLUMNS)
            }
            for r in csv.DictReader(handle)
        ]
