"""`Program` <-> `.pte` bytes: the FlatBuffer, the extended header and the data segments.

File layout, as the published exporter writes it:

    [root offset][b"ET12"][extended header, padded][rest of the FlatBuffer]
    [zero padding to segment_alignment][segment 0][padding][segment 1]...

The constant segment holds every `constant_buffer` entry, each padded to
`constant_tensor_alignment` except the last, and its per-buffer offsets go into
`Program.constant_segment`. Other segments (delegate blobs, named data) come from
`Program.segment_data`, indexed like the file's segments; the slot of the constant segment
is an empty placeholder there (and is left out when it is the last one). `Program.segments`
is derived: the writer computes it, the reader returns it empty.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Optional

from executorch.exir import schema as s
from executorch.exir._dtypes import element_size
from executorch.exir._serialize._alignment import (
    DEFAULT_SEGMENT_ALIGNMENT,
    DEFAULT_TENSOR_ALIGNMENT,
    aligned,
    check_alignment,
    padding_for,
)
from executorch.exir._serialize._flatbuffer_reader import read_flatbuffer
from executorch.exir._serialize._flatbuffer_writer import FILE_IDENTIFIER, as_byte_view, write_flatbuffer
from executorch.exir._serialize._header import HEADER_LENGTH, HEADER_OFFSET, ExtendedHeader, decode_header
from executorch.exir._serialize._join import join_bytes
from executorch.exir._serialize._named_data_store import DataEntry, NamedDataStoreOutput
from executorch.exir.error import SerializeError

DEFAULT_CONSTANT_TENSOR_ALIGNMENT = DEFAULT_TENSOR_ALIGNMENT
# The schema's force_align for inline delegate data; used when no delegate_alignment is given.
DEFAULT_DELEGATE_ALIGNMENT = DEFAULT_TENSOR_ALIGNMENT


def serialize_pte_chunks(
    program: s.Program,
    *,
    segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT,
    constant_tensor_alignment: int = DEFAULT_CONSTANT_TENSOR_ALIGNMENT,
    delegate_alignment: Optional[int] = None,
) -> list[s.BytesLike]:
    """The `.pte` image of `program` as pieces to write in order; constant and segment data are
    passed through as views, never copied. `program` is not modified."""
    check_alignment("segment_alignment", segment_alignment)
    check_alignment("constant_tensor_alignment", constant_tensor_alignment)
    if delegate_alignment is not None:
        check_alignment("delegate_alignment", delegate_alignment)
    inline_alignment = delegate_alignment or DEFAULT_DELEGATE_ALIGNMENT

    segment_pieces, fields = _layout_segments(program, segment_alignment, constant_tensor_alignment)
    flat = write_flatbuffer(
        dataclasses.replace(program, **fields),
        tensor_alignment=constant_tensor_alignment,
        delegate_alignment=inline_alignment,
    )
    segments: list[s.DataSegment] = fields["segments"]
    data_size = segments[-1].offset + segments[-1].size if segments else 0
    if data_size == 0:
        return [flat]

    # The header is padded to the largest force_align in the schema so that inserting it keeps
    # every aligned vector in the FlatBuffer aligned.
    header_length = aligned(HEADER_LENGTH, max(constant_tensor_alignment, inline_alignment))
    program_size = len(flat) + header_length
    base = aligned(program_size, segment_alignment)
    (root,) = struct.unpack_from("<I", flat, 0)
    head = (
        struct.pack("<I", root + header_length)
        + bytes(flat[4:HEADER_OFFSET])
        + ExtendedHeader(program_size, base, data_size).encode(header_length)
    )
    padding = [bytes(base - program_size)] if base > program_size else []
    return [head, flat[HEADER_OFFSET:], *padding, *segment_pieces]


def _extras(program: s.Program) -> tuple[Optional[list], Optional[NamedDataStoreOutput]]:
    """Views of the mutable-data buffers and the named data that `program.segment_data` holds."""
    segments = program.segment_data
    mutable = None
    if program.mutable_data_segments:
        mutable = []
        for sub in program.mutable_data_segments:
            seg = segments[sub.segment_index]
            ends = list(sub.offsets[1:]) + [len(seg)]
            mutable += [s.Buffer(seg[a:b]) for a, b in zip(sub.offsets, ends)]
    named = None
    if program.named_data:
        named = NamedDataStoreOutput()
        index_of: dict[int, int] = {}
        for n in program.named_data:
            if n.segment_index not in index_of:
                index_of[n.segment_index] = len(named.buffers)
                named.buffers.append(segments[n.segment_index])
            # The file does not record the alignment asked for; 1 claims nothing more.
            named.pte_data[n.key] = DataEntry(index_of[n.segment_index], 1)
    return mutable, named


def _as_bytes(data):
    if data is None:
        return None
    if isinstance(data, NamedDataStoreOutput):
        return {k: bytes(data.buffers[e.buffer_index]) for k, e in data.pte_data.items()}
    return [bytes(b.storage) for b in data]


@dataclasses.dataclass
class PTEFile:
    """A `.pte` file's contents: the program (its segment data included) plus, as ExecuTorch
    names them, views of its mutable-data buffers and its named data (`NamedDataStoreOutput`:
    `pte_data[key].buffer_index` indexes `buffers`), each None when the file has none."""

    program: s.Program
    mutable_data: Optional[list] = None
    named_data: Optional[NamedDataStoreOutput] = None

    @property
    def segment_data(self) -> list:
        return self.program.segment_data


def serialize_pte_binary(
    pte_file: "s.Program | PTEFile",
    *,
    segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT,
    constant_tensor_alignment: Optional[int] = None,
    delegate_alignment: Optional[int] = None,
    extract_delegate_segments: bool = False,
) -> bytes:
    """The `.pte` image of `pte_file` (a `PTEFile` or a `Program`) as one bytes object (see
    `serialize_pte_chunks`). With `extract_delegate_segments`, delegate payloads held inline in
    the FlatBuffer move to segments of their own; payloads already in segments stay there."""
    program = pte_file
    if isinstance(program, PTEFile):
        # The Program carries every segment itself; separate data could only disagree with it.
        mutable, named = _extras(program.program)
        if _as_bytes(program.mutable_data) != _as_bytes(mutable) or _as_bytes(program.named_data) != _as_bytes(named):
            raise SerializeError(
                "PTEFile.mutable_data / named_data differ from the data its program's segment_data holds; "
                "put segment bytes in Program.segment_data (named in Program.named_data / "
                "mutable_data_segments) and leave these fields None or as read"
            )
        program = program.program
    if not isinstance(extract_delegate_segments, bool):
        raise SerializeError(f"extract_delegate_segments must be True or False, not {extract_delegate_segments!r}")
    if extract_delegate_segments:
        program = _inline_delegates_to_segments(program)
    return join_bytes(
        serialize_pte_chunks(
            program,
            segment_alignment=segment_alignment,
            constant_tensor_alignment=(DEFAULT_CONSTANT_TENSOR_ALIGNMENT if constant_tensor_alignment is None
                                       else constant_tensor_alignment),
            delegate_alignment=delegate_alignment,
        )
    )


def _inline_delegates_to_segments(program: s.Program) -> s.Program:
    """A copy of `program` whose inline delegate payloads are segments appended after its others."""
    inline = [d for plan in program.execution_plan for d in plan.delegates
              if d.processed.location == s.DataLocation.INLINE]
    if not inline:
        return program
    segment_data = list(program.segment_data) or [b""]  # slot 0 belongs to the constant segment
    moved: dict[int, int] = {}
    plans = []
    for plan in program.execution_plan:
        delegates = []
        for d in plan.delegates:
            if d.processed.location == s.DataLocation.INLINE:
                if d.processed.index not in moved:
                    moved[d.processed.index] = len(segment_data)
                    segment_data.append(program.backend_delegate_data[d.processed.index].data)
                ref = s.BackendDelegateDataReference(s.DataLocation.SEGMENT, moved[d.processed.index])
                d = dataclasses.replace(d, processed=ref)
            delegates.append(d)
        plans.append(dataclasses.replace(plan, delegates=delegates))
    return dataclasses.replace(program, execution_plan=plans, backend_delegate_data=[], segment_data=segment_data)


def _layout_segments(
    program: s.Program, segment_alignment: int, tensor_alignment: int
) -> tuple[list[s.BytesLike], dict]:
    """The segment data pieces (with padding) and the Program fields that describe them."""
    fields: dict = {}
    contents: list[list[memoryview]] = []
    for i, data in enumerate(program.segment_data):
        contents.append([as_byte_view(data, f"Program.segment_data[{i}]")])
    if program.constant_buffer:
        index = program.constant_segment.segment_index
        if index > len(contents):
            raise SerializeError(
                f"constant_segment.segment_index is {index} but segment_data has only {len(contents)} entries; "
                "use 0 (where the published exporter puts constants) or an index at most len(segment_data)"
            )
        if index < len(contents) and len(contents[index][0]):
            raise SerializeError(
                f"Program.segment_data[{index}] holds {len(contents[index][0])} bytes but that slot belongs "
                "to the constant segment (constant_segment.segment_index); leave it empty (b'') and put "
                "constant tensors in constant_buffer"
            )
        contents.extend([] for _ in range(index + 1 - len(contents)))
        pieces, offsets = _constant_pieces(program.constant_buffer, tensor_alignment)
        contents[index] = pieces
        fields["constant_buffer"] = []
        fields["constant_segment"] = s.SubsegmentOffsets(index, offsets)

    out: list[s.BytesLike] = []
    segments: list[s.DataSegment] = []
    end = 0
    for pieces in contents:
        size = sum(len(p) for p in pieces)
        offset = aligned(end, segment_alignment)
        if offset > end:
            out.append(bytes(offset - end))
        out.extend(p for p in pieces if len(p))
        segments.append(s.DataSegment(offset, size))
        end = offset + size
    fields["segments"] = segments
    return out, fields


def _constant_pieces(buffers: list[s.Buffer], alignment: int) -> tuple[list[memoryview], list[int]]:
    """Views of the constant buffers with zero padding between them, and each buffer's offset."""
    pieces: list = []
    offsets: list[int] = []
    offset = 0
    last = len(buffers) - 1
    for i, buf in enumerate(buffers):
        view = as_byte_view(buf.storage, f"Program.constant_buffer[{i}].storage")
        offsets.append(offset)
        pieces.append(view)
        offset += len(view)
        pad = padding_for(offset, alignment)
        if pad and i < last:
            pieces.append(bytes(pad))
            offset += pad
    return pieces, offsets


