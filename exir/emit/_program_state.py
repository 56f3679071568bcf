"""Program assembly: the tables and segment numbering a program's methods share as they are emitted."""

from __future__ import annotations

from typing import Any

import torch

from executorch.exir import schema as S
from executorch.exir._serialize._named_data_store import DataEntry, NamedDataStore
from executorch.exir._serialize.data_serializer import DataPayload
from executorch.exir._tensor_data import same_bytes, tensor_bytes
from executorch.exir.config import ExecutorchBackendConfig
from executorch.exir.error import ExportError

# The `.ptd` file name (without extension) of constants that `external_constants=True` moves out.
DEFAULT_EXTERNAL_TAG = "_default_external_constant"


class ConstantTable:
    """The program's constant tensor data, shared by all methods; identical tensors stored once."""

    def __init__(self) -> None:
        self.buffers: list[S.Buffer] = [S.Buffer(storage=b"")]
        # Candidates by size and last bytes; equal content is confirmed byte for byte.
        self._candidates: dict[tuple, list[int]] = {}
        self._keep: list[torch.Tensor] = []

    def add(self, t: torch.Tensor) -> int:
        data = tensor_bytes(t)
        candidates = self._candidates.setdefault((len(data), bytes(data[-16:])), [])
        for idx in candidates:
            if same_bytes(self.buffers[idx].storage, data):
                return idx
        idx = len(self.buffers)
        candidates.append(idx)
        self.buffers.append(S.Buffer(storage=data))
        self._keep.append(t)
        return idx


class ExternalConstants:
    """Constants tagged for `.ptd` files: per tag (file name), each key's tensor and layout.

    `tag_of(node)` decides, per parameter or buffer placeholder, the file its data goes to
    (None keeps it in the `.pte`). Keys are the tensors' fully qualified names."""

    def __init__(self, tag_of=None) -> None:
        self.tag_of = tag_of
        self.files: dict[str, dict[str, tuple[torch.Tensor, Any]]] = {}

    def add(self, tag: str, key: str, t: torch.Tensor, layout) -> None:
        table = self.files.setdefault(tag, {})
        old = table.get(key)
        if old is not None and not (old[0] is t or (old[0].shape == t.shape and old[0].dtype == t.dtype
                                                     and torch.equal(old[0], t))):
            raise ExportError(
                f"external constant {key!r} in {tag}.ptd holds different data in two methods; give the "
                "tensors distinct names (module attributes) or keep one of them in the .pte")
        table[key] = (t, layout)


class DelegateTable:
    """The program's delegate payloads and named data, shared by all methods: payloads go into
    segments after the program (or inline in it), named data into segments of their own."""

    FIRST_SEGMENT = 1  # segment 0 is the constant segment

    def __init__(self, extract_segments: bool = True) -> None:
        self.extract_segments = extract_segments
        self.payloads: list[bytes] = []
        self.inline: list[S.BackendDelegateInlineData] = []
        self.seen: dict[bytes, int] = {}
        self.named = NamedDataStore()

    def add(self, lowered) -> S.BackendDelegate:
        data = bytes(lowered.processed_bytes)
        if data not in self.seen:  # a payload met again (a repeated block's) is stored once, as upstream does
            self.seen[data] = len(self.seen)
            if self.extract_segments:
                self.payloads.append(data)
            else:
                self.inline.append(S.BackendDelegateInlineData(data))
        index = self.seen[data]
        ref = (S.BackendDelegateDataReference(S.DataLocation.SEGMENT, self.FIRST_SEGMENT + index)
               if self.extract_segments else S.BackendDelegateDataReference(S.DataLocation.INLINE, index))
        if lowered.named_data_store_output is not None:
            self.named.merge_named_data_store(lowered.named_data_store_output)
        specs = [S.CompileSpec(c.key, bytes(c.value)) for c in lowered.compile_specs]
        return S.BackendDelegate(id=lowered.backend_id, processed=ref, compile_specs=specs)

    def segments(self) -> tuple[list[bytes], list[S.NamedData], dict[int, int]]:
        """The segment contents (payloads, then named data) numbered from FIRST_SEGMENT, the
        named-data table, and each named buffer's alignment. Named data with an external tag
        goes to `.ptd` files instead (`NamedDataStore.get_named_data_store_output().external_data`)."""
        out = self.named.get_named_data_store_output()
        named_base = self.FIRST_SEGMENT + len(self.payloads)
        table = [S.NamedData(key, named_base + e.buffer_index) for key, e in out.pte_data.items()]
        align: dict[int, int] = {}
        for e in out.pte_data.values():
            align[e.buffer_index] = max(align.get(e.buffer_index, 1), e.alignment)
        return list(self.payloads) + list(out.buffers), table, align


