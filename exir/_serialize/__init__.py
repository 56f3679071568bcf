"""Program <-> `.pte` bytes: the FlatBuffer written and read directly, plus header and segments."""

from executorch.exir._serialize._program import (
    DEFAULT_CONSTANT_TENSOR_ALIGNMENT,
    DEFAULT_DELEGATE_ALIGNMENT,
    DEFAULT_SEGMENT_ALIGNMENT,
    PTEFile,
    deserialize_pte_binary,
    read_program,
    serialize_pte_binary,
    serialize_pte_chunks,
)

__all__ = [
    "DEFAULT_CONSTANT_TENSOR_ALIGNMENT",
    "DEFAULT_DELEGATE_ALIGNMENT",
    "DEFAULT_SEGMENT_ALIGNMENT",
    "PTEFile",
    "deserialize_pte_binary",
    "read_program",
    "serialize_pte_binary",
    "serialize_pte_chunks",
]
