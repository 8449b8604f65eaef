"""Stages of a run on a released language model: prompt lengths checked before anything heavy
loads, the weights loaded with a heartbeat, and progress over the loops that follow.

:func:`load_checked` loads the tokenizer, checks every prompt's length
(:func:`fidia_jax.models.check_prompt_lengths`, against the smaller of the run's ``max_seq_len``
and the checkpoint's trained context) and only then reads the weights, so a prompt that does
not fit fails in the time the tokenizer takes, with one message naming it.

:func:`loop_progress` shows a loop as :class:`~fidia_jax.train.FitProgress` shows a fit (a live
``rich`` bar with the ETA on a terminal; plain lines in a log or a pipe, about ten over the loop):
the first item of a compiled loop is shown as ``compiling``, then ``i/total`` with the ETA. In a
log or a pipe it also prints a ``running`` line with the items done and the ETA whenever nothing
was printed for ``every_s`` seconds (default 8: a long compilation, a slow item), so that a run
is not silent for more than about 10 s while the interpreter can run the printing thread (a
loaded machine, or a long step that holds the GIL such as a pure-Python loop, can delay it). :func:`heartbeat` does the same for one long step (loading a checkpoint).
``FIDIA_QUIET=1`` silences all of it, as every stage.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.markup import escape

from fidia_jax._io import _err_console, stage

__all__ = ["LoopProgress", "heartbeat", "load_checked", "loop_progress"]


class LoopProgress:
    """The handle :func:`loop_progress` yields: call :meth:`advance` after each item."""

    def __init__(self, name: str, total: int, unit: str, every_s: float, compiles: bool):
        self.name, self.total, self.unit = name, int(total), unit
        self.every_s, self.compiles = float(every_s), bool(compiles)
        self.done = 0
        self._console = _err_console()
        self._t0 = time.perf_counter()
        self._t_first: float | None = None
        self._last_print = self._t0
        self._next_line = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bar = self._thread = None
        if self._console is None:
            return
        if self._console.is_terminal:  # a live bar: it refreshes itself (elapsed, ETA)
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn(f"{unit}(s)"), TimeElapsedColumn(), TextColumn("ETA"),
                TimeRemainingColumn(), console=self._console,
            )  # fmt: skip
            self._bar.start()
            first = ": compiling" if self.compiles else ""
            self._task = self._bar.add_task(escape(name) + first, total=max(self.total, 1))
            return
        first = ": compiling …" if self.compiles else f": 0/{self.total} {unit}(s) …"
        self._print(name + first, self._t0)
        if self.every_s > 0:  # a log or a pipe: a line at least every every_s seconds
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def _print(self, text: str, now: float) -> None:
        self._console.print(text, highlight=False, markup=False)
        self._last_print = now

    def _eta(self, now: float) -> str:
        # after a compiling first item the rate is measured from its end
        t_start, done = (self._t_first, self.done - 1) if self.compiles else (self._t0, self.done)
        if t_start is None or done < 1 or now <= t_start:
            return ""
        rate = done / (now - t_start)
        return f", ETA {(self.total - self.done) / rate:.0f} s" if rate > 0 else ""

    def advance(self, n: int = 1) -> None:
        """``n`` more items are done (with ``compiles``, the first call ends the compile phase)."""
        if self._console is None:
            return
        with self._lock:
            now = time.perf_counter()
            first = self._t_first is None
            if first:
                self._t_first = now
            self.done = min(self.done + int(n), self.total)
            if self._bar is not None:
                if first and self.compiles:
                    self._bar.update(
                        self._task,
                        description=f"{escape(self.name)} (compiled in {now - self._t0:.1f} s)",
                    )
                self._bar.update(self._task, completed=self.done)
                return
            if first and self.compiles:
                self._print(f"{self.name}: compiled in {now - self._t0:.1f} s", now)
            if now >= self._next_line or self.done >= self.total:
                self._print(
                    f"{self.name}: {self.done}/{self.total} {self.unit}(s), "
                    f"{now - self._t0:.0f} s{self._eta(now)}",
                    now,
                )
                # about ten lines over the loop, at least 2 s apart
                span = (now - self._t0) / max(self.done, 1) * self.total
                self._next_line = now + max(2.0, span / 10)

    def _run(self) -> None:
        while not self._stop.wait(min(1.0, self.every_s)):
            with self._lock:
                now = time.perf_counter()
                if now - self._last_print < self.every_s:
                    continue
                phase = "compiling" if self.compiles and self._t_first is None else "running"
                self._print(
                    f"{self.name}: {phase}, {self.done}/{self.total} {self.unit}(s) done, "
                    f"{now - self._t0:.0f} s{self._eta(now)}",
                    now,
                )

    def close(self, message: str | None = None) -> None:
        """Ends the display, printing ``name: message`` when given."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self._console is not None and message:
            self._console.print(f"{self.name}: {message}", highlight=False, markup=False)


