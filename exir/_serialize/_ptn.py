"""The `.ptn` package: an uncompressed zip of a program blob and its constants as safetensors, duplicates once.

Members (fixed names, so the package may be renamed): `program.ptg` (the program bytes, opaque here),
`program.safetensors` (the constants that own their bytes) and, only when some constants repeat another's
bytes, `aliases.json` (key -> owning key). Immutable constants with equal dtype, shape and bytes are stored
once, the first key in sorted order owning them; mutable keys never alias, since equal bytes at save time do
not make two buffers one state. The safetensors part is written here (header, then each owner's bytes in
order) and read here, so neither side needs the safetensors package.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile

import torch

PTG_ENTRY = "program.ptg"
SAFETENSORS_ENTRY = "program.safetensors"
ALIASES_ENTRY = "aliases.json"
_RESERVED = "__metadata__"  # safetensors' header key for free-form metadata

_CODES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
          torch.bool: "BOOL", torch.complex64: "C64"}
_CODES.update({getattr(torch, n): c for n, c in (("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64"))
               if hasattr(torch, n)})
_DTYPES = {code: dtype for dtype, code in _CODES.items()}


def _bytes(t: torch.Tensor) -> bytes:
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _checked(constants: dict, mutable_keys: frozenset) -> None:
    for key, value in constants.items():
        if not isinstance(key, str):
            raise TypeError(f"write_ptn: data key must be str, got {type(key).__name__} {key!r}")
        if key == _RESERVED:
            raise ValueError(f"write_ptn: data key {key!r} is reserved by safetensors for its metadata; rename it")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"write_ptn: constant {key!r} must be a Tensor, got {type(value).__name__}")
        if value.dtype not in _CODES:
            raise KeyError(f"write_ptn: constant {key!r} has dtype {value.dtype}, which safetensors cannot hold; "
                           f"convert it to one of {sorted(str(d) for d in _CODES)}")
    unknown = sorted(set(mutable_keys) - set(constants))
    if unknown:
        raise ValueError(f"write_ptn: mutable keys {unknown} have no tensor data among the constants")
    spans = []
    for key in sorted(mutable_keys):
        t = constants[key]
        start = t.untyped_storage().data_ptr() + t.storage_offset() * t.element_size()
        spans.append((t.untyped_storage().data_ptr(), start, start + t.numel() * t.element_size(), key))
    spans.sort()
    for (s1, _, end1, k1), (s2, start2, _, k2) in zip(spans, spans[1:]):
        if s1 == s2 and start2 < end1:
            raise ValueError(f"write_ptn: mutable constants {k1!r} and {k2!r} share source storage; each mutable "
                             f"buffer is its own state, so give each its own tensor (clone one)")


def _owners_and_aliases(constants: dict, mutable_keys: frozenset) -> tuple[dict, dict]:
    owners, aliases, seen = {}, {}, {}
    for key in sorted(constants):
        t = constants[key]
        data = _bytes(t)
        if key not in mutable_keys:
            signature = (t.dtype, tuple(t.shape), hashlib.sha256(data).digest())
            if signature in seen:
                aliases[key] = seen[signature]
                continue
            seen[signature] = key
        owners[key] = (t, data)
    return owners, aliases


def _safetensors_chunks(owners: dict):
    header, offset = {}, 0
    for key, (t, data) in owners.items():
        header[key] = {"dtype": _CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    yield len(text).to_bytes(8, "little") + text
    for _, data in owners.values():
        yield data


def write_ptn(path: str, ptg: bytes, constants: dict, mutable_keys: frozenset = frozenset()) -> None:
    """Writes `ptg` and `constants` (data key -> tensor) as a `.ptn` package at `path`, creating its folder.
    Everything is checked before the file is touched, and the file is replaced only once complete."""
    _checked(constants, mutable_keys)
    owners, aliases = _owners_and_aliases(constants, mutable_keys)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as pkg:
            pkg.writestr(PTG_ENTRY, ptg)
            if owners:
                with pkg.open(SAFETENSORS_ENTRY, "w", force_zip64=True) as out:
                    for chunk in _safetensors_chunks(owners):
                        out.write(chunk)
            if aliases:
                pkg.writestr(ALIASES_ENTRY, json.dumps(aliases, indent=2, sort_keys=True))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _read_safetensors(data: bytes) -> dict:
    size = int.from_bytes(data[:8], "little")
    if 8 + size > len(data):
        raise ValueError(f"read_ptn: {SAFETENSORS_ENTRY}'s header claims {size} bytes; the entry has {len(data)}")
    header = json.loads(data[8: 8 + size])
    body = memoryview(data)[8 + size:]
    out = {}
    for key, info in header.items():
        if key == _RESERVED:
            continue
        start, end = info["data_offsets"]
        if not 0 <= start <= end <= len(body):
            raise ValueError(f"read_ptn: tensor {key!r} spans bytes {start}..{end} of a {len(body)}-byte data section")
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"read_ptn: tensor {key!r} has dtype code {info['dtype']!r}, which is not known here")
        raw = torch.frombuffer(bytearray(body[start:end]), dtype=torch.uint8)
        out[key] = raw.view(dtype).reshape(info["shape"])
    return out


def read_ptn(path: str) -> tuple[bytes, dict]:
    """A `.ptn` package's program bytes and its constants by data key, aliases resolved to their owners'
    tensors."""
    with zipfile.ZipFile(path) as pkg:
        names = set(pkg.namelist())
        ptg = pkg.read(PTG_ENTRY)
        owners = _read_safetensors(pkg.read(SAFETENSORS_ENTRY)) if SAFETENSORS_ENTRY in names else {}
        aliases = json.loads(pkg.read(ALIASES_ENTRY)) if ALIASES_ENTRY in names else {}
    if not isinstance(aliases, dict):
        raise ValueError(f"read_ptn: {ALIASES_ENTRY} must contain a JSON object (alias -> owner), "
                         f"got {type(aliases).__name__}")
    constants = dict(owners)
    for alias, owner in aliases.items():
        if not isinstance(owner, str):
            raise ValueError(f"read_ptn: alias {alias!r}: its owner name must be a string, got {owner!r}")
        if alias in owners:
            raise ValueError(f"read_ptn: key {alias!r} is both a safetensors owner and an alias of {owner!r}")
        if owner not in owners:
            raise ValueError(f"read_ptn: alias {alias!r} names owner {owner!r}, which has no safetensors entry")
        constants[alias] = owners[owner]
    return ptg, constants


__all__ = ["ALIASES_ENTRY", "PTG_ENTRY", "SAFETENSORS_ENTRY", "read_ptn", "write_ptn"]