class MutableDataTable:
    """Initial contents of the program's mutable buffers that ask for them (`et_init_buffer`):
    entry 0 is empty, as in the constant table; a tensor refers to its entry by data_buffer_idx."""

    def __init__(self) -> None:
        self.buffers: list[bytes] = [b""]

    def add(self, t: torch.Tensor) -> int:
        self.buffers.append(tensor_bytes(t))
        return len(self.buffers) - 1


def _concatenate(buffers: list[bytes], alignment: int) -> tuple[bytes, list[int]]:
    """The buffers back to back, each starting at a multiple of `alignment`, and their offsets."""
    blob, offsets = bytearray(), []
    for b in buffers:
        blob += bytes(-len(blob) % alignment)
        offsets.append(len(blob))
        blob += b
    return bytes(blob), offsets


class ProgramState:
    """What all methods share: tables and config; `program(plans)` numbers the segments."""

    def __init__(self, config: ExecutorchBackendConfig) -> None:
        self.constants = ConstantTable()
        self.delegates = DelegateTable(config.extract_delegate_segments)
        ext = config.external_constants
        self.external = ExternalConstants((lambda node: True) if ext is True else (ext or None))
        self.mutable = MutableDataTable()
        self.config = config

    def program(self, plans: list[S.ExecutionPlan]) -> S.Program:
        segment_data, named, align = self.delegates.segments()
        for buffer_index, a in align.items():
            if a > self.config.segment_alignment:
                raise ExportError(
                    f"named data asks for {a}-byte alignment but segments are aligned to "
                    f"ExecutorchBackendConfig.segment_alignment={self.config.segment_alignment}; "
                    f"raise segment_alignment to at least {a}"
                )
        segment_data = [b"", *segment_data] if segment_data else []
        mutable_segments = None
        if len(self.mutable.buffers) > 1:
            # One segment of initial contents, after the others; the runtime copies them into the
            # planned buffers at load, so 16-byte steps are alignment enough.
            blob, offsets = _concatenate(self.mutable.buffers, 16)
            segment_data = segment_data or [b""]
            mutable_segments = [S.SubsegmentOffsets(segment_index=len(segment_data), offsets=offsets)]
            segment_data.append(blob)
        return S.Program(
            version=0,
            execution_plan=plans,
            constant_buffer=self.constants.buffers,
            backend_delegate_data=self.delegates.inline,
            segments=[],
            constant_segment=S.SubsegmentOffsets(segment_index=0, offsets=[]),
            named_data=named or None,
            segment_data=segment_data,
            mutable_data_segments=mutable_segments,
        )

    def data_files(self) -> dict:
        """Per `.ptd` file name: the payload (tensor views and layouts, then delegates' named data)."""
        named = self.delegates.named.get_named_data_store_output()
        files: dict[str, DataPayload] = {}
        for tag, entries in self.external.files.items():
            payload = files.setdefault(tag, DataPayload())
            for key, (t, layout) in entries.items():
                payload.named_data[key] = DataEntry(len(payload.buffers), 1, layout)
                payload.buffers.append(tensor_bytes(t))
        for tag, entries in named.external_data.items():
            payload = files.setdefault(tag, DataPayload())
            base: dict[int, int] = {}
            for key, e in entries.items():
                if key in payload.named_data:
                    raise ExportError(
                        f"named data {key!r} for {tag}.ptd clashes with an external constant of that name; give "
                        "the delegate's data a distinct key")
                if e.buffer_index not in base:
                    base[e.buffer_index] = len(payload.buffers)
                    payload.buffers.append(named.buffers[e.buffer_index])
                payload.named_data[key] = DataEntry(base[e.buffer_index], e.alignment, e.tensor_layout)
        return files