def deserialize_pte_binary(data: s.BytesLike) -> PTEFile:
    """The contents of a `.pte` image as a `PTEFile` (`.program`, `.segment_data`)."""
    program = read_program(data)
    mutable, named = _extras(program)
    return PTEFile(program, mutable, named)


def read_program(data: s.BytesLike, *, verify: bool = True) -> s.Program:
    """The `Program` in a `.pte` image; constant and segment data are views over `data`.

    Raises SerializeError, with the reason, when `data` is not a well-formed `.pte`. With
    `verify=False` (a trusted file) the program-wide check that every delegate, named-data and
    mutable-data reference names a segment the file holds is skipped."""
    view = as_byte_view(data, "the .pte data")
    size = len(view)
    if size < HEADER_OFFSET:
        raise SerializeError(
            f"the .pte data is {size} bytes, too short for a FlatBuffer (at least {HEADER_OFFSET}); "
            "the file is truncated or empty, re-export it"
        )
    ident = bytes(view[4:HEADER_OFFSET])
    if ident != FILE_IDENTIFIER:
        expected = FILE_IDENTIFIER.decode()
        if ident[:2] == FILE_IDENTIFIER[:2] and ident[2:].isdigit():
            raise SerializeError(
                f"a .pte of another format version (file identifier {ident!r} at offset 4, this reader takes "
                f"{expected}); re-export it with this version of executorch"
            )
        raise SerializeError(
            f"not a .pte file (no {expected} identifier at offset 4, found {ident!r}); check the path names "
            "a program written by write_to_file()"
        )
    header = decode_header(view)
    program_size = header.program_size if header else size
    program = read_flatbuffer(view[:program_size])
    base = header.segment_base_offset if header else 0
    segments = _segment_views(program.segments, view, base, program_size)
    if verify:
        _check_references(program, segments)
    return _restore(program, segments)


