"""`Cord`: a file's bytes as a list of pieces, joined or written only when asked (ExecuTorch's name)."""

from __future__ import annotations

from typing import Iterable, Optional, Union

Piece = Union[bytes, bytearray, memoryview]


class Cord:
    """A sequence of bytes-like pieces standing for their concatenation, without copying them."""

    def __init__(self, data: Optional[Union[Piece, "Cord", Iterable[Piece]]] = None) -> None:
        self._pieces: list = []
        self._size = 0
        if isinstance(data, (bytes, bytearray, memoryview, Cord)):
            self.append(data)
        elif data is not None:
            for piece in data:
                self.append(piece)

    def append(self, data: Union[Piece, "Cord"]) -> None:
        pieces = data._pieces if isinstance(data, Cord) else [data]
        for p in pieces:
            self._pieces.append(p)
            self._size += memoryview(p).nbytes

    def __len__(self) -> int:
        return self._size

    def __bytes__(self) -> bytes:
        from executorch.exir._serialize._join import join_bytes

        return join_bytes(self._pieces)

    def write_to_file(self, f) -> None:
        """Write the bytes to an open binary file, or atomically to a path."""
        from executorch.exir._serialize._atomic import write_chunks

        write_chunks(f, self._pieces)
