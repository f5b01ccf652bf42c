"""This machine: real detection in a worker, cards, plain-word warnings, and the what-if
selector whose machine every estimate in the app follows."""

import pytest

from rooflight.catalog.models import find_model
from rooflight.errors import BadInputError
from rooflight.estimate import Wishes, plan
from rooflight.hardware import gpu_table
from rooflight.ui.pages.machine import BACKEND_WORDS
from rooflight.ui.whatif import WhatIf, table_gpu_names, what_if_profile
from test_ui_support import GiB, cpu_box, make_window, profile, wait_ranked


def test_real_detection_fills_the_cards(qtbot):
    window = make_window(qtbot)
    page = window.page("machine")
    assert page.ctx.machine.profile is None and page.busy.parent() is not None
    with qtbot.waitSignal(window.ctx.machine.changed, timeout=30000) as blocker:
        window.ctx.machine.detect()
    detected = blocker.args[0]
    qtbot.waitUntil(lambda: page._build is not None)
    cards = page.cards()
    assert len(cards) == len(detected.gpus) + 2  # GPUs, the CPU, the llama.cpp build
    assert cards[-1].heading.text() == "llama.cpp"
    build = {w.accessibleName(): w.text() for w in cards[-1].findChildren(type(cards[-1].heading))}
    from rooflight.hardware.backend import inspect_build

    installed = inspect_build()  # this machine's llama-cpp-python, whatever it is
    assert build["Build"] == ("CPU-only build" if not installed.backends else
                              "GPU build: " + ", ".join(BACKEND_WORDS[b] for b in sorted(installed.backends)))
    assert build["GPU offload"] == {True: "yes", False: "no", None: "not reported"}[installed.gpu_offload]
    cpu = cards[-2]
    assert cpu.heading.text() == f"CPU · {detected.cpu.name}"
    assert f"{detected.cpu.cores} cores" in cpu.subtitle.text()
    assert detected.cpu.name in window.machine_line.text()
    # the ranking follows detection, with no click
    models = wait_ranked(qtbot, window)
    assert models.model.rows


def test_gpu_card_and_plain_warnings(qtbot):
    gpus = [{"name": "RTX 3060", "vram_total_bytes": 12 * GiB, "vram_free_bytes": 3 * GiB}]
    cpu_build = ("llama-cpp-python here is a CPU-only build, so llama.cpp will not use the NVIDIA GPU "
                 "(RTX 3060); install a GPU build with: CMAKE_ARGS=\"-DGGML_CUDA=on\" pip install ...")
    hw = profile(gpus, backend="cpu", warnings=[cpu_build])
    window = make_window(qtbot, hw)
    page = window.page("machine")
    gpu_card, cpu_card = page.cards()[:2]
    assert gpu_card.heading.text() == "GPU 0 · RTX 3060"
    texts = [n.text.text() for n in page._content.findChildren(type(page.what_if_note)) if n.isVisibleTo(page)]
    assert any(t.startswith("Llama-cpp-python here is a CPU-only build") for t in texts)
    assert any(t.startswith("Other programs are using 9.7 GB of GPU 0's memory (RTX 3060)") for t in texts)
    values = {w.accessibleName(): w.text() for w in gpu_card.findChildren(type(gpu_card.heading))}
    assert values["Bandwidth"] == "360 GB/s"
    assert values["llama.cpp backend"] == "CPU only"


def test_the_backend_row_names_an_fp32_sycl_build(qtbot):
    hw = profile([{"name": "Intel Arc Pro B60"}], backend="sycl", sycl_f16=False)
    window = make_window(qtbot, hw)
    gpu_card, cpu_card = window.page("machine").cards()[:2]
    values = {w.accessibleName(): w.text() for w in gpu_card.findChildren(type(gpu_card.heading))}
    assert values["llama.cpp backend"] == "SYCL, FP32 build (GGML_SYCL_F16 off)"
    assert values["Prompts at"] == "12.3 TFLOPS FP32 (this build)"  # gpus.json fp32_tflops


def test_the_cpu_card_says_where_llama_cpp_keeps_weights_on_an_amx_cpu(qtbot):
    from dataclasses import replace

    base = cpu_box()
    for amx_weights, shown in ((True, "weights packed there"), (False, "not used"), (None, None)):
        hw = replace(base, cpu=replace(base.cpu, amx_weights=amx_weights))
        window = make_window(qtbot, hw)
        cpu_card = window.page("machine").cards()[0]
        values = {w.accessibleName(): w.text() for w in cpu_card.findChildren(type(cpu_card.heading))}
        assert (values["AMX buffer"].startswith(shown) if shown else "AMX buffer" not in values)


