"""The training progress bar: drawn on a terminal and in a Jupyter kernel, silent
elsewhere, cheap between redraws, and right about a resumed run."""

import io
import textwrap

import jax
import pytest

import geomlearn as gl
import geomlearn._progress as progress
from geomlearn._progress import ProgressBar


class Terminal(io.StringIO):
    """A text stream that says it is a TTY."""

    def isatty(self):
        return True


class Clock:
    """Stands in for `time.perf_counter` in the progress module."""

    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress.time, "perf_counter", clock)
    return clock


def run(bar, clock, epochs, *, step=1.0, loss=lambda e: 1.0 / e, val=None):
    for epoch in epochs:
        bar.update(epoch, loss(epoch), None if val is None else val(epoch))
        clock.now += step
    bar.close()


def test_a_terminal_gets_a_bar_with_the_losses_and_the_rate(clock):
    term = Terminal()
    run(ProgressBar(4, stream=term), clock, [1, 2, 3, 4], step=0.5, val=lambda e: 0.25)
    text = term.getvalue()
    assert "epoch 1/4" in text and "epoch 4/4" in text and "100%" in text
    assert "loss 2.500e-01" in text and "val 2.500e-01" in text
    assert "2.0 epochs/s" in text  # 3 epochs in 1.5 s after the first update
    assert text.endswith("\n")


def test_disabled_or_not_interactive_writes_nothing(clock, capsys):
    on_a_tty_but_disabled = Terminal()
    run(ProgressBar(3, stream=on_a_tty_but_disabled, enabled=False), clock, [1, 2, 3])
    assert on_a_tty_but_disabled.getvalue() == ""

    a_file = io.StringIO()  # isatty() is False
    run(ProgressBar(3, stream=a_file), clock, [1, 2, 3])
    assert a_file.getvalue() == ""

    bar = ProgressBar(3)  # stderr is pytest's capture: not a TTY, and no kernel
    run(bar, clock, [1, 2, 3])
    assert not bar.enabled
    assert capsys.readouterr().err == ""


def test_a_resumed_run_starts_at_its_epoch_and_rates_only_its_own_epochs(clock):
    term = Terminal()
    run(ProgressBar(100, stream=term), clock, [51, 52, 53], step=0.5)
    text = term.getvalue()
    assert "epoch 51/100" in text and "epoch 53/100" in text and " 53%" in text
    assert "epoch 1/100" not in text
    # 2 epochs in 1 s since the first update; 47 epochs left at that pace.
    assert "2.0 epochs/s" in text and "00:23 left" in text


def test_updates_between_redraws_cost_no_drawing(clock):
    term = Terminal()
    bar = ProgressBar(10, stream=term)
    for epoch in range(1, 10):  # nine epochs within 0.09 s
        bar.update(epoch, 1.0, None)
        clock.now += 0.01
    text = term.getvalue()
    assert "epoch 1/10" in text and "epoch 5/10" not in text and "epoch 9/10" not in text
    bar.update(10, 0.5, None)  # the last epoch is always drawn
    assert "epoch 10/10" in term.getvalue()
    bar.close()

    term = Terminal()
    bar = ProgressBar(10, stream=term)
    for epoch in (1, 2, 3):  # interrupted early: close shows where it stopped
        bar.update(epoch, 1.0 / epoch, None)
        clock.now += 0.01
    assert "epoch 3/10" not in term.getvalue()
    bar.close()
    assert "epoch 3/10" in term.getvalue() and "loss 3.333e-01" in term.getvalue()
    bar.close()  # a second close is harmless


def test_slow_epochs_are_given_in_seconds_per_epoch(clock):
    term = Terminal()
    run(ProgressBar(3, stream=term), clock, [1, 2, 3], step=4.0)
    assert "4.0 s/epoch" in term.getvalue()


@pytest.mark.slow
def test_a_notebook_shows_the_bar():
    """In a Jupyter kernel stderr is not a TTY, yet the bar is shown: a widget when
    ipywidgets is installed, a text bar on the kernel's stderr otherwise."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    code = textwrap.dedent(
        """
        import sys
        from geomlearn._progress import ProgressBar
        assert not sys.stderr.isatty()
        bar = ProgressBar(5)
        for epoch in range(1, 6):
            bar.update(epoch, 1.0 / epoch, None)
        bar.close()
        print("enabled", bar.enabled)
        """
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    stdout = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    widget = "application/vnd.jupyter.widget-view+json"
    widgets = [o for o in outputs if widget in o.get("data", {})]
    assert "enabled True" in stdout
    assert widgets or ("epoch 5/5" in stderr and "loss 2.000e-01" in stderr)


# ------------------------------------------------------------- the option fit(progress=)


def test_progress_is_an_option_object_and_the_bools_are_shorthands():
    assert progress.progress_from(True) == progress.TqdmProgress()
    assert progress.progress_from(False) == progress.NoProgress()
    chosen = progress.TqdmProgress(stream=Terminal(), width=10)
    assert progress.progress_from(chosen) is chosen
    for bad in (None, 1, "yes"):
        with pytest.raises(TypeError, match="progress must be a bool or a progress option"):
            progress.progress_from(bad)
    assert isinstance(progress.TqdmProgress().start(3), ProgressBar)


class Recording(progress.AbstractProgress):
    """A progress option that records the runs it starts (and draws nothing)."""

    started: list

    def start(self, total):
        self.started.append(total)
        return ProgressBar(total, enabled=False)


def test_fit_reports_through_the_option_it_is_given(key):
    """`fit` starts the option it is given once, for the planned epochs:
    `TqdmProgress(stream=...)` draws on that terminal, and on a stream that is not a
    terminal nothing (the negative control); a wrong value fails before training."""
    x = jax.random.normal(key(), (8, 2))
    y = x + 0.1
    model = gl.ResNet(2, width=2, depth=1, key=key())
    recording = Recording(started=[])
    gl.fit(model, (x, y), epochs=3, key=key(), progress=recording)
    assert recording.started == [3]
    term = Terminal()
    gl.fit(model, (x, y), epochs=3, key=key(), progress=gl.TqdmProgress(stream=term))
    assert "epoch 3/3" in term.getvalue()
    a_file = io.StringIO()
    gl.fit(model, (x, y), epochs=3, key=key(), progress=gl.TqdmProgress(stream=a_file))
    assert a_file.getvalue() == ""
    with pytest.raises(TypeError, match="progress must be a bool"):
        gl.fit(model, (x, y), epochs=1, key=key(), progress="bar")
