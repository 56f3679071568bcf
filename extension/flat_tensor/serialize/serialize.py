"""The `.ptd` serializer at its published path; it is part of `executorch.exir._serialize` (`_flat_tensor`)."""

from executorch.exir._serialize._flat_tensor import (FILE_IDENTIFIER, FlatTensorConfig, FlatTensorHeader,
                                                     FlatTensorSerializer, NamedTensorData, read_ptd,
                                                     serialize_ptd_chunks)

__all__ = ["FILE_IDENTIFIER", "FlatTensorConfig", "FlatTensorHeader", "FlatTensorSerializer", "NamedTensorData",
           "read_ptd", "serialize_ptd_chunks"]
