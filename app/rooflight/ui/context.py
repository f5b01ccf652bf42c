"""What every page shares: the task runner, the machine, settings, messages, and the
hooks through which pages ask each other for things (download this, chat with that).

One AppContext per window, passed to every page's constructor:

    ctx.runner      TaskRunner: run core callables in workers (tasks.py)
    ctx.machine     MachineState: the HardwareProfile to plan for; `changed(profile)`
    ctx.settings    the saved Settings (store/settings.py); `settings_changed(settings)`
    ctx.actions     Actions: download_requested / chat_requested routing
    ctx.installed   InstalledModels: which (repo, file) are on disk, and where
    ctx.show_error(text) / show_warning / show_info: a banner at the top of the window
    ctx.show_page(key): switch the window to a page
    ctx.ui_state    QSettings for window geometry, splitters, last page
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, QSettings, Signal

from rooflight.errors import RooflightError
from rooflight.estimate import Wishes
from rooflight.store.settings import Settings, save_settings, validated
from rooflight.ui.state import MachineState
from rooflight.ui.tasks import TaskRunner

log = logging.getLogger(__name__)

DownloadHandler = Callable[[str, str], None]  # (repo, file in repo)
ChatHandler = Callable[[str, Wishes | None], None]  # (path of a local .gguf, settings or None)
InstalledProvider = Callable[[], Mapping[tuple[str, str], str]]


class Actions(QObject):
    """Requests that one page makes and another serves.

    The Models page emits download_requested(repo, file) / chat_requested(path, wishes);
    the window routes them here. The page that can serve them registers a handler (the
    Downloads page: set_download_handler(self.enqueue)); until one is registered the
    buttons are disabled with a tooltip. `changed` fires when a handler comes or goes.

    A chat request may carry the settings to plan the load with (an estimate.Wishes: the
    context, GPU layers, KV cache, flash attention, threads and batch sizes the model
    detail showed); None lets the Chat page plan its default.
    """

    changed = Signal()
    download_requested = Signal(str, str)
    chat_requested = Signal(str, object)  # path, Wishes or None

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._download: DownloadHandler | None = None
        self._chat: ChatHandler | None = None

    def set_download_handler(self, handler: DownloadHandler | None) -> None:
        self._download = handler
        self.changed.emit()

    def set_chat_handler(self, handler: ChatHandler | None) -> None:
        self._chat = handler
        self.changed.emit()

    @property
    def can_download(self) -> bool:
        return self._download is not None

    @property
    def can_chat(self) -> bool:
        return self._chat is not None

    def request_download(self, repo: str, file: str) -> bool:
        """Hand a download to its handler; False when none is registered."""
        if self._download is None:
            return False
        self.download_requested.emit(repo, file)
        self._download(repo, file)
        return True

    def request_chat(self, path: str, wishes: Wishes | None = None) -> bool:
        """Hand a chat with `path` (planned with `wishes`, if given) to its handler; False
        when none is registered."""
        if self._chat is None:
            return False
        self.chat_requested.emit(path, wishes)
        self._chat(path, wishes)
        return True


class InstalledModels(QObject):
    """GGUF files on disk, keyed by (Hub repo, file name in the repo) -> local path.

    Whoever knows (local discovery, a finished download) either calls set_files / add, or
    registers a provider (a plain callable returning that mapping) which refresh() runs in
    a worker. Pages follow `changed`.
    """

    changed = Signal()

    def __init__(self, runner: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._files: dict[tuple[str, str], str] = {}
        self._provider: InstalledProvider | None = None

    @property
    def files(self) -> Mapping[tuple[str, str], str]:
        return dict(self._files)

    def set_files(self, files: Mapping[tuple[str, str], str]) -> None:
        self._files = {(str(r), str(f)): str(p) for (r, f), p in files.items()}
        self.changed.emit()

    def add(self, repo: str, file: str, path: str | Path) -> None:
        self._files[(repo, file)] = str(path)
        self.changed.emit()

    def remove(self, repo: str, file: str) -> None:
        if self._files.pop((repo, file), None) is not None:
            self.changed.emit()

    def set_provider(self, provider: InstalledProvider | None) -> None:
        self._provider = provider
        self.refresh()

    def refresh(self) -> None:
        if self._provider is not None:
            self._runner.run(self._provider, on_done=self.set_files, what="looking for installed models")

    def path_for(self, repo: str, file: str) -> str | None:
        return self._files.get((repo, file))

    def quants_of(self, model) -> dict[str, str]:
        """quant -> local path for a catalog model, over all of its GGUF sources."""
        out: dict[str, str] = {}
        for source in model.gguf:
            for quant, file in source.files.items():
                path = self._files.get((source.repo, file))
                if path and quant not in out:
                    out[quant] = path
        return out

    def has_any(self, model) -> bool:
        return any((s.repo, f) in self._files for s in model.gguf for f in s.files.values())


class AppContext(QObject):
    message = Signal(str, str)  # kind (error | warning | info), one sentence
    settings_changed = Signal(object)  # the new Settings
    page_requested = Signal(str)  # page key
    theme_changed = Signal(object)  # theme.Colors now in use

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        ui_state: QSettings | None = None,
        settings_path: Path | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.runner = TaskRunner(self)
        self.machine = MachineState(self.runner, self)
        self.actions = Actions(self)
        self.installed = InstalledModels(self.runner, self)
        self.settings = settings or Settings()
        self._settings_path = settings_path
        if ui_state is None:
            from rooflight.store.paths import data_dir

            ui_state = QSettings(str(data_dir() / "window.ini"), QSettings.Format.IniFormat, self)
        self.ui_state = ui_state
        self.runner.error.connect(self.show_error)
        self._after_startup: list | None = None  # None: started (no gate armed)

    # -- start-up order -------------------------------------------------------------
    # A cold start shows the ranking first. Work no first screen needs (the download list,
    # the llama.cpp build card, the token's source) would compete with it for the GIL and
    # the CPU; app.main arms this gate, and the first ranking on screen (or a timer) opens it.
    def hold_startup_tasks(self) -> None:
        if self._after_startup is None:
            self._after_startup = []

    def after_startup(self, fn) -> None:
        """fn() now, or once the first screen is up when the app is starting."""
        if self._after_startup is None:
            fn()
        else:
            self._after_startup.append(fn)

    def startup_done(self) -> None:
        waiting, self._after_startup = self._after_startup, None
        for fn in waiting or ():
            fn()

    # -- messages -----------------------------------------------------------------
    def show_error(self, text: str) -> None:
        self.message.emit("error", text)

    def show_warning(self, text: str) -> None:
        self.message.emit("warning", text)

    def show_info(self, text: str) -> None:
        self.message.emit("info", text)

    def report(self, exc: BaseException, what: str = "") -> None:
        from rooflight.ui.tasks import error_sentence

        if not isinstance(exc, RooflightError):
            log.exception("while %s", what or "working", exc_info=exc)
        self.show_error(error_sentence(exc, what))

    # -- navigation ---------------------------------------------------------------
    def show_page(self, key: str) -> None:
        self.page_requested.emit(key)

    # -- settings -----------------------------------------------------------------
    def update_settings(self, **changes) -> bool:
        """Change and save settings (atomic write); errors become a banner. True if saved."""
        try:
            new = validated(replace(self.settings, **changes))
            if new == self.settings:
                return True
            save_settings(new, self._settings_path)
        except RooflightError as exc:
            self.show_error(str(exc))
            return False
        self.settings = new
        self.settings_changed.emit(new)
        return True

