"""`ETDumpGen` for the pure-Python engine: collects events as the interpreter runs, writes `.etdp`.

The same records as the native `ETDumpGen` (devtools/etdump/etdump_flatcc.h): an event block per
load ("Default") and per execute ("Execute"), a profile event per instruction, delegate events
inside their call, and, with a debug buffer, the intermediate outputs. Times are
`time.perf_counter_ns()` ticks (nanoseconds), the unit the native runtime records.
"""

from __future__ import annotations

import ctypes
from typing import Optional

import torch

from executorch.devtools.etdump import schema_flatcc as E
from executorch.runtime import _layout

# Intermediate outputs start on 64-byte boundaries of the debug buffer, as the native runtime lays them.
DEBUG_ALIGNMENT = 64


class ETDumpGen:
    """Event blocks, profile and debug events; `get_etdump_data()` serializes them."""

    def __init__(self, debug_buffer_size: int = 0) -> None:
        if debug_buffer_size < 0:
            raise ValueError(f"debug_buffer_size is {debug_buffer_size}; "
                             f"pass 0 (no intermediate outputs) or a size in bytes")
        self.blocks: list[E.RunData] = []
        self._events: Optional[list] = None
        self._debug = bytearray(debug_buffer_size)
        self._debug_used = 0
        self.dropped_outputs = 0  # outputs that did not fit in the debug buffer
        self.chain_id, self.debug_handle = -1, 0

    @property
    def logs_outputs(self) -> bool:
        return len(self._debug) > 0

    def create_event_block(self, name: str) -> None:
        self._events = []
        self.blocks.append(E.RunData(name=name, bundled_input_index=-1, allocators=None, events=self._events))

    def _add(self, event: E.Event) -> None:
        if self._events is None:
            self.create_event_block("Default")
        self._events.append(event)

    def profile(self, name: str, start: int, end: int, chain: int, instruction: int) -> None:
        self._add(E.Event(profile_event=E.ProfileEvent(name, chain, instruction, -1, None, None, start, end)))

    def profile_delegate(self, delegate_id, start: int, end: int, metadata: Optional[bytes] = None) -> None:
        """A backend's own event inside the current DelegateCall: `delegate_id` is an int or a name."""
        as_int = delegate_id if isinstance(delegate_id, int) else -1
        as_str = None if isinstance(delegate_id, int) else str(delegate_id)
        self._add(E.Event(profile_event=E.ProfileEvent(
            None, self.chain_id, self.debug_handle, as_int, as_str, metadata, start, end)))

    def log_value(self, value: object, chain: int, instruction: int, output: bool = False) -> None:
        """A debug event for `value` (tensor data goes to the debug buffer); no-op without one."""
        entry = self._value(value)
        if entry is None:
            return
        if output:
            entry.output = E.Bool(True)
        self._add(E.Event(debug_event=E.DebugEvent(None, chain, instruction, -1, None, entry)))

    def _value(self, value: object) -> Optional[E.Value]:
        if isinstance(value, torch.Tensor):
            t = self._tensor(value)
            return None if t is None else E.Value("Tensor", tensor=t)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            ts = [self._tensor(v) for v in value]
            return None if any(t is None for t in ts) else E.Value("TensorList", tensor_list=E.TensorList(ts))
        if isinstance(value, bool):
            return E.Value("Bool", bool_value=E.Bool(value))
        if isinstance(value, int):
            return E.Value("Int", int_value=E.Int(value))
        if isinstance(value, float):
            return E.Value("Double", double_value=E.Double(value))
        return None

    def _tensor(self, t: torch.Tensor) -> Optional[E.Tensor]:
        code = _layout.dtype_code(t.dtype)
        if code is None:
            return None
        data = t.detach().contiguous()
        nbytes = data.numel() * data.element_size()
        offset = -self._debug_used % DEBUG_ALIGNMENT + self._debug_used
        end = offset + nbytes
        if end > len(self._debug):
            self.dropped_outputs += 1
            return None
        if nbytes:
            ctypes.memmove((ctypes.c_char * nbytes).from_buffer(self._debug, offset), data.data_ptr(), nbytes)
        self._debug_used = end
        return E.Tensor(E.ScalarType(code), list(t.shape), list(t.stride()), offset)

    def etdump(self) -> E.ETDumpFlatCC:
        return E.ETDumpFlatCC(E.ETDUMP_VERSION, list(self.blocks))

    def get_etdump_data(self) -> bytes:
        from executorch.devtools.etdump.serialize import serialize_to_etdump_flatcc

        return serialize_to_etdump_flatcc(self.etdump())

    def get_debug_buffer(self) -> bytes:
        """The debug buffer as the runtime leaves it: the whole configured size."""
        return bytes(self._debug)