def test_what_if_a_4090_makes_the_top_models_full_gpu(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    models = wait_ranked(qtbot, window)
    before = {r.model.id: r for r in models.visible_rows()}
    assert all(r.fit != "full_gpu" for r in before.values())
    machine = window.page("machine")
    with qtbot.waitSignal(models.ranked, timeout=30000):
        machine.gpu_combo.setCurrentIndex(machine.gpu_combo.findData("NVIDIA GeForce RTX 4090"))
    assert window.ctx.machine.is_what_if
    top = models.visible_rows()[:5]
    assert all(r.fit == "full_gpu" for r in top)
    for r in top:
        if r.model.id in before and before[r.model.id].fit != "too_large":
            assert r.best.estimate.performance.decode_tok_s > before[r.model.id].best.estimate.performance.decode_tok_s
    assert window.machine_line.text() == "What if: RTX 4090"
    assert machine.heading.text() == "What if" and machine.reset_button.isEnabled()
    assert "ranked for what if: RTX 4090 at 8K context" in models.status.text()
    assert window.ctx.machine.calibration is None  # this machine's measurements do not apply
    # back to the detected machine
    with qtbot.waitSignal(models.ranked, timeout=30000):
        machine.reset_what_if()
    assert not window.ctx.machine.is_what_if
    assert [r.model.id for r in models.visible_rows()] == list(before)


def test_what_if_lists_gpus_by_vendor_then_kind_then_number():
    """The pick list reads as a buyer scans it, whatever order the table file grew in."""
    names = table_gpu_names()
    assert sorted(names) == sorted(g["name"] for g in gpu_table())  # every entry, once
    vendors = [n.split()[0] for n in names]
    assert vendors.index("AMD") > vendors.index("NVIDIA") and vendors.index("Apple") > vendors.index("Intel")
    at = names.index
    assert at("NVIDIA GeForce GTX 1080 Ti") < at("NVIDIA GeForce RTX 2060") < at("NVIDIA GeForce RTX 4060") \
        < at("NVIDIA GeForce RTX 4060 Ti") < at("NVIDIA GeForce RTX 4070") < at("NVIDIA RTX A6000") < at("NVIDIA H100 SXM")
    # the TITANs with the desktop cards, the Quadros with the workstation ones
    assert at("NVIDIA GeForce RTX 5090") < at("NVIDIA TITAN RTX") < at("NVIDIA Quadro RTX 8000") < at("NVIDIA RTX A6000")
    assert at("AMD Radeon RX 9070 XT") < at("AMD Radeon Instinct MI50") < at("AMD Instinct MI100") < at("AMD Instinct MI355X")
    assert at("Apple M4") < at("Apple M4 Pro") < at("Apple M4 Max") < at("Apple M5")


def test_the_what_if_gpu_lists_are_searched_by_any_part_of_a_name(qtbot):
    """200+ GPUs are too many to scroll: typing "w7800" offers the boards whose names hold it,
    picking one plans it, and text that names no board goes back to the chosen one."""
    from PySide6.QtCore import QModelIndex

    window = make_window(qtbot, cpu_box())
    combo = window.page("machine").gpu_combo
    completer = combo.completer()
    completer.setCompletionPrefix("w7800")
    offered = [completer.completionModel().index(i, 0).data() for i in range(completer.completionCount())]
    assert offered == ["AMD Radeon PRO W7800", "AMD Radeon PRO W7800 48GB"]
    completer.activated[QModelIndex].emit(completer.completionModel().index(0, 0))
    assert combo.currentData() == "AMD Radeon PRO W7800" and window.ctx.machine.is_what_if
    combo.lineEdit().setText("no such board")
    combo.lineEdit().editingFinished.emit()
    assert combo.currentText() == combo.lineEdit().text() == "AMD Radeon PRO W7800"
    for other in (window.page("machine").second_combo, window.page("machine").remote_combo):
        assert other.completer() is not None and other.isEditable()


def test_a_what_if_gpu_that_shares_system_memory_brings_its_pool():
    """Planning a DGX Spark or an Apple chip on this machine: the RAM is the chip's one pool,
    which the GPU's share comes out of, not this machine's RAM beside a pool of its own."""
    hw = cpu_box()
    in_use = hw.cpu.ram_total_bytes - hw.cpu.ram_available_bytes
    spark = what_if_profile(hw, WhatIf(gpu="NVIDIA GB10"))
    assert spark.cpu.ram_total_bytes == 128 * GiB and spark.cpu.ram_available_bytes == 128 * GiB - in_use
    assert spark.gpus[0].unified_memory
    assert WhatIf(gpu="NVIDIA GB10").describe() == "NVIDIA GB10, 137 GB shared with the CPU"  # 128 GiB
    assert WhatIf(gpu="NVIDIA GB10").describe(short=True) == "GB10"
    mac = what_if_profile(hw, WhatIf(gpu="Apple M4 Max"))
    assert mac.gpus[0].unified_memory and mac.gpus[0].vram_total_bytes < mac.cpu.ram_total_bytes
    # an Intel iGPU gets the share of the pool llama.cpp's Vulkan and SYCL backends report
    lunar = what_if_profile(hw, WhatIf(gpu="Intel Arc 140V"))
    assert lunar.cpu.ram_total_bytes == 16 * GiB and lunar.gpus[0].vram_total_bytes == 12 * GiB
    # the model's bytes on the GPU are taken out of the same RAM the CPU side has
    spec = find_model("llama-3.3-70b").spec("Q4_K_M")
    est = plan(spec, spark, Wishes(n_ctx=8192))
    cpu, gpu = (next(d for d in est.memory.devices if d.device == name) for name in ("cpu", "gpu0"))
    assert est.memory.fit == "full_gpu"
    assert cpu.available_bytes < spark.cpu.ram_available_bytes - gpu.total_bytes + 1
    # an integrated GPU whose platform takes several RAM types says which the plan assumes
    (said,) = what_if_profile(hw, WhatIf(gpu="AMD Radeon 890M")).warnings
    assert said.startswith("The planned AMD Radeon 890M reads its machine's RAM: the table assumes LPDDR5X-7500")
    assert said.endswith("Estimates use 120 GB/s") and not lunar.warnings  # Lunar Lake's is on the package
    # a card with memory of its own keeps this machine's RAM; an explicit RAM size still wins
    assert what_if_profile(hw, WhatIf(gpu="RTX 3090")).cpu.ram_total_bytes == hw.cpu.ram_total_bytes
    assert what_if_profile(hw, WhatIf(gpu="NVIDIA GB10", ram_total_bytes=64 * 10**9)).cpu.ram_total_bytes == 64 * 10**9


def test_what_if_profile_swaps_adds_and_grows():
    hw = cpu_box()
    names = table_gpu_names()
    assert "NVIDIA GeForce RTX 3090" in names and len(names) > 60
    assert what_if_profile(hw, WhatIf()) is hw
    one = what_if_profile(hw, WhatIf(gpu="RTX 3090"))
    assert [g.name for g in one.gpus] == ["RTX 3090"] and one.backend == "cuda"
    assert one.gpus[0].vram_total_bytes > 23 * GiB and round(one.gpus[0].bandwidth_gbs) == 936
    two = what_if_profile(one, WhatIf(second_gpu="RTX 3060"))
    assert [(g.index, g.name) for g in two.gpus] == [(0, "RTX 3090"), (1, "RTX 3060")]
    more = what_if_profile(hw, WhatIf(ram_total_bytes=128 * 10**9))
    in_use = hw.cpu.ram_total_bytes - hw.cpu.ram_available_bytes
    assert more.cpu.ram_total_bytes == 128 * 10**9
    assert more.cpu.ram_available_bytes == 128 * 10**9 - in_use
    assert more.cpu.ram_bandwidth_gbs == hw.cpu.ram_bandwidth_gbs
    none = what_if_profile(one, WhatIf(gpu=""))
    assert none.gpus == () and none.backend == "cpu"
    assert WhatIf(gpu="RTX 3090", second_gpu="RTX 3060", ram_total_bytes=64 * 10**9).describe() == \
        "RTX 3090 + RTX 3060 64 GB RAM"
    with pytest.raises(BadInputError):
        what_if_profile(hw, WhatIf(gpu="Voodoo 5 6000"))


def test_what_if_more_ram_lets_a_big_model_fit(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    models = wait_ranked(qtbot, window)
    big = next(r for r in models.visible_rows() if r.model.id == "llama-3.3-70b")
    assert big.fit == "too_large"
    machine = window.page("machine")
    with qtbot.waitSignal(models.ranked, timeout=30000):
        machine.ram_combo.setCurrentIndex(machine.ram_combo.findData(128 * 10**9))
    big = next(r for r in models.visible_rows() if r.model.id == "llama-3.3-70b")
    assert big.fit == "cpu_only"


def test_the_ram_choice_says_a_shared_pool_comes_with_such_a_gpu(qtbot):
    """With a what-if GPU that shares its system's memory, "as detected" would be wrong: the
    RAM choice names the pool the planned machine has instead."""
    window = make_window(qtbot)
    page = window.pages["machine"]
    page.set_what_if(WhatIf(gpu="NVIDIA GB10"))
    assert page.ram_combo.itemText(0) == "RAM: its 137 GB shared pool"
    page.set_what_if(WhatIf(gpu="NVIDIA GeForce RTX 3090"))
    assert page.ram_combo.itemText(0) == "RAM as detected"
    page.reset_what_if()
