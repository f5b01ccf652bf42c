"""A GGUFWriter that packs long metadata arrays whole, and writes a tensor that repeats one
tile without building it in memory.

gguf-py packs a metadata array one element at a time through its generic _pack_val: a
262144-entry vocabulary (tokens, scores and types: 786k values) takes ~1.4 s to write, which
the machine probe (runtime/probe.py: its largest vocabulary) and the tests that generate
models pay on every model. The bytes are the same: tests/test_synthetic.py compares
this writer's file with gguf-py's.

A tiled tensor (gguf/synthetic.py write_model(tiled=True): the probe's models, ~3 GiB per
probe) was built in memory from its repeated tile and then copied to the file; written tile
by tile, the same bytes cost one copy instead of two (bench/write_speed.py: x0.81-0.91 of the
time for the probe's 256 MiB decode models).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from gguf import GGUFEndian, GGUFValueType, GGUFWriter
from gguf.gguf_writer import WriterState

# below this many elements the generic path is as fast as it matters
_FAST_FROM = 1024


class FastArrayWriter(GGUFWriter):
    def _pack_val(self, val: Any, vtype: GGUFValueType, add_vtype: bool,
                  sub_type: GGUFValueType | None = None) -> bytes:
        packed = self._pack_array(val, sub_type) if vtype == GGUFValueType.ARRAY else None
        if packed is None:
            return super()._pack_val(val, vtype, add_vtype, sub_type)
        return (struct.pack("<I", vtype) if add_vtype else b"") + packed

    def _pack_array(self, val: Any, sub_type: GGUFValueType | None) -> bytes | None:
        """An array of strings or of one plain number type, as gguf-py would write it; None
        for what the generic path should handle (short, mixed, nested, bool, big-endian)."""
        if self.endianess != GGUFEndian.LITTLE or not isinstance(val, (list, tuple)) or len(val) < _FAST_FROM:
            return None
        kinds = {type(v) for v in val}
        if len(kinds) != 1:
            return None
        ltype = sub_type if sub_type is not None else GGUFValueType.get_type(val[0])
        head = struct.pack("<IQ", ltype, len(val))
        if ltype == GGUFValueType.STRING:
            encoded = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in val]
            return head + b"".join(struct.pack("<Q", len(e)) + e for e in encoded)
        fmt = self._simple_value_packing.get(ltype)
        if fmt is None or ltype == GGUFValueType.BOOL:
            return None
        return head + struct.pack(f"<{len(val)}{fmt}", *val)

    def write_tensor_tiles(self, tile: np.ndarray, n_rows: int) -> None:
        """The next tensor's data as n_rows rows of `tile` (rows, row_bytes) repeated from
        its first row: the bytes write_tensor_data would write for that array (gguf-py's
        checks, alignment and padding, one output file)."""
        if self.state is not WriterState.TI_DATA and self.state is not WriterState.WEIGHTS:
            raise ValueError(f"Expected output file to contain tensor info or weights, got {self.state}")
        assert self.fout is not None and len(self.fout) == 1
        fout = self.fout[0]
        name = next(iter(self.tensors[0]))
        ti = self.tensors[0].pop(name)
        nbytes = n_rows * tile.shape[1]
        assert ti.nbytes == nbytes
        self.write_padding(fout, fout.tell())
        for start in range(0, n_rows, len(tile)):
            tile[: min(len(tile), n_rows - start)].tofile(fout)
        self.write_padding(fout, nbytes)
        self.state = WriterState.WEIGHTS
