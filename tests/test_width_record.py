"""bench/probe_width.py --save: a decode sweep kept as a JSON record with the machine it ran on,
each width's cost per layer beyond the probe width's figure among its fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bench_modules import load_bench

probe_width = load_bench("probe_width")


def test_a_sweep_record_reloads_with_its_machine_and_per_layer_costs():
    sweep = {"Q4_K": {"512": {"layers": 111, "weights": 356_515_840, "s_per_token": 0.0163,
                              "ns_per_weight": 0.0362, "excess_us_per_layer": 67.3},
                      "2048": {"layers": 7, "weights": 359_661_568, "s_per_token": 0.0057,
                               "ns_per_weight": 0.0154, "excess_us_per_layer": 0.0}}}
    rec = probe_width.width_record(sweep, 25.6e-6, 5, 0.42, datetime(2026, 12, 6, 22, 1, tzinfo=UTC))
    back = json.loads(json.dumps(rec))
    assert back["script"] == "bench/probe_width.py" and back["utc"] == "2026-12-06T22:01:00+00:00"
    assert back["probe_width"] == probe_width.DECODE_PROBE_WIDTH == 2048
    assert back["per_layer_subtracted_us"] == 25.6 and back["rounds"] == 5 and back["load_1min_before"] == 0.42
    assert back["last_level_cache_bytes"] > 0 and "llama_cpp_python" in back
    assert back["decode"]["Q4_K"]["512"] == sweep["Q4_K"]["512"]
    assert back["decode"]["Q4_K"]["2048"]["excess_us_per_layer"] == 0.0
