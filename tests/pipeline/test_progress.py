"""Progress display: exact plain lines for logs, a live rich table on a terminal, and the mode choice."""

from __future__ import annotations

import io
import re
import threading

import pytest
from rich.console import Console

from pipeline.errors import UsageError
from pipeline.progress import ENV_VAR, Progress, choose_mode, format_duration

CELLS = ("core/default/linux-x86_64", "dnnl/default/linux-x86_64", "core/winml/linux-x86_64")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Stream(io.StringIO):
    def __init__(self, *, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _build(progress: Progress, clock: Clock) -> None:
    """A build of three cells: one built, one failed, one skipped without starting."""
    core, dnnl, winml = CELLS
    progress.start(core, "building")
    clock.now += 10.0
    progress.step(core, "auditwheel repair")
    clock.now += 2.34
    assert progress.done(core, "built") == pytest.approx(12.34)
    progress.note("log: build/pipeline/logs/core-default-linux-x86_64.log")
    progress.start(dnnl, "building")
    clock.now += 4.0
    progress.done(dnnl, "failed", "wheel build: cmake exited with 1")
    assert progress.done(winml, "skipped", "planned") is None
    clock.now += 0.5


def test_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    out, clock = Stream(tty=False), Clock()
    with Progress.open("build", CELLS, stream=out, clock=clock) as progress:
        assert progress.mode == "plain"
        _build(progress, clock)
    assert out.getvalue().splitlines() == [
        "build (3 items)",
        "[core/default/linux-x86_64] building ...",
        "[core/default/linux-x86_64] auditwheel repair ...",
        "[core/default/linux-x86_64] built in 12.3s",
        "log: build/pipeline/logs/core-default-linux-x86_64.log",
        "[dnnl/default/linux-x86_64] building ...",
        "[dnnl/default/linux-x86_64] failed in 4.0s: wheel build: cmake exited with 1",
        "[core/winml/linux-x86_64] skipped: planned",
        "build: 1 built, 1 failed, 1 skipped in 16.8s",
    ]


def test_plain_summary_counts_unfinished_and_added_items() -> None:
    out, clock = Stream(tty=False), Clock()
    with Progress.open("test", ["a"], stream=out, live=False, clock=clock) as progress:
        progress.start("b", "pytest on 3.12")  # not declared up front: added
        clock.now += 61.0
        progress.done("b", "passed")
    assert out.getvalue().splitlines() == [
        "test (1 item)",
        "[b] pytest on 3.12 ...",
        "[b] passed in 1m01s",
        "test: 1 not finished, 1 passed in 1m01s",
    ]


def test_track_marks_failures_and_successes() -> None:
    out, clock = Stream(tty=False), Clock()
    with Progress.open("crosscheck", ["x", "y", "z"], stream=out, live=False, clock=clock) as progress:
        with pytest.raises(RuntimeError, match="qemu died"), progress.track("x", "native tests"):
            clock.now += 1.0
            raise RuntimeError("qemu died")
        with progress.track("y", "build", ok="pass"):
            clock.now += 2.0
        with progress.track("z", "build"):
            progress.done("z", "fail", "machine type")
        assert [progress.status(i) for i in ("x", "y", "z")] == ["failed", "pass", "fail"]
    lines = out.getvalue().splitlines()
    assert "[x] failed in 1.0s: qemu died" in lines
    assert "[y] pass in 2.0s" in lines
    assert "[z] fail in 0.0s: machine type" in lines
    assert sum(line.startswith("[z] fail") for line in lines) == 1


def test_the_summary_is_printed_when_the_block_raises() -> None:
    out = Stream(tty=False)
    with pytest.raises(KeyboardInterrupt), Progress.open("build", ["a"], stream=out, live=False) as progress:
        progress.start("a", "building")
        raise KeyboardInterrupt
    assert out.getvalue().splitlines()[-1].startswith("build: 1 not finished in ")


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_live_table() -> None:
    clock = Clock()
    console = Console(file=io.StringIO(), force_terminal=True, width=120, color_system="standard")
    out = Stream(tty=False)
    with Progress.open("build", CELLS, stream=out, live=True, console=console, clock=clock) as progress:
        assert progress.mode == "live"
        _build(progress, clock)
    assert out.getvalue() == ""  # everything went to the console
    raw = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b[" in raw  # a terminal rendering (colours, cursor movement), not plain lines
    text = ANSI.sub("", raw)
    # the final frame (after the last redraw) shows every item with its final status and time
    before_summary = text[: text.rindex("build: 1 built")]
    final = before_summary[before_summary.rindex("┏") :]
    assert "core/default/linux-x86_64" in final and "built" in final and "12.3s" in final
    assert "dnnl/default/linux-x86_64" in final and "failed: wheel build: cmake exited with 1" in final
    assert "core/winml/linux-x86_64" in final and "skipped: planned" in final
    assert "running" not in final and "waiting" not in final
    assert "log: build/pipeline/logs/core-default-linux-x86_64.log" in text
    assert text.rstrip().splitlines()[-1] == "build: 1 built, 1 failed, 1 skipped in 16.8s"
    assert "\x1b[31m" in raw  # the failed status is red


def test_live_table_while_running() -> None:
    """Before items finish the table says which run and which wait, with their elapsed time."""
    clock = Clock()
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with Progress.open("test", ["one", "two"], live=True, console=console, clock=clock) as progress:
        progress.start("one", "pytest on 3.13")
        clock.now += 3.0
        console.file = io.StringIO()  # keep only what the next refresh draws
        progress.step("one", "pytest on 3.14")
        frame = ANSI.sub("", console.file.getvalue())
        assert "pytest on 3.14" in frame and "3.0s" in frame and "running" in frame
        assert re.search(r"two\s.*waiting", frame)
        progress.done("one", "passed")
        progress.done("two", "passed")


def test_live_is_thread_safe() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    names = [f"cell-{i}" for i in range(16)]
    with Progress.open("build", names, live=True, console=console) as progress:

        def work(name: str) -> None:
            progress.start(name, "building")
            progress.step(name, "repair")
            progress.note(f"{name} log")
            progress.done(name, "built")

        threads = [threading.Thread(target=work, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads), "a progress call deadlocked"
    assert [progress.status(n) for n in names] == ["built"] * len(names)


@pytest.mark.parametrize(
    ("tty", "env", "mode"),
    [
        (True, {"TERM": "xterm-256color"}, "live"),
        (True, {}, "live"),
        (True, {"TERM": "dumb"}, "plain"),
        (False, {"TERM": "xterm"}, "plain"),
        (False, {ENV_VAR: "live"}, "live"),
        (True, {ENV_VAR: "plain", "TERM": "xterm"}, "plain"),
        (True, {ENV_VAR: " Plain "}, "plain"),
    ],
)
def test_choose_mode(tty: bool, env: dict[str, str], mode: str) -> None:
    assert choose_mode(Stream(tty=tty), env) == mode


def test_unknown_mode_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"MOSAICRT_PROGRESS='lve' is not a progress mode.*live"):
        choose_mode(Stream(tty=True), {ENV_VAR: "lve"})


def test_closed_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    stream.close()
    assert choose_mode(stream, {}) == "plain"


def test_environment_decides_when_live_is_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "live")
    out = Stream(tty=False)
    with Progress.open("x", ["a"], stream=out) as progress:
        assert progress.mode == "live"
        progress.done("a", "built")
    assert "built" in ANSI.sub("", out.getvalue())  # rich drew on the stream itself


@pytest.mark.parametrize(("seconds", "text"), [(0, "0.0s"), (12.34, "12.3s"), (59.9, "59.9s"), (125.4, "2m05s")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
