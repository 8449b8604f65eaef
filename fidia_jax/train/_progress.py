"""What a person sees while a run goes: stages, a progress bar per fit, tables at the end.

Everything goes to stderr except tables (stdout). On a terminal a fit shows a ``rich`` progress
bar (a compile phase first, then steps/s, loss and ETA); in a log or a pipe it prints one plain
line at the start, one when compilation is done and about ten while it runs, so CI logs and
``nohup`` files show progress too. ``FIDIA_QUIET=1`` (or ``quiet=True``) silences all of it.

In a multi-process run (:func:`fidia_jax.parallel.initialize_distributed`) only process 0 shows
stages, bars and tables; every other process prints one status line per fit when it ends
(``<run>: process i/n done``), so n processes do not print n copies of the same display.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from rich.markup import escape

from fidia_jax import _io, parallel
from fidia_jax._io import _err_console, beat_every, is_quiet, make_console, stage
from fidia_jax._io import print_table as _print_table

__all__ = ["FitProgress", "is_quiet", "print_table", "stage"]


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A labelled table on stdout (nothing when quiet, nor on a process other than 0); no cell or
    header is cut.

    Floats are shown with 3 decimals (format a value yourself for another precision).
    """
    show = not is_quiet() and parallel.is_primary()
    _print_table(make_console() if show else None, title, columns, rows)


def _fmt(metrics: Mapping[str, float], keys: Sequence[str]) -> str:
    return "  ".join(f"{k} {metrics[k]:.4g}" for k in keys if k in metrics)


class FitProgress:
    """Progress of one fit: ``compiling`` until the first step returns, then the steps.

    Args:
      name: the run's name (shown first).
      total: the last step (the fit runs steps ``start + 1 .. total``).
      start: steps already done (a resumed run).
      show: the metric names shown beside the bar (those present).
      quiet: print nothing (also when ``$FIDIA_QUIET`` is set).

    On a process other than 0 of a multi-process run nothing is shown but one line at
    :meth:`close` (``<name>: process i/n done``, on stderr; none when quiet).
    """

    def __init__(
        self,
        name: str,
        total: int,
        start: int = 0,
        *,
        show: Sequence[str] = ("loss",),
        quiet: bool = False,
    ):
        self.name, self.total, self.start, self.show = name, int(total), int(start), tuple(show)
        self.console = None if quiet else _err_console()
        self._status = not quiet and not is_quiet() and not parallel.is_primary()
        self._bar = None
        self._beat = None  # the compile phase's still-running lines (no terminal)
        self._quiet = None  # outer heartbeats silenced while this display lives
        self._t0 = time.perf_counter()
        self._t_compiled: float | None = None
        self._next_line = 0.0
        if self.console is None:
            return
        # while this display lives, a stage around it does not print its own heartbeat
        self._quiet = _io.quiet_outer_beats()
        self._quiet.__enter__()
        resumed = f" (resuming at step {start})" if start else ""
        if self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TextColumn("{task.fields[metrics]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._bar.start()
            self._task = self._bar.add_task(
                f"{escape(name)}: compiling{resumed}",
                total=total,
                completed=start,
                rate="",
                metrics="",
            )
        else:
            self.console.print(f"{name}: compiling{resumed} …", highlight=False, markup=False)
            # in a log or a pipe a compile of minutes would otherwise print nothing
            self._beat = beat_every(
                self.console,
                lambda s: f"{name}: compiling, still running, {s:.0f} s",
                _io.STILL_RUNNING_EVERY_S,
            )
            self._beat.__enter__()

    def __enter__(self) -> FitProgress:
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def __del__(self) -> None:  # a display dropped without close(): its beats are released
        try:
            self._stop_beat()
            if self._quiet is not None:
                quiet, self._quiet = self._quiet, None
                quiet.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _stop_beat(self) -> None:
        if self._beat is not None:
            beat, self._beat = self._beat, None
            beat.__exit__(None, None, None)

    def compiled(self) -> None:
        """The first step returned: compilation (and that step) took the time since the start."""
        self._stop_beat()
        self._t_compiled = time.perf_counter()
        secs = self._t_compiled - self._t0
        if self._bar is not None:
            self._bar.update(
                self._task, description=f"{escape(self.name)} (compiled in {secs:.1f} s)"
            )
        elif self.console is not None:
            self.console.print(
                f"{self.name}: compiled in {secs:.1f} s", highlight=False, markup=False
            )

    def update(self, step: int, metrics: Mapping[str, float]) -> None:
        """Steps up to ``step`` are done; ``metrics`` are the last step's."""
        self._stop_beat()
        if self.console is None:
            return
        now = time.perf_counter()
        t_c = self._t_compiled or now
        done_since = step - self.start - 1  # the first step is counted in the compile phase
        rate = done_since / (now - t_c) if now > t_c and done_since > 0 else float("nan")
        rate_s = f"{rate:.1f} steps/s" if rate == rate else ""
        text = _fmt(metrics, self.show)
        if self._bar is not None:
            self._bar.update(self._task, completed=step, rate=rate_s, metrics=escape(text))
            return
        if now >= self._next_line or step >= self.total:
            eta = (self.total - step) / rate if rate == rate and rate > 0 else float("nan")
            eta_s = f"  ETA {eta:.0f} s" if eta == eta else ""
            self.console.print(
                f"{self.name}: step {step}/{self.total}  {text}  {rate_s}{eta_s}",
                highlight=False,
                markup=False,
            )
            # about ten lines over the run, at least 2 s apart
            span = (now - t_c) / max(step - self.start, 1) * (self.total - self.start)
            self._next_line = now + max(2.0, span / 10)

    def close(self, message: str | None = None) -> None:
        """Ends the display, printing ``message`` (for example the final loss) when given.
        Call it (or use the object as a context manager) so that the compile heartbeat stops
        and the heartbeats around it speak again."""
        self._stop_beat()
        if self._quiet is not None:
            quiet, self._quiet = self._quiet, None
            quiet.__exit__(None, None, None)
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self.console is not None and message:
            self.console.print(f"{self.name}: {message}", highlight=False, markup=False)
        if self._status:
            import jax

            self._status = False
            index, count = jax.process_index(), jax.process_count()
            if count == 1:  # a launcher's process that did not join the runtime
                index, count = parallel.launcher_process() or (index, count)
            make_console(stderr=True).print(
                f"{self.name}: process {index}/{count} done",
                highlight=False,
                markup=False,
            )
