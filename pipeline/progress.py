"""Progress of long work (build cells, wheel test runs, crosscheck targets).

On a terminal a live table (``rich``) shows every item with its current step, elapsed time and
final status; anywhere else (CI logs, pipes, files) each event is one plain line::

    build (3 items)
    [core/default/linux-x86_64] building ...
    [core/default/linux-x86_64] auditwheel repair ...
    [core/default/linux-x86_64] built in 12.3s
    [dnnl/default/linux-x86_64] failed in 4.0s: wheel build: cmake exited with 1
    build: 1 built, 1 failed, 1 not finished in 16.3s

Usage::

    with Progress.open("build", [cell.id for cell in cells]) as progress:
        for cell in cells:
            progress.start(cell.id, "building")
            ...
            progress.step(cell.id, "auditwheel repair")
            ...
            progress.done(cell.id, "built")

or let :meth:`Progress.track` mark an item failed when its body raises.

The mode is decided once, when the display opens: ``MOSAICRT_PROGRESS=plain|live`` if set, else
live when the stream is a terminal and ``TERM`` is not ``dumb``. ``rich`` is imported only for the
live display, so plain mode works in environments that lack it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO

from .errors import UsageError, choices_hint

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

Mode = Literal["plain", "live"]
MODES: tuple[Mode, ...] = ("plain", "live")
ENV_VAR = "MOSAICRT_PROGRESS"

#: Final statuses shown as failures / as "nothing happened" (anything else is a success).
FAILED_STATUSES = frozenset({"failed", "fail", "error", "timeout", "unreadable"})
QUIET_STATUSES = frozenset({"skipped", "not run", "untested", "up-to-date", "up to date"})


def choose_mode(stream: TextIO, environ: Mapping[str, str] | None = None) -> Mode:
    """``MOSAICRT_PROGRESS`` when set; otherwise live on a terminal whose ``TERM`` is not ``dumb``."""
    env = os.environ if environ is None else environ
    override = env.get(ENV_VAR, "").strip().lower()
    if override:
        for mode in MODES:
            if override == mode:
                return mode
        raise UsageError(f"{ENV_VAR}={override!r} is not a progress mode{choices_hint(override, MODES)}")
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed or file-like streams without a terminal
        tty = False
    return "live" if tty and env.get("TERM", "") != "dumb" else "plain"


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s"


@dataclass(kw_only=True)
class _Item:
    name: str
    step: str = ""
    status: str | None = None  #: the final status, once done
    detail: str = ""
    started: float | None = None
    finished: float | None = None

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return (self.finished if self.finished is not None else now) - self.started


class Progress:
    """One display for a list of items; open it with :meth:`open`. Safe to call from several threads
    (the state is guarded by one lock, which is never held while rich renders)."""

    def __init__(
        self,
        title: str,
        items: Sequence[str],
        *,
        stream: TextIO,
        mode: Mode,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.title = title
        self.mode: Mode = mode
        self._stream = stream
        self._clock = clock
        self._lock = threading.RLock()
        self._items: dict[str, _Item] = {name: _Item(name=name) for name in items}
        self._opened = clock()
        self._console = console
        self._live: Live | None = None

    # ---------------------------------------------------------------------------------- lifecycle

    @classmethod
    @contextmanager
    def open(
        cls,
        title: str,
        items: Sequence[str],
        *,
        stream: TextIO | None = None,
        live: bool | None = None,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> Iterator[Progress]:
        """Show progress until the block ends, then print a one-line summary.

        ``stream`` defaults to the current ``sys.stdout``. ``live`` forces a mode (``None``: decide
        with :func:`choose_mode`). ``console`` is the rich console of the live display (default: one
        writing to ``stream``). Without ``rich`` installed, live mode falls back to plain lines.
        """
        out = stream if stream is not None else sys.stdout
        mode: Mode = choose_mode(out) if live is None else ("live" if live else "plain")
        if mode == "live" and console is None:
            try:
                from rich.console import Console
            except ImportError:
                mode = "plain"
            else:
                console = Console(file=out, force_terminal=True)
        progress = cls(title, items, stream=out, mode=mode, console=console, clock=clock)
        progress._begin()
        try:
            yield progress
        finally:
            progress._end()

    def _begin(self) -> None:
        if self.mode == "plain":
            n = len(self._items)
            self._say(f"{self.title} ({n} item{'' if n == 1 else 's'})")
            return
        from rich.live import Live

        self._live = Live(_Table(self), console=self._console, refresh_per_second=4, transient=False)
        self._live.start()

    def _end(self) -> None:
        if self._live is not None:
            self._live.stop()  # the final table stays on screen
            self._live = None
        self.note(self.summary())

    # ---------------------------------------------------------------------------------- events

    def start(self, item: str, step: str) -> None:
        """``item`` begins (its clock starts) with ``step``, e.g. "building". Unknown items are added."""
        with self._lock:
            it = self._item(item)
            it.started, it.finished, it.status, it.detail = self._clock(), None, None, ""
            it.step = step
        self._event(f"[{item}] {step} ...")

    def step(self, item: str, text: str) -> None:
        """``item`` moves on to another step (starting its clock if :meth:`start` was not called)."""
        with self._lock:
            it = self._item(item)
            if it.started is None:
                it.started = self._clock()
            it.step = text
        self._event(f"[{item}] {text} ...")

    def done(self, item: str, status: str, detail: str = "") -> float | None:
        """``item`` ended with ``status`` ("built", "failed", ...); returns its elapsed seconds (None if never
        started, e.g. a skipped cell)."""
        with self._lock:
            it = self._item(item)
            if it.started is not None:
                it.finished = self._clock()
            it.status, it.detail = status, detail
            elapsed = it.elapsed(self._clock())
        took = f" in {format_duration(elapsed)}" if elapsed is not None else ""
        self._event(f"[{item}] {status}{took}" + (f": {detail}" if detail else ""))
        return elapsed

    def note(self, line: str) -> None:
        """A free line (a log path, a warning) shown above the live table, or as is in plain mode."""
        if self.mode == "live" and self._console is not None:
            from rich.text import Text

            self._console.print(Text(line))  # above the live table while it runs
        else:
            self._say(line)

    @contextmanager
    def track(self, item: str, step: str, *, ok: str = "done") -> Iterator[None]:
        """:meth:`start` ``item``; if the block raises, the item is done as "failed" with the exception's
        message (and the exception goes on); if the block did not call :meth:`done`, it is done as ``ok``."""
        self.start(item, step)
        try:
            yield
        except BaseException as exc:
            self.done(item, "failed", str(exc) or type(exc).__name__)
            raise
        if self.status(item) is None:
            self.done(item, ok)

    # ---------------------------------------------------------------------------------- state

    def status(self, item: str) -> str | None:
        """The final status of ``item``, or None while it is not done."""
        with self._lock:
            it = self._items.get(item)
            return it.status if it is not None else None

    def summary(self) -> str:
        """``title: 2 built, 1 failed, 1 not finished in 30.1s``."""
        with self._lock:
            counts = Counter(it.status or "not finished" for it in self._items.values())
            total = format_duration(self._clock() - self._opened)
        parts = ", ".join(f"{n} {status}" for status, n in counts.items()) or "nothing to do"
        return f"{self.title}: {parts} in {total}"

    def _item(self, name: str) -> _Item:
        it = self._items.get(name)
        if it is None:
            it = self._items[name] = _Item(name=name)
        return it

    def _event(self, line: str) -> None:
        # Never called with self._lock held: the live refresh thread renders _Table, which takes it.
        live = self._live
        if live is not None:
            live.refresh()
        else:
            self._say(line)

    def _say(self, line: str) -> None:
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def _rows(self) -> list[tuple[str, str, float | None, str | None, str]]:
        """(item, step, elapsed, status, detail) for every item, in order."""
        with self._lock:
            now = self._clock()
            return [(it.name, it.step, it.elapsed(now), it.status, it.detail) for it in self._items.values()]


class _Table:
    """The live display: re-rendered from the progress state at every refresh (so elapsed times tick)."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def __rich__(self) -> RenderableType:
        from rich.spinner import Spinner
        from rich.table import Table
        from rich.text import Text

        table = Table(title=self._progress.title, title_justify="left", expand=False)
        table.add_column("item", no_wrap=True)
        table.add_column("step")
        table.add_column("elapsed", justify="right", no_wrap=True)
        table.add_column("status")
        for name, step, elapsed, status, detail in self._progress._rows():
            took = format_duration(elapsed) if elapsed is not None else ""
            shown: RenderableType
            if status is not None:
                style = "red" if status in FAILED_STATUSES else "dim" if status in QUIET_STATUSES else "green"
                shown = Text(status + (f": {detail}" if detail else ""), style=style)
            elif elapsed is not None:
                shown = Spinner("dots", text="running")
            else:
                shown = Text("waiting", style="dim")
            table.add_row(Text(name), Text(step), took, shown)
        return table