def _segment_views(
    segments: list[s.DataSegment], view: memoryview, base: int, program_size: int
) -> list[memoryview]:
    views = []
    for i, seg in enumerate(segments):
        if seg.size == 0:
            views.append(view[0:0])
            continue
        if base == 0:
            raise SerializeError(
                f"segment {i} holds {seg.size} bytes but the file has no segment base offset (no extended "
                "header); the file is corrupt, re-export it"
            )
        start = base + seg.offset
        if start + seg.size > len(view):
            raise SerializeError(
                f"segment {i} ({seg.size} bytes at {start}) runs past the end of the {len(view)}-byte file; "
                "the file is truncated, re-export or re-copy it"
            )
        views.append(view[start : start + seg.size])
    return views


def _check_references(program: s.Program, segments: list[memoryview]) -> None:
    """Every segment and inline-data index in the program names something the file holds."""

    def check(index: int, limit: int, what: str, where: str) -> None:
        if index >= limit:
            raise SerializeError(
                f"{what} refers to {where} {index} but the file has {limit}; the file is corrupt, re-export it"
            )

    for p, plan in enumerate(program.execution_plan):
        for d, delegate in enumerate(plan.delegates):
            ref = delegate.processed
            what = f"execution_plan[{p}].delegates[{d}] ({delegate.id!r})"
            if ref.location == s.DataLocation.SEGMENT:
                check(ref.index, len(segments), what, "segment")
            else:
                check(ref.index, len(program.backend_delegate_data), what, "inline data entry")
    for i, named in enumerate(program.named_data or ()):
        check(named.segment_index, len(segments), f"named_data[{i}] ({named.key!r})", "segment")
    for i, sub in enumerate(program.mutable_data_segments or ()):
        check(sub.segment_index, len(segments), f"mutable_data_segments[{i}]", "segment")
        for offset in sub.offsets:
            if offset > len(segments[sub.segment_index]):
                raise SerializeError(
                    f"mutable_data_segments[{i}] has offset {offset} past the end of its "
                    f"{len(segments[sub.segment_index])}-byte segment; the file is corrupt, re-export it"
                )


