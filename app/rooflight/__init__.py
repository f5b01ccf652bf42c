"""Rooflight: which local LLM will really run on this machine, and how fast."""

import os as _os

__version__ = "0.1.0"

# CUDA must number GPUs as NVML (and so the plan) does: by PCI bus id, not fastest first.
# CUDA reads this once, when llama.cpp first initialises it, so it is set here, before
# anything can import llama_cpp (hardware/device_order.py maps indices where a user's own
# setting or CUDA_VISIBLE_DEVICES still makes the orders differ).
_os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
