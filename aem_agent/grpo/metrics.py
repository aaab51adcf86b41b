"""What a training run logs while it runs: ``metrics.csv``, one readable line per step,
TensorBoard events and the ``training.png`` plot.

Why apart from :mod:`aem_agent.grpo.run`: ``aem train``, ``aem sft`` and the learning experiments
all log through these, and none of it is about building a run. Paths come from the caller;
the file names a run uses are in :mod:`aem_agent.grpo.run`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aem_envs.core.io import atomic_write_bytes, atomic_write_text

if TYPE_CHECKING:  # transformers loads when a run starts
    from transformers import Trainer, TrainerCallback

#: Plotted panels: (title, metric keys tried in order).
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("success rate", ("episode/success_rate",)),
    ("reward", ("reward",)),
    ("entropy", ("aem/entropy_mean", "entropy")),
)


def log_line_callback(sink: Callable[[str], None] | None = None) -> TrainerCallback:
    """A ``TrainerCallback`` writing one readable line per logged step (main process).

    ``sink`` receives each line (default: print, flushed), so a caller with its own log,
    such as the learning harness, tags and routes the lines itself.
    """
    from transformers import TrainerCallback

    shown = (
        ("reward", "reward"),
        ("episode/success_rate", "success"),
        ("episode/valid_rate", "valid"),
        ("aem/entropy_mean", "entropy"),
        ("aem/alpha_min", "alpha_min"),
        ("aem/alpha_max", "alpha_max"),
        ("aem/gated_share", "gated"),
        ("loss", "loss"),
    )

    class _LogLine(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs or "train_runtime" in logs:
                return
            parts = [
                f"{label} {logs[key]:.3g}"
                for key, label in shown
                if as_number(logs.get(key)) is not None
            ]
            if parts:
                head = f"step {state.global_step}/{state.max_steps}: "
                line = head + ", ".join(parts)
                if sink is None:
                    print(line, flush=True)
                else:
                    sink(line)

    return _LogLine()


def readable_terminal(trainer: Trainer) -> None:
    """Leave the terminal to :func:`log_line_callback`'s readable line.

    transformers writes the raw dict of every log after it (``ProgressCallback.on_log``, or
    ``PrinterCallback`` without a progress bar); the bar stays, the dict goes — it is in
    ``metrics.csv`` and TensorBoard.
    """
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class _BarOnly(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            return None

    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(_BarOnly())
    trainer.pop_callback(PrinterCallback)


class MetricsWriter:
    """Keeps every logged step and rewrites ``metrics.csv`` atomically after each log.

    On resume it keeps the rows of the earlier run up to the checkpoint's step, so the file
    reads as one run. With ``updates`` > 1 a row's step counts rollout batches of that many
    optimizer steps each (the learning harness's arms with mini-batch updates; log every
    ``updates`` optimizer steps so that each row is one batch).
    """

    def __init__(self, path: Path, *, resume_step: int | None = None, updates: int = 1) -> None:
        self.path = path
        self.updates = updates
        self.rows: list[dict[str, Any]] = []
        if resume_step is not None and path.is_file():
            with path.open(newline="") as handle:
                self.rows = [r for r in csv.DictReader(handle) if int(r["step"]) <= resume_step]

    def add(self, step: int, logs: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in logs.items() if isinstance(v, int | float)}
        if not scalars or "train_runtime" in scalars:  # the end-of-run summary is no step
            return
        self.rows.append({"step": step, **scalars})
        columns = list(dict.fromkeys(k for row in self.rows for k in row))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns)
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_text(self.path, buffer.getvalue())

    def callback(self) -> TrainerCallback:
        """The ``TrainerCallback`` that adds every logged step (main process only)."""
        from transformers import TrainerCallback

        writer = self

        class _Callback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if state.is_world_process_zero and logs:
                    writer.add(state.global_step // writer.updates, logs)

        return _Callback()


def write_plot(rows: list[dict[str, Any]], path: Path) -> Path:
    """Success rate, reward and entropy against step, one panel each, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.2))
    for axis, (title, keys) in zip(axes, PANELS, strict=True):
        key = next((k for k in keys if any(as_number(r.get(k)) is not None for r in rows)), None)
        points = [(int(r["step"]), as_number(r.get(key))) for r in rows if key is not None]
        points = [(s, v) for s, v in points if v is not None]
        if points:
            axis.plot(*zip(*points, strict=True), marker="o", markersize=3)
        else:
            axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes)
        if title == "success rate":
            axis.set_ylim(-0.02, 1.02)
        else:
            axis.ticklabel_format(axis="y", useOffset=False)
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())


def tensorboard_callbacks(log_dir: Path, *, wanted: bool) -> list[TrainerCallback]:
    """A TensorBoard callback writing to ``log_dir`` when it is ``wanted``, else none.

    Why not TRL's ``report_to``: that would write under TRL's own folder naming; the run's
    events belong in its output directory.
    """
    if not wanted:
        return []
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    writer = SummaryWriter(log_dir=str(log_dir))
    return [TensorBoardCallback(tb_writer=writer)]


def as_number(value: Any) -> float | None:
    """``value`` as a float, or None for an empty or non-numeric cell (CSV reads give text)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