def _restore(program: s.Program, segments: list[memoryview]) -> s.Program:
    """Moves the constant segment back into `constant_buffer` and other segments into `segment_data`."""
    const = program.constant_segment
    index = const.segment_index
    if const.offsets:
        if program.constant_buffer:
            raise SerializeError(
                "the program has both inline constant_buffer entries and a constant segment; the file "
                "is corrupt, re-export it"
            )
        if index >= len(segments):
            raise SerializeError(
                f"constant_segment.segment_index is {index} but the file has {len(segments)} segments; "
                "the file is corrupt, re-export it"
            )
        program.constant_buffer = _split_constants(program, const.offsets, segments[index])
        program.constant_segment = s.SubsegmentOffsets(index, [])
        segments = list(segments)
        segments[index] = b""
        if index == len(segments) - 1:
            segments.pop()
    program.segment_data = segments
    program.segments = []
    return program


def _split_constants(program: s.Program, offsets: list[int], segment: memoryview) -> list[s.Buffer]:
    """One Buffer per constant, without the alignment padding that follows it in the segment."""
    ends = offsets[1:] + [len(segment)]
    for i, (start, end) in enumerate(zip(offsets, ends)):
        if not start <= end <= len(segment):
            raise SerializeError(
                f"constant_segment offset {i} ({start}..{end}) is out of order or outside the "
                f"{len(segment)}-byte constant segment; the file is corrupt, re-export it"
            )
    used = _constant_sizes(program)
    buffers = []
    for i, (start, end) in enumerate(zip(offsets, ends)):
        need = used.get(i)
        if need is not None and 0 <= need and start + need < end:
            tail = segment[start + need : end]
            if tail == bytes(len(tail)):
                end = start + need
        buffers.append(s.Buffer(segment[start:end]))
    return buffers


def _constant_sizes(program: s.Program) -> dict[int, int]:
    """Bytes each constant buffer must hold, from the tensors that read it."""
    sizes: dict[int, int] = {}
    for plan in program.execution_plan:
        for value in plan.values:
            t = value.val
            if type(t) is s.Tensor and t.data_buffer_idx and t.allocation_info is None:
                numel = 1
                for d in t.sizes:
                    numel *= d
                need = (t.storage_offset + numel) * (element_size(t.scalar_type) or 1)
                if need > sizes.get(t.data_buffer_idx, -1):
                    sizes[t.data_buffer_idx] = need
    return sizes


def __getattr__(name: str):
    # Upstream's tooling names; their code ships with the full wheel only (tools/packaging/components.py).
    if name in ("_ExtendedHeader", "_get_extended_header", "_program_to_json", "_json_to_program"):
        from executorch.exir._serialize import _pte_tools

        return getattr(_pte_tools, name)
    raise AttributeError(f"module 'executorch.exir._serialize._program' has no attribute {name!r}")
