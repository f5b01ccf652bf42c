"""The machine every page plans for: the detected HardwareProfile, or a what-if variant.

One MachineState per window. Pages read `profile` and follow `changed`; whoever changes
the machine (detection finishing, the what-if selector) goes through this object, so
every estimate in the app follows at once.
"""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, Signal

from rooflight.estimate import Calibration
from rooflight.hardware import HardwareProfile
from rooflight.ui.tasks import TaskRunner
from rooflight.ui.whatif import WhatIf, what_if_profile

log = logging.getLogger(__name__)


def detect_machine() -> tuple[HardwareProfile, Calibration | None]:
    """Worker side of detection: the profile (RAM bandwidth measured once, then cached)
    and the calibration measured on this machine, if any."""
    from rooflight.hardware import detect
    from rooflight.ui.tasks import full_gc_paused

    with full_gc_paused():  # imports and probes allocate a lot: no full collection meanwhile
        profile = detect()
    try:
        from rooflight.store.calibration import machine_calibration

        calibration = machine_calibration(profile)  # with this machine's probe, if current
    except Exception as exc:  # a broken calibration file must not hide the machine
        log.warning("calibration not read: %s", exc)
        calibration = None
    return profile, calibration


class MachineState(QObject):
    """`changed(profile)` fires when the effective machine changes (detected or what-if)."""

    changed = Signal(object)
    detecting_changed = Signal(bool)

    def __init__(self, runner: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self.detected: HardwareProfile | None = None
        self.what_if = WhatIf()
        self._what_if_profile: HardwareProfile | None = None
        self._calibration: Calibration | None = None
        self.detecting = False
        self.detect_seconds: float | None = None

    # -- reading -------------------------------------------------------------------
    @property
    def profile(self) -> HardwareProfile | None:
        """The machine to plan for now (None until detection ends)."""
        return self._what_if_profile or self.detected

    @property
    def is_what_if(self) -> bool:
        return self._what_if_profile is not None

    @property
    def calibration(self) -> Calibration | None:
        """Measurements describe this machine only: none for a what-if machine."""
        return None if self.is_what_if else self._calibration

    # -- changing ------------------------------------------------------------------
    def detect(self) -> None:
        """Detect this machine in a worker; `changed` fires when it is known."""
        if self.detecting:
            return
        self.detecting = True
        self.detecting_changed.emit(True)
        started = time.perf_counter()

        def done(result) -> None:
            self.detect_seconds = time.perf_counter() - started
            self._finish_detect()
            profile, calibration = result
            self.set_detected(profile, calibration)

        self._runner.run(detect_machine, on_done=done, on_cancelled=self._finish_detect,
                         on_error=self._detect_failed, what="detecting this machine")

    def _finish_detect(self) -> None:
        self.detecting = False
        self.detecting_changed.emit(False)

    def _detect_failed(self, exc: BaseException) -> None:
        from rooflight.ui.tasks import error_sentence

        self._finish_detect()
        self._runner.error.emit(error_sentence(exc, "detecting this machine"))

    def set_detected(self, profile: HardwareProfile, calibration: Calibration | None = None) -> None:
        self.detected = profile
        self._calibration = calibration
        if not self.what_if.is_empty:
            self._what_if_profile = what_if_profile(profile, self.what_if)
        self.changed.emit(self.profile)

    def set_calibration(self, calibration: Calibration | None) -> None:
        """New measurements of this machine (a probe, a bench): every estimate follows."""
        self._calibration = calibration
        self.changed.emit(self.profile)

    def set_what_if(self, what: WhatIf) -> None:
        """Plan for a changed machine (BadInputError if the table has no such GPU)."""
        if self.detected is None:
            self.what_if = what
            return
        new = None if what.is_empty else what_if_profile(self.detected, what)
        self.what_if = what
        self._what_if_profile = new
        self.changed.emit(self.profile)

    def clear_what_if(self) -> None:
        self.set_what_if(WhatIf())
