"""The task runner: work on worker threads, outcomes on the GUI thread, progress that
cannot flood the event loop, streams that lose nothing, cancellation, error sentences."""

import threading
import time

import pytest

from rooflight.errors import BadInputError
from rooflight.ui.tasks import TaskCancelled, TaskRunner, error_sentence


@pytest.fixture
def runner(qtbot):
    r = TaskRunner()
    yield r
    r.shutdown()


def test_result_arrives_on_the_gui_thread(qtbot, runner):
    gui = threading.get_ident()
    seen = {}

    def work(x):
        seen["worker"] = threading.get_ident()
        return x * 2

    def done(result):
        seen["done_thread"] = threading.get_ident()
        seen["result"] = result

    with qtbot.waitSignal(runner.busy_changed, check_params_cb=lambda busy: not busy):
        runner.run(work, 21, on_done=done)
    assert seen["result"] == 42
    assert seen["worker"] != gui
    assert seen["done_thread"] == gui


def test_a_rooflight_error_becomes_its_own_sentence(qtbot, runner):
    def fail():
        raise BadInputError("The profile is malformed; fix line 3.")

    with qtbot.waitSignal(runner.error) as blocker:
        runner.run(fail)
    assert blocker.args == ["The profile is malformed; fix line 3."]


def test_an_unexpected_error_names_what_was_being_done(qtbot, runner, caplog):
    def fail():
        raise ZeroDivisionError("division by zero\nmore lines")

    with qtbot.waitSignal(runner.error) as blocker:
        runner.run(fail, what="ranking the models")
    assert blocker.args == ["Something went wrong while ranking the models (ZeroDivisionError: division by zero)."]
    assert "Traceback" in caplog.text  # the detail goes to the log, not to the user


def test_on_error_handler_replaces_the_banner(qtbot, runner):
    got = []
    errors = []
    runner.error.connect(errors.append)
    runner.run(lambda: 1 / 0, on_error=got.append)
    qtbot.waitUntil(lambda: bool(got))
    assert isinstance(got[0], ZeroDivisionError)
    assert errors == []


def test_progress_is_coalesced_and_ends_on_the_latest_value(qtbot, runner):
    calls = []

    def work(task):
        for i in range(20000):
            task.progress(i)
        return "done"

    results = []
    runner.run(work, with_task=True, on_progress=calls.append, on_done=results.append)
    qtbot.waitUntil(lambda: bool(results))
    assert calls, "progress was reported"
    assert len(calls) < 20000 / 10  # far fewer GUI callbacks than reports
    assert calls == sorted(calls)


def test_stream_delivers_every_item_in_order(qtbot, runner):
    got = []
    done = []

    def work(task):
        for i in range(3000):
            task.stream(i)
        return len(got)  # read on the worker: the GUI has not necessarily caught up

    runner.run(work, with_task=True, on_stream=got.append, on_done=done.append)
    qtbot.waitUntil(lambda: bool(done))
    assert got == list(range(3000))


def test_cancel_drops_the_result_and_calls_on_cancelled(qtbot, runner):
    started = threading.Event()
    release = threading.Event()
    done, cancelled = [], []

    def work(task):
        started.set()
        release.wait(5)
        task.raise_if_cancelled()
        return "late"

    task = runner.run(work, with_task=True, on_done=done.append, on_cancelled=lambda: cancelled.append(1))
    assert started.wait(5)
    task.cancel()
    release.set()
    qtbot.waitUntil(lambda: bool(cancelled))
    assert done == []
    assert task.cancelled and task.wait(1)


def test_a_result_of_a_cancelled_task_is_not_delivered(qtbot, runner):
    done, cancelled = [], []
    gate = threading.Event()
    task = runner.run(lambda: gate.wait(5) and "stale", on_done=done.append,
                      on_cancelled=lambda: cancelled.append(1))
    task.cancel()
    gate.set()
    qtbot.waitUntil(lambda: bool(cancelled))
    assert done == []


@pytest.mark.parametrize("with_handler", [True, False])
def test_a_cancelled_task_that_then_fails_ends_quietly(qtbot, runner, with_handler):
    # a Hub search replaced by a newer query: cancelled, then its request raises
    errors, banners, cancelled = [], [], []
    runner.error.connect(banners.append)
    started, gate = threading.Event(), threading.Event()

    def work():
        started.set()
        gate.wait(5)
        raise OSError("connection reset")

    task = runner.run(work, on_error=errors.append if with_handler else None,
                      on_cancelled=lambda: cancelled.append(1), what="searching the Hub")
    assert started.wait(5)  # running: the failure, not the cancellation, ends it
    task.cancel()
    gate.set()
    qtbot.waitUntil(lambda: bool(cancelled))
    assert runner.wait_idle()
    qtbot.wait(50)
    assert errors == [] and banners == [] and runner.active == 0


def test_shutdown_cancels_and_waits(qtbot):
    runner = TaskRunner()
    stopped = []

    def work(task):
        while not task.cancelled:
            time.sleep(0.005)
        stopped.append(True)

    runner.run(work, with_task=True)
    time.sleep(0.05)
    assert runner.shutdown(5000)
    assert stopped == [True]
    late = runner.run(lambda: 1)
    assert late.cancelled  # a closed runner starts nothing


def test_error_sentence():
    assert error_sentence(BadInputError("Bad file; pick another.")) == "Bad file; pick another."
    assert error_sentence(TaskCancelled()) == "Something went wrong (TaskCancelled)."
