"""The Models page over the real catalog and planner: ranking shown and filtered, search,
the detail's context and GPU-layers sliders re-planning, buttons routed to handlers."""

from dataclasses import replace

from PySide6.QtCore import Qt

from rooflight.catalog import load_catalog
from rooflight.catalog.rank import rank_models, unavailable_models
from rooflight.ui.widgets import tok_s
from test_ui_support import cpu_box, make_window, rtx3060, wait_idle, wait_ranked


def test_ranking_is_shown_best_first(qtbot, monkeypatch):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    rows = page.visible_rows()
    unavailable = unavailable_models()
    assert len(rows) + len(unavailable) == len(load_catalog())
    keys = [(r.tier, r.superseded_by is None, r.score) for r in rows]
    assert keys == sorted(keys, reverse=True)
    assert unavailable == [] and "not estimated" not in page.status.text()  # every catalog model is sized
    # a catalog model of an architecture the estimator refuses is counted apart, with its reason
    from dataclasses import replace as replaced

    import rooflight.catalog.rank as rank

    rwkv = replaced(load_catalog()[0], architecture="rwkv7")
    monkeypatch.setattr(rank, "unavailable_models", lambda *a, **k: unavailable_models((rwkv,)))
    page._update_status()
    assert "1 more not estimated" in page.status.text()
    assert "estimate not available for rwkv7" in page.status.toolTip().lower()
    monkeypatch.undo()
    page._update_status()
    # the table shows the same figures as the core ranking for this machine
    expected = rank_models(hw, ctx=window.ctx.settings.default_ctx)
    assert [r.model.id for r in rows] == [r.model.id for r in expected]
    assert page.proxy.index(0, 5).data() == tok_s(expected[0].best.estimate.performance.decode_tok_s)
    assert page.proxy.index(0, 4).data() == "CPU only"  # the fit badge's words
    assert page.status.text().startswith(f"{len(rows)} models ranked for this machine at 8K context")
    # the top pick is the best row that fits
    assert page.pick_title.text().startswith(rows[0].model.name)
    # a row listed below higher-scored ones says why on its position and name
    lower = next(i for i, r in enumerate(rows) if r.ranked_lower_because())
    why = rows[lower].ranked_lower_because()
    assert page.proxy.index(lower, 0).data(Qt.ItemDataRole.ToolTipRole) == (
        "Listed lower: " + "; ".join(map(str, why)) + ".")
    assert page.proxy.index(lower, 1).data(Qt.ItemDataRole.ToolTipRole).endswith(
        "Listed lower: " + ", ".join(w.short for w in why))
    assert page.proxy.index(0, 0).data(Qt.ItemDataRole.ToolTipRole) is None


