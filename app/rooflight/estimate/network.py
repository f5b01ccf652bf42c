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

Each remote device that runs blocks is also sent the graph's inputs for its attention every
step (the scheduler copies them from the CPU, where graph inputs live): token positions, the
KV cache's row indices and the KQ masks [cells in use, tokens], one per cache kind
(split_compute.attention_input_bytes). Counted from the servers' own log (GGML_RPC_DEBUG=1,
bench/rpc_split.py --count-bytes): a decoded token after 513 positions sends the first server
its 2 KiB of activations and a 1.5 KiB mask; a 512-token prompt micro-batch 1 MiB and 512 KiB.
The mask grows with the context: at 32K positions a prompt micro-batch's masks are as large as
a 16K-wide model's activations, and a decoded token's 64 KiB twice an 8K-wide one's. These
sends are asynchronous (no round trip of their own).
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflight.estimate.config import RunConfig
from rooflight.estimate.placement import CPU, device_runs
from rooflight.estimate.split_compute import attention_input_bytes
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile
from rooflight.hardware.remote import is_remote, remote_device

ACTIVATION_BYTES = 4  # F32 hidden state between graph splits
OUTPUT_ID_BYTES = 4  # one I32 row id: llama-cpp-python asks for the last token's logits only
# llama-context.cpp graph_get_cb pins a layer's norm to its device in steps of fewer tokens
NORM_PINNED_BELOW_TOKENS = 32


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
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, layer_devices: tuple[str, ...], n_tokens: int,
    position: int, *, link_scale: float = 1.0,
) -> NetworkCost:
    """Network time of one graph evaluation over `n_tokens` tokens (1: a decoded token;
    n_ubatch: a prompt micro-batch) that leaves `position` cells in use, with each link
    `link_scale` times faster."""
    if not hardware.remotes:
        return NO_NETWORK
    boundaries = _boundaries(spec, hardware, layer_devices, n_tokens)
    sent, fetched = _step_bytes(spec, cfg, layer_devices, n_tokens, position, boundaries)
    transfer = sum(n / _link_bytes_per_s(hardware, dev, link_scale) for dev, n in (*sent.items(), *fetched.items()))
    latency, crossings = 0.0, 0
    for prev, nxt, _n in boundaries:
        # a fetch waits a round trip; a send is priced as one too, as llama.cpp waits on
        # the server's reply before it goes on
        for dev in (prev, nxt):
            if is_remote(dev):
                latency += remote_device(hardware, dev).machine.rtt_ms / 1000
                crossings += 1
    out_dev = layer_devices[spec.n_layer]
    if is_remote(out_dev):  # the logits of the last token come back to be sampled
        latency += remote_device(hardware, out_dev).machine.rtt_ms / 1000
        crossings += 1
    return NetworkCost(transfer, latency, crossings)


def step_bytes(
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, layer_devices: tuple[str, ...], n_tokens: int,
    position: int,
) -> tuple[dict[str, int], dict[str, int]]:
    """(bytes this machine sends each remote device, bytes it fetches from each) for one
    step: the activations crossing each device boundary, to each run of blocks the step's
    attention inputs and to the last block's the row id of the one output, and from the
    output layer's device the last token's logits."""
    return _step_bytes(spec, cfg, layer_devices, n_tokens, position,
                       _boundaries(spec, hardware, layer_devices, n_tokens))


def _step_bytes(
    spec: ModelSpec, cfg: RunConfig, layer_devices: tuple[str, ...], n_tokens: int, position: int,
    boundaries: list[tuple[str, str, int]],
) -> tuple[dict[str, int], dict[str, int]]:
    sent: dict[str, int] = {}
    fetched: dict[str, int] = {}
    inputs = attention_input_bytes(spec, cfg, n_tokens, position)
    for prev, nxt, n_activations in boundaries:
        nbytes = n_activations * spec.n_embd * ACTIVATION_BYTES * n_tokens
        if is_remote(prev):
            fetched[prev] = fetched.get(prev, 0) + nbytes
        if is_remote(nxt):
            sent[nxt] = sent.get(nxt, 0) + nbytes
    for dev, _start, end in device_runs(tuple(layer_devices[: spec.n_layer])):
        if is_remote(dev):
            sent[dev] = sent.get(dev, 0) + inputs + (OUTPUT_ID_BYTES if end == spec.n_layer else 0)
    out_dev = layer_devices[spec.n_layer]
    if is_remote(out_dev):
        fetched[out_dev] = fetched.get(out_dev, 0) + spec.n_vocab * ACTIVATION_BYTES
    return sent, fetched


def _boundaries(
    spec: ModelSpec, hardware: HardwareProfile, layer_devices: tuple[str, ...], n_tokens: int,
) -> list[tuple[str, str, int]]:
    """(device before, device after, residual-sized tensors that cross) for each boundary in
    graph order that crosses the network (two GPUs of one rpc-server copy between themselves).
    One, the layer's output, where the split falls at the layer boundary. Two where it falls
    one operation away, both operands of that operation crossing:
    - after blocks on this machine's CPU: the next device runs their last residual add
      (ggml-backend.cpp's pass 2 spreads the other backends over weightless ops, never the
      CPU's);
    - between two offload devices in a step of 32 tokens or more when some layer stays on the
      CPU: llama.cpp pins each layer's first norm to the layer's device only for smaller
      micro-batches or a full offload (llama-context.cpp graph_get_cb, "norm may be
      automatically assigned to the backend of the previous layer"), so otherwise the earlier
      device computes it and sends it beside the residual.
    Counted to the byte from the servers' logs (bench/rpc_split.py --count-bytes), 2, 31 and 32
    token steps included."""
    full_offload = CPU not in layer_devices
    runs = _runs(spec, layer_devices)
    out = []
    for (prev, prev_start, prev_end), (nxt, *_) in zip(runs, runs[1:], strict=False):
        if not (is_remote(prev) or is_remote(nxt)) or _same_server(hardware, prev, nxt):
            continue
        if prev == CPU:
            two = prev_end > prev_start
        else:
            two = n_tokens >= NORM_PINNED_BELOW_TOKENS and not full_offload
        out.append((prev, nxt, 2 if two else 1))
    return out


def _runs(spec: ModelSpec, layer_devices: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """(device, first layer, end) in graph order: the CPU's embedding lookup first (input
    embeddings are computed on the CPU), the runs of blocks, then the output layer's device
    where it runs no block."""
    runs = [(CPU, 0, 0), *device_runs(tuple(layer_devices[: spec.n_layer]))]
    out_dev = layer_devices[spec.n_layer]
    if runs[-1][0] != out_dev:
        runs.append((out_dev, spec.n_layer, spec.n_layer + 1))
    return runs
