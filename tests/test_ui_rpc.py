"""What if… a second PC over the network (llama.cpp RPC, issue 20): the what-if machine,
its remote device card, the security note, and the ranking that follows."""

from rooflight.ui.whatif import WhatIf, what_if_profile
from test_ui_support import cpu_box, make_window, wait_ranked


def test_what_if_profile_adds_a_second_pc():
    hw = cpu_box()
    what = WhatIf(gpu="NVIDIA GeForce RTX 4090", remote_gpu="NVIDIA GeForce RTX 3090", remote_link_gbps=10.0)
    prof = what_if_profile(hw, what)
    (remote,) = prof.remotes
    assert remote.gpus[0].name == "NVIDIA GeForce RTX 3090" and remote.link_gbps == 10.0
    assert remote.backend == "cuda"
    assert what.describe(short=True) == "RTX 4090 + a second PC with RTX 3090 over 10 GbE"


def test_a_second_pc_lets_a_70b_model_run_fully_offloaded(qtbot):
    window = make_window(qtbot, cpu_box())
    models = wait_ranked(qtbot, window)
    machine = window.page("machine")
    with qtbot.waitSignal(models.ranked, timeout=30000):
        machine.gpu_combo.setCurrentIndex(machine.gpu_combo.findData("NVIDIA GeForce RTX 4090"))
    alone = next(r for r in models.visible_rows() if r.model.id == "llama-3.3-70b")
    assert alone.fit != "full_gpu"
    with qtbot.waitSignal(models.ranked, timeout=30000):
        machine.remote_combo.setCurrentIndex(machine.remote_combo.findData("NVIDIA GeForce RTX 3090"))
    both = next(r for r in models.visible_rows() if r.model.id == "llama-3.3-70b")
    assert any(o.estimate.fit == "full_gpu" for o in both.options)
    assert "a second PC with RTX 3090 over 1 GbE" in window.machine_line.text()
    cards = machine.cards()
    remote = next(c for c in cards if c.heading.text().startswith("rpc0"))
    assert remote.heading.text() == "rpc0 · RTX 3090"
    notes = [n.text.text() for n in machine._content.findChildren(type(machine.what_if_note))
             if n.isVisibleTo(machine)]
    assert any("no authentication" in t and "rooflight rpc-server" in t for t in notes)
    # a slower link costs speed on the same plan
    rate = max(o.estimate.performance.decode_tok_s for o in both.options if o.estimate.fit == "full_gpu")
    with qtbot.waitSignal(models.ranked, timeout=30000):
        machine.link_combo.setCurrentIndex(machine.link_combo.findData(0.3))
    wifi = next(r for r in models.visible_rows() if r.model.id == "llama-3.3-70b")
    slower = max(o.estimate.performance.decode_tok_s for o in wifi.options if o.estimate.fit == "full_gpu")
    assert slower < rate
    with qtbot.waitSignal(models.ranked, timeout=30000):
        machine.reset_what_if()
    assert window.ctx.machine.profile.remotes == ()


def test_remote_machines_are_checked_and_listed(qtbot):
    import socket

    import pytest

    from rooflight.runtime import rpc

    window = make_window(qtbot, cpu_box())
    panel = window.page("machine").remote_panel
    assert "no authentication" in " ".join(n.text.text() for n in panel.findChildren(type(window.page("machine").what_if_note)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    panel.field.setText(f"127.0.0.1:{port}")
    panel.check_button.click()
    qtbot.waitUntil(lambda: panel.check_button.isEnabled(), timeout=30000)
    assert ("No RPC server answers at" in panel.result.text()
            or "has no RPC backend" in panel.result.text())  # one sentence either way
    panel.field.setText("not an endpoint")
    panel.check_button.click()
    qtbot.waitUntil(lambda: panel.check_button.isEnabled(), timeout=30000)
    assert 'must be "host:port"' in panel.result.text()
    if rpc.find_build() is None:
        pytest.skip("no RPC build here for a live server")
    server = rpc.start_server(port, threads=1)
    try:
        panel.field.setText(f"127.0.0.1:{port}")
        panel.check_button.click()
        qtbot.waitUntil(lambda: panel.check_button.isEnabled(), timeout=60000)
        assert panel.result.text().startswith(f"127.0.0.1:{port}: reachable · device 0:")
    finally:
        rpc.stop_server(server)


def test_the_detail_shows_the_remote_device_and_the_network(qtbot):
    from rooflight.ui.whatif import WhatIf

    window = make_window(qtbot, cpu_box())
    page = wait_ranked(qtbot, window)
    with qtbot.waitSignal(page.ranked, timeout=30000):
        window.page("machine").set_what_if(WhatIf(remote_gpu="NVIDIA GeForce RTX 3090", remote_link_gbps=0.3))
    page.select_model("qwen3-8b")
    detail = page.detail
    qtbot.waitUntil(lambda: detail.estimate is not None)
    detail.select_quant("Q4_K_M")
    est = detail.estimate
    assert est.fit == "full_gpu" and detail.layers_slider.isEnabled()  # layers can go to the remote GPU
    names = [d.name for d in detail.memory.devices]
    assert names == ["CPU RAM", "rpc0 · NVIDIA GeForce RTX 3090 on a second PC"]
    assert "The network" in detail.speed.text() and "faster link would give" in detail.speed.text()
