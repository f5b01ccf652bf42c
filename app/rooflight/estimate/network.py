"""What the network costs when layers run on remote RPC machines (issue 20).

llama.cpp's scheduler runs the layers of each device as one graph split; where the next
split is on another device, it copies the activations across (ggml-backend.cpp, split
inputs). With an RPC device on either side, that copy crosses the network: `set_tensor`
sends them to the server, `get_tensor` fetches them back, and the fetch waits a round
trip. Two RPC servers do not talk to each other: a copy between them goes through this
machine, paying both links. So, per device boundary in layer order and for each remote
side of it: the activations' bytes over that machine's link, plus its round trip.
Activations cross as F32 (the graph's hidden state), n_embd values per token; a decode
step moves one token, a prompt micro-batch `n_ubatch` of them. Logits computed on a remote
device come back the same way (n_vocab F32 values per output row: one per step here).
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflight.estimate.placement import device_runs
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile
from rooflight.hardware.remote import is_remote, remote_device

ACTIVATION_BYTES = 4  # F32 hidden state between graph splits


@dataclass(frozen=True)
class NetworkCost:
    """Seconds one step spends on the network: bytes over links, and round trips."""

    transfer_s: float
    latency_s: float
    crossings: int  # remote sides of device boundaries, logits included

    @property
    def total_s(self) -> float:
        return self.transfer_s + self.latency_s


NO_NETWORK = NetworkCost(0.0, 0.0, 0)


def _link_bytes_per_s(hardware: HardwareProfile, device: str, link_scale: float) -> float:
    return remote_device(hardware, device).machine.link_gbps * link_scale * 1e9 / 8


def _same_server(hardware: HardwareProfile, a: str, b: str) -> bool:
    return (is_remote(a) and is_remote(b)
            and remote_device(hardware, a).machine.endpoint == remote_device(hardware, b).machine.endpoint)


def step_cost(
    spec: ModelSpec, hardware: HardwareProfile, layer_devices: tuple[str, ...], n_tokens: int,
    *, link_scale: float = 1.0,
) -> NetworkCost:
    """Network time of one graph evaluation over `n_tokens` tokens (1: a decoded token;
    n_ubatch: a prompt micro-batch), with each link `link_scale` times faster."""
    if not hardware.remotes:
        return NO_NETWORK
    transfer = latency = 0.0
    crossings = 0
    # input embeddings are computed on the CPU, so the first run's device receives them
    runs = [("cpu", 0, 0), *device_runs(tuple(layer_devices[: spec.n_layer]))]
    out_dev = layer_devices[spec.n_layer]
    if runs[-1][0] != out_dev:
        runs.append((out_dev, spec.n_layer, spec.n_layer + 1))
    activation = spec.n_embd * ACTIVATION_BYTES * n_tokens
    for (prev, *_), (nxt, *_) in zip(runs, runs[1:], strict=False):
        if _same_server(hardware, prev, nxt):
            continue  # two GPUs of one rpc-server copy between themselves
        for dev in {prev, nxt}:
            if is_remote(dev):
                transfer += activation / _link_bytes_per_s(hardware, dev, link_scale)
                latency += remote_device(hardware, dev).machine.rtt_ms / 1000
                crossings += 1
    if is_remote(out_dev):  # the logits of the last token come back to be sampled
        transfer += spec.n_vocab * ACTIVATION_BYTES / _link_bytes_per_s(hardware, out_dev, link_scale)
        latency += remote_device(hardware, out_dev).machine.rtt_ms / 1000
        crossings += 1
    return NetworkCost(transfer, latency, crossings)