def test_filters(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    total = len(page.visible_rows())
    assert any(r.fit == "too_large" for r in page.visible_rows())
    page.fits_only.setChecked(True)
    fitting = page.visible_rows()
    assert fitting and all(r.fit != "too_large" for r in fitting) and len(fitting) < total
    page.fits_only.setChecked(False)
    page.size.setCurrentIndex(page.size.findText("2B to 8B"))
    assert page.visible_rows() and all(2 <= r.model.params_total <= 8 for r in page.visible_rows())
    page.size.setCurrentIndex(0)
    page.search.setText("qwen2.5 coder")
    found = page.visible_rows()
    assert found and all("qwen2.5" in r.model.id and "coder" in r.model.id for r in found)
    assert f"{len(found)} of {total} models" in page.status.text()
    page.search.clear()
    page.installed_only.setChecked(True)
    assert page.visible_rows() == []
    model = load_catalog()[0]
    repo, file = model.file_for(model.quants[0])
    window.ctx.installed.add(repo, file, "/models/x.gguf")
    assert [r.model.id for r in page.visible_rows()] == [model.id]


def test_use_case_reranks_in_a_worker(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    with qtbot.waitSignal(page.ranked, timeout=30000):
        page.use_case.setCurrentIndex(page.use_case.findData("coding"))
    assert all("coding" in r.model.tags for r in page.visible_rows())


def test_search_provider_rows_join_the_table(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    base = next(m for m in load_catalog() if m.id == "qwen3-0.6b")
    hub_model = replace(base, id="someone/Qwen3-0.6B-GGUF", name="Qwen3 0.6B (someone's GGUF)")
    asked = []

    def provider(query, hardware, n_ctx):  # runs in a worker, like a Hub search would
        asked.append((query, hardware, n_ctx))
        return rank_models(hardware, ctx=n_ctx, models=(hub_model,))

    page.set_search_provider(provider)
    page.search.setText("zzz-not-in-the-catalog")
    assert page.visible_rows() == []
    qtbot.waitUntil(lambda: bool(page.model.extra), timeout=10000)
    assert asked == [("zzz-not-in-the-catalog", hw, page.n_ctx)]
    assert [r.model.id for r in page.visible_rows()] == [hub_model.id]
    assert page.proxy.index(0, 0).data() == "Hub"


def test_detail_context_slider_replans_every_quant(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    assert page.detail.isHidden()
    assert page.select_model("llama-3.2-1b")
    detail = page.detail
    assert detail.isVisible() and detail.name.text() == "Llama 3.2 1B Instruct"
    # the detail says what the quality figure stands on, and its source
    assert "quality 14.44 on the Open LLM Leaderboard v2 average" in detail.meta.text()
    assert "released 2024-09" in detail.meta.text()
    assert "meta-llama/Llama-3.2-1B-Instruct" in detail.meta.toolTip()
    assert detail.table.rowCount() == len(detail.options) >= 3
    assert detail.estimate is not None and detail.estimate.config.n_ctx == 8192
    kv_before = detail.estimate.memory.device("cpu").kv_bytes
    with qtbot.waitSignal(detail.replanned, timeout=10000):
        detail.set_context(32768)
    assert {o.estimate.config.n_ctx for o in detail.options} == {32768}
    assert detail.estimate.config.n_ctx == 32768
    assert detail.estimate.memory.device("cpu").kv_bytes > 3 * kv_before
    assert detail.ctx_value.text() == "32K tokens"
    # choosing another quant shows its plan
    detail.select_quant(detail.options[0].quant)
    assert detail.section.text().startswith(detail.options[0].quant)
    # a figure mapped from the arena score says so, with its held-out error and source
    assert page.select_model("gemma-3-4b")
    assert "on the Open LLM Leaderboard v2 average, mapped from the LMArena text score (±6.8 held-out)" \
        in detail.meta.text()
    assert "rating of gemma-3-4b-it (lmarena/arena-catalog" in detail.meta.toolTip()
    # a model listed lower says why in its detail too
    lower = next(r for r in page.visible_rows() if r.ranked_lower_because())
    assert page.select_model(lower.model.id)
    assert detail.meta.text().endswith(" · listed lower: " + "; ".join(
        f"{w.short} ({w.meaning})" for w in lower.ranked_lower_because()))


def test_detail_gpu_layers_slider_moves_memory_and_speed(qtbot):
    hw = rtx3060()
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    page.select_model("qwen3-8b")
    detail = page.detail
    qtbot.waitUntil(lambda: detail.estimate is not None)
    detail.select_quant("Q4_K_M")
    auto = detail.estimate
    assert auto.fit == "full_gpu" and detail.layers_slider.isEnabled()
    with qtbot.waitSignal(detail.replanned, timeout=10000):
        detail.set_gpu_layers(10)
    ten = detail.estimate
    assert ten.config.n_gpu_layers == 10 and ten.fit == "partial_gpu"
    assert ten.memory.device("gpu0").weights_bytes < auto.memory.device("gpu0").weights_bytes
    assert ten.memory.device("cpu").weights_bytes > auto.memory.device("cpu").weights_bytes
    assert ten.performance.decode_tok_s < auto.performance.decode_tok_s
    assert not detail.layers_auto.isChecked() and detail.layers_value.text().startswith("10 of")
    detail.set_gpu_layers(None)
    assert detail.estimate.config.n_gpu_layers == auto.config.n_gpu_layers


def test_cpu_machine_disables_the_gpu_layers_slider(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    page.select_model("qwen3-0.6b")
    assert not page.detail.layers_slider.isEnabled()
    assert "No GPU" in page.detail.layers_slider.toolTip()


def test_a_cpu_that_keeps_amx_weights_says_what_their_layout_adds(qtbot):
    base = cpu_box()
    hw = replace(base, cpu=replace(base.cpu, amx_weights=True))
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    page.select_model("qwen3-0.6b")
    assert "Q6_K" in [o.quant for o in page.detail.options]
    page.detail.select_quant("Q6_K")  # packed at its own size: nothing to say
    assert page.detail.estimate.memory.amx_layout_bytes == 0
    assert "AMX" not in page.detail.config.text()
    page.detail.select_quant("Q8_0")  # Q8_0 rows gain a compensation word per block
    est = page.detail.estimate
    assert est.memory.amx_layout_bytes > 0
    assert "packed layout of llama.cpp's AMX buffer" in page.detail.config.text()


def test_download_and_chat_buttons_follow_the_handlers(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    # as in a build without the Downloads and Chat pages, which register these handlers
    window.ctx.actions.set_download_handler(None)
    window.ctx.actions.set_chat_handler(None)
    page = wait_ranked(qtbot, window)
    page.select_model("qwen3-0.6b")
    detail = page.detail
    quant = detail.options[0].quant
    (button,) = detail.quant_buttons(quant)
    assert not button.isEnabled() and "Downloads page" in button.toolTip()
    assert not page.pick_download.isEnabled()

    downloads = []
    window.ctx.actions.set_download_handler(lambda repo, file: downloads.append((repo, file)))
    (button,) = detail.quant_buttons(quant)
    assert button.isEnabled() and button.accessibleName() == f"Download {quant}"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    model = next(m for m in load_catalog() if m.id == "qwen3-0.6b")
    assert downloads == [model.file_for(quant)]

    # once on disk: Chat instead, routed to the chat handler when one exists
    repo, file = model.file_for(quant)
    window.ctx.installed.add(repo, file, "/models/qwen3-0.6b.gguf")
    (button,) = detail.quant_buttons(quant)
    assert button.accessibleName() == f"Chat with {quant}" and not button.isEnabled()
    chats = []
    window.ctx.actions.set_chat_handler(lambda path, wishes: chats.append((path, wishes)))
    (button,) = detail.quant_buttons(quant)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert chats == [("/models/qwen3-0.6b.gguf", detail.wishes)]  # with the plan's settings
    row = next(i for i, r in enumerate(page.visible_rows()) if r.model.id == "qwen3-0.6b")
    assert page.proxy.index(row, 10).data() == "✓"


def test_settings_default_context_reranks(qtbot):
    hw = cpu_box()
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    with qtbot.waitSignal(page.ranked, timeout=30000):
        window.ctx.update_settings(default_ctx=4096)
    assert page.n_ctx == 4096
    assert {r.best.estimate.config.n_ctx for r in page.visible_rows()} <= {4096, 2048}
    wait_idle(qtbot, window)