@contextlib.contextmanager
def loop_progress(
    name: str, total: int, *, unit: str = "batch", every_s: float = 8.0, compiles: bool = True
) -> Iterator[LoopProgress]:
    """A progress bar over ``total`` items of a loop; yields a :class:`LoopProgress`.

    Example::

      with loop_progress("capturing activations", n_batches) as bar:
          for batch in batches:
              ...
              bar.advance()

    Args:
      name: shown first on every line.
      total: the items of the loop.
      unit: the items' name (``"batch"``, ``"layer"``).
      every_s: the longest silence in a log or a pipe (``<= 0``: no ``running`` lines).
      compiles: the first item compiles the loop's program (shown as ``compiling``, and the
        rate and ETA are measured after it); ``False`` for a loop of NumPy / SciPy work.

    Ends with ``name: i/total unit(s) done in N s`` (or nothing when quiet).
    """
    bar = LoopProgress(name, total, unit, every_s, compiles)
    t0 = time.perf_counter()
    try:
        yield bar
    finally:
        bar.close(f"{bar.done}/{bar.total} {unit}(s) done in {time.perf_counter() - t0:.1f} s")


@contextlib.contextmanager
def heartbeat(description: str, *, every_s: float = 8.0) -> Iterator[None]:
    """A ``description: still running, N s`` line every ``every_s`` seconds while the block runs
    (in a log, a pipe and on a terminal alike; nothing when quiet)."""
    from fidia_jax.train._threads import _heartbeat

    with _heartbeat(description, every_s):
        yield


def load_checked(
    path: str | os.PathLike,
    *,
    read: Callable[[Any], Sequence[str]] | Sequence[str] = (),
    generate: Callable[[Any], Sequence[str]] | Sequence[str] = (),
    max_new_tokens: int = 0,
    max_seq_len: int,
    where: str,
    what: str = "",
    labels: tuple[str, str] = ("text", "prompt"),
    hint: str = "",
) -> tuple[Any, Any]:
    """The tokenizer, then the texts' lengths checked, then the weights: ``(model, tokenizer)``.

    Three stages, each announced before it starts: the tokenizer
    (:func:`fidia_jax.models.load_tokenizer`); the check
    (:func:`fidia_jax.models.check_prompt_lengths`: every text the model reads, and every
    prompt plus ``max_new_tokens``, within the smaller of ``max_seq_len`` and the checkpoint's
    trained context); the weights (:func:`fidia_jax.models.load_gguf` for a ``.gguf`` path,
    else :func:`fidia_jax.models.load_hf_checkpoint`, as
    :func:`fidia_jax.models.load_lm_checkpoint` dispatches), with a ``still running`` line
    every 8 s.

    Args:
      path: a GGUF file or a Hugging Face model directory.
      read: the texts the model reads whole (teacher-forced), or a function of the tokenizer
        that returns them (for texts that depend on it).
      generate: the prompts it continues by ``max_new_tokens`` tokens (or such a function).
      max_new_tokens: tokens generated after each prompt of ``generate``.
      max_seq_len: the loaded model's ``max_seq_len`` (the run's ``checkpoint_max_seq_len``).
      where: the caller's name, first in an error message.
      what: the method's name, first on the stage lines.
      labels: how the message names a text of ``read`` and of ``generate`` (``"text 3"``).
      hint: appended to the message of a text too long (what to change in the run's config).

    Raises:
      CheckpointError: ``path`` does not exist (before anything loads), or what the loaders
        raise.
      DataError: a text (a prompt plus ``max_new_tokens``) longer than the limit; raised before
        any weight is read.
      ConfigError: an unsupported family or option.
    """
    from fidia_jax import models
    from fidia_jax.errors import CheckpointError, DataError

    p = os.fspath(path)
    if not os.path.exists(p):
        raise CheckpointError(
            f"{where}: checkpoint {p!r} does not exist (give a .gguf file or a Hugging Face "
            "model directory)"
        )
    head = f"{what}: " if what else ""
    with stage(f"{head}loading the tokenizer of {p}"):  # a still-running line every 8 s
        tok = models.load_tokenizer(p)
    groups = [
        (list(texts(tok) if callable(texts) else texts), new, label)
        for texts, new, label in ((read, 0, labels[0]), (generate, max_new_tokens, labels[1]))
    ]
    n = sum(len(g[0]) for g in groups)
    with stage(f"{head}checking {n} text(s) against the context before the weights load"):
        context = models.checkpoint_context_length(p)
        limit = int(max_seq_len) if context is None else min(int(max_seq_len), int(context))
        for texts, new, label in groups:
            try:
                models.check_prompt_lengths(
                    tok, texts, max_new_tokens=int(new), max_seq_len=limit, where=where,
                    names=[f"{label} {i}" for i in range(len(texts))],
                )  # fmt: skip
            except DataError as err:
                raise DataError(f"{err}{'; ' + hint if hint else ''}") from None
    with stage(f"{head}loading the weights of {p}"):
        if p.endswith(".gguf"):
            model = models.load_gguf(p, max_seq_len=max_seq_len)
        else:
            model = models.load_hf_checkpoint(p, max_seq_len=max_seq_len)
    return model, tok
