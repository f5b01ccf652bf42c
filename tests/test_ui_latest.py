"""ui.latest.LatestTask: debounce, cancel the older task, run, only when visible."""

import threading

import pytest
from PySide6.QtWidgets import QWidget

from rooflight.ui.latest import LatestTask
from rooflight.ui.tasks import TaskRunner


@pytest.fixture
def runner(qtbot):
    r = TaskRunner()
    yield r
    r.shutdown()


def test_requests_in_a_burst_run_once_and_only_the_newest_result_lands(qtbot, runner):
    owner = QWidget()
    qtbot.addWidget(owner)
    starts, landed = [], []
    release = threading.Event()

    def slow(n):
        if n == 0:
            release.wait(5)  # the first run is still working when the second replaces it
        return n

    def start():
        starts.append(len(starts))
        latest.run(slow, starts[-1], on_done=landed.append, what="testing")

    latest = LatestTask(owner, runner, start, debounce_ms=30)
    for _ in range(5):
        latest.request()  # a slider moving: one run after it stops
    qtbot.waitUntil(lambda: starts == [0], timeout=2000)
    first = latest.task
    latest.request()
    qtbot.waitUntil(lambda: len(starts) == 2, timeout=2000)
    assert first.cancelled
    release.set()
    qtbot.waitUntil(lambda: not latest.busy, timeout=5000)
    runner.wait_idle()
    qtbot.wait(50)
    assert landed == [1] and latest.task is None


def test_when_visible_a_hidden_owner_waits_for_its_show_event(qtbot, runner):
    owner = QWidget()
    qtbot.addWidget(owner)
    starts = []
    latest = LatestTask(owner, runner, lambda: starts.append(1), debounce_ms=0, when_visible=True)
    latest.request()
    qtbot.wait(50)
    assert starts == []
    owner.show()
    latest.request()
    qtbot.waitUntil(lambda: starts == [1], timeout=2000)


def test_a_failure_without_on_error_is_the_runners_banner(qtbot, runner):
    owner = QWidget()
    qtbot.addWidget(owner)
    latest = LatestTask(owner, runner)

    def fail():
        raise ValueError("boom")

    with qtbot.waitSignal(runner.error, timeout=5000) as sig:
        latest.run(fail, what="testing the helper")
    assert "while testing the helper" in sig.args[0] and not latest.running
