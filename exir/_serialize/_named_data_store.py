"""`NamedDataStore`: byte blobs stored by key beside the program, for backends to read at init."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional

from executorch.exir._serialize._alignment import is_power_of_two
from executorch.exir.error import ExportError


@dataclass
class DataEntry:
    buffer_index: int
    alignment: int
    tensor_layout: Optional[object] = None


@dataclass
class NamedDataStoreOutput:
    """Deduplicated buffers, and for each key the buffer (and alignment) it names.
    `pte_data` goes into the `.pte`; `external_data` (by tag) into `.ptd` files."""

    buffers: list[bytes] = field(default_factory=list)
    pte_data: dict[str, DataEntry] = field(default_factory=dict)
    external_data: dict[str, dict[str, DataEntry]] = field(default_factory=dict)


class NamedDataStore:
    """Collects named data; the same bytes under two keys are stored once."""

    def __init__(self) -> None:
        self._buffers: list[bytes] = []
        self._by_digest: dict[bytes, int] = {}
        self._pte: dict[str, DataEntry] = {}
        self._external: dict[str, dict[str, DataEntry]] = {}

    def add_named_data(self, key: str, data, alignment: Optional[int] = 1, tensor_layout=None,
                       external_tag: Optional[str] = None) -> None:
        """Store `data` (bytes or a tensor) under `key`; the runtime finds it at `alignment`."""
        alignment = 1 if alignment is None else alignment
        if not is_power_of_two(alignment):
            raise ExportError(f"named data {key!r}: alignment {alignment!r} must be a positive power of two")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            import torch

            if not isinstance(data, torch.Tensor):
                raise ExportError(f"named data {key!r} is a {type(data).__name__}; pass bytes or a torch.Tensor")
            from executorch.exir._tensor_data import tensor_bytes

            data = tensor_bytes(data.detach().contiguous())
        data = bytes(data)
        table = self._pte if external_tag is None else self._external.setdefault(external_tag, {})
        digest = hashlib.sha256(data).digest()
        index = self._by_digest.get(digest)
        if index is None:
            index = self._by_digest[digest] = len(self._buffers)
            self._buffers.append(data)
        old = table.get(key)
        if old is not None and old.buffer_index != index:
            raise ExportError(f"named data key {key!r} is already used for different bytes; pick a unique key")
        align = max(alignment, old.alignment) if old is not None else alignment
        table[key] = DataEntry(index, align, tensor_layout)

    def get_named_data_store_output(self) -> NamedDataStoreOutput:
        return NamedDataStoreOutput(list(self._buffers), dict(self._pte),
                                    {k: dict(v) for k, v in self._external.items()})

    def merge_named_data_store(self, other: NamedDataStoreOutput) -> None:
        """Add every entry of another store's output (a backend's) to this one."""
        for key, entry in other.pte_data.items():
            self.add_named_data(key, other.buffers[entry.buffer_index], entry.alignment, entry.tensor_layout)
        for tag, entries in other.external_data.items():
            for key, entry in entries.items():
                self.add_named_data(key, other.buffers[entry.buffer_index], entry.alignment, entry.tensor_layout, tag)
