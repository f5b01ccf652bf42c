"""The model detail's 'Check with llama.cpp': the real no-alloc check of the plan shown, for a
catalog quant served by the local Hub stand-in (header read remotely, nothing downloaded)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gemma_model import gemma_270m_path
from rooflight.runtime import noalloc_worker
from test_ui_support import cpu_box, make_window, wait_ranked

pytestmark = pytest.mark.skipif(not noalloc_worker.breakdown_abi_supported(),
                                reason="llama.cpp's memory breakdown is read on Linux x86-64 only")
REPO, FILE = "bartowski/google_gemma-3-270m-it-GGUF", "google_gemma-3-270m-it-Q4_K_M.gguf"


def _this_machine():
    hw = cpu_box()
    return replace(hw, cpu=replace(hw.cpu, ram_bandwidth_source="measured"))


@pytest.mark.slow
def test_detail_asks_llama_cpp_before_the_download(qtbot, hub_server):
    hub_server.add_file(REPO, FILE, gemma_270m_path())
    window = make_window(qtbot, _this_machine())
    page = wait_ranked(qtbot, window)
    assert page.select_model("gemma-3-270m")
    detail = page.detail
    qtbot.waitUntil(lambda: detail.estimate is not None)
    detail.select_quant("Q4_K_M")
    row = detail.confirm_row
    assert row.button.isEnabled() and row.text.text() == ""
    hub_server.reset_counters()
    row.button.click()
    qtbot.waitUntil(lambda: not row.busy, timeout=60000)
    assert row.text.text().startswith("llama.cpp confirms: "), row.text.text()
    assert "of RAM (" in row.text.text()
    assert sum(hub_server.bytes_served.values()) < 20 * 2**20  # the header, not the 250 MB of weights
    # another context is another plan: the answer was for the old one
    with qtbot.waitSignal(detail.replanned, timeout=10000):
        detail.set_context(4096)
    assert row.text.text() == ""


def test_not_for_a_what_if_machine_or_a_profile(qtbot):
    window = make_window(qtbot, cpu_box())  # a profile, as with --hardware FILE
    page = wait_ranked(qtbot, window)
    page.select_model("gemma-3-270m")
    detail = page.detail
    qtbot.waitUntil(lambda: detail.estimate is not None)
    assert not detail.confirm_row.button.isEnabled()
    assert "only check plans for this machine" in detail.confirm_row.button.toolTip()
