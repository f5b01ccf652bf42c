"""The Downloads page's screenshot: real downloads, with no internet.

A screenshot of a download queue is only honest if the downloads are real, so this runs the
page's own DownloadQueue (resolve, resumable transfer, sha256 check, placement in a
Hugging Face cache) against the local Hub stand-in the test suite uses
(tests/hub_server.py, on 127.0.0.1), serving GGUF models generated on the spot. One file
finishes and is verified, one is paused part-way, one is refused (a gated repository, no
token), one is still arriving (the stand-in throttles it so speed and time left show).
A banner in the picture says so.

Source-tree tooling, not part of the installed package: bench/page_shots.py lists this shot
for the Downloads page of bench/screenshots.py.
huggingface_hub is pointed at the stand-in, at a temporary cache and at no token only while
the shot is prepared (the user's token is never sent), and everything is put back
afterwards (as tests/conftest.py does for the tests).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from shot import Shot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from hub_server import HubServer  # noqa: E402 - the test suite's Hub stand-in

REPO = "local-stand-in/tiny-llama-GGUF"
GATED = "local-stand-in/gated-llama-GGUF"
EXPLAIN = ("Screenshot: real downloads from a local Hub stand-in (tests/hub_server.py on 127.0.0.1, "
           "throttled) serving generated GGUF models, into a temporary cache.")


class _Staging:
    """The stand-in, the patched huggingface_hub settings, and how to put them back."""

    def __init__(self) -> None:
        import huggingface_hub
        import huggingface_hub.hf_api
        from huggingface_hub import constants

        self.tmp = Path(tempfile.mkdtemp(prefix="rooflight-downloads-shot-"))
        self.server = HubServer(self.tmp / "hub").start()
        url = self.server.url
        self._constants = constants
        self._api = huggingface_hub.hf_api.api
        patches = {
            "ENDPOINT": url,
            "HUGGINGFACE_CO_URL_TEMPLATE": url + "/{repo_id}/resolve/{revision}/{filename}",
            "HF_HUB_CACHE": str(self.tmp / "cache"),
            "HF_TOKEN_PATH": str(self.tmp / "token"),
            "HF_STORED_TOKENS_PATH": str(self.tmp / "stored_tokens"),
            "HF_HUB_OFFLINE": False,
        }
        self._saved = {k: getattr(constants, k) for k in patches if hasattr(constants, k)}
        for k, v in patches.items():
            if hasattr(constants, k):
                setattr(constants, k, v)
        self._saved_endpoint = self._api.endpoint
        self._api.endpoint = url
        self._env = {k: os.environ.pop(k) for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN") if k in os.environ}
        huggingface_hub.close_session()  # no pooled connection to the real Hub

    def restore(self) -> None:
        import huggingface_hub

        for k, v in self._saved.items():
            setattr(self._constants, k, v)
        self._api.endpoint = self._saved_endpoint
        os.environ.update(self._env)
        huggingface_hub.close_session()
        self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def downloads_shot(page) -> Shot:
    state: dict = {}

    def prepare(wait) -> None:
        from rooflight.download import JobState
        from rooflight.gguf.synthetic import write_model

        wait(lambda: page.queue is not None or not page.opening, 30)
        if page.queue is None:
            return  # the queue could not open: the page as it is
        staging = state["staging"] = _Staging()
        models = staging.tmp / "models"
        models.mkdir()
        small = write_model(models / "a.gguf", n_vocab=512, ftype="Q4_0", name="tiny-llama")
        middle = write_model(models / "b.gguf", n_layer=4, n_embd=256, n_ff=512, n_vocab=8000, ftype="F16",
                             name="tiny-llama")
        large = write_model(models / "c.gguf", n_layer=4, n_embd=512, n_ff=1536, n_vocab=16000, ftype="Q8_0",
                            name="tiny-llama")
        srv = staging.server
        srv.add_file(REPO, "tiny-llama-Q4_0.gguf", small)
        srv.add_file(REPO, "tiny-llama-F16.gguf", middle)
        srv.add_file(REPO, "tiny-llama-Q8_0.gguf", large)
        srv.add_file(GATED, "gated-llama-Q4_0.gguf", small)
        srv.require_token(GATED, "a-token-this-machine-does-not-have")
        srv.throttle(f"{REPO}/tiny-llama-F16.gguf", 2_000_000)
        srv.throttle(f"{REPO}/tiny-llama-Q8_0.gguf", 3_000_000)

        state["chat"] = page.chat_when_done.isChecked()
        page.chat_when_done.setChecked(False)  # stay on this page
        ids = state["ids"] = []

        def job(i):
            return page.rows[i].job

        ids.append(page.enqueue(REPO, "tiny-llama-Q4_0.gguf"))
        wait(lambda: job(ids[0]).state == JobState.DONE, 30)
        ids.append(page.enqueue(REPO, "tiny-llama-F16.gguf"))
        wait(lambda: (p := job(ids[1]).progress) is not None and p.total_bytes > 0
             and p.done_bytes > 0.4 * p.total_bytes, 30)
        page.pause(ids[1])
        wait(lambda: job(ids[1]).state == JobState.PAUSED, 30)
        ids.append(page.enqueue(GATED, "gated-llama-Q4_0.gguf"))
        wait(lambda: job(ids[2]).state == JobState.FAILED, 30)
        ids.append(page.enqueue(REPO, "tiny-llama-Q8_0.gguf"))
        # long enough for a steady speed and a time left
        wait(lambda: (p := job(ids[3]).progress) is not None and p.total_bytes > 0
             and p.done_bytes > 0.3 * p.total_bytes and p.eta_s is not None, 30)
        page.ctx.show_info(EXPLAIN)

    def after(wait) -> None:
        staging = state.get("staging")
        if staging is None:
            return
        try:
            for i in state["ids"]:
                if i is not None and page.queue is not None:
                    page.cancel(i, remove_partial=True)
            if page.queue is not None:
                wait(lambda: page.queue.wait_idle(0) and not page.queue.store.pending(), 30)
                for i in state["ids"]:
                    page.forget(i)
            page.ctx.installed.remove(REPO, "tiny-llama-Q4_0.gguf")
            page.chat_when_done.setChecked(state["chat"])
        finally:
            staging.restore()

    return Shot("downloads.png", prepare, after)
