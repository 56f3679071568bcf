"""What a data file serializer takes and returns: buffers plus, per key, the buffer it names."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from executorch.exir._serialize._named_data_store import DataEntry

__all__ = ["DataEntry", "DataPayload", "DataSerializer"]


@dataclass
class DataPayload:
    """`named_data[key].buffer_index` indexes `buffers` (bytes-like: bytes or zero-copy views)."""

    buffers: list = field(default_factory=list)
    named_data: dict[str, DataEntry] = field(default_factory=dict)


class DataSerializer(ABC):
    @abstractmethod
    def serialize(self, data: DataPayload) -> bytes: ...

    @abstractmethod
    def deserialize(self, blob) -> DataPayload: ...
