"""Make wheel and sdist bytes depend on the sources only: a fixed timestamp and normalized file modes."""

from __future__ import annotations

import gzip
import os
import stat
import struct
import subprocess
import tarfile
import zipfile
import zlib
from pathlib import Path

# 1980-01-02, the earliest date a zip entry can hold, for trees with no git history.
FALLBACK_EPOCH = 315619200


def default_source_date_epoch(root: Path) -> str:
    """SOURCE_DATE_EPOCH as set, else the last commit's time, else a fixed date."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return os.environ["SOURCE_DATE_EPOCH"]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%ct"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return str(FALLBACK_EPOCH)
    return out if out.isdigit() and int(out) >= FALLBACK_EPOCH else str(FALLBACK_EPOCH)


def normalize_modes(tree: Path) -> None:
    """Set 0755 on executables and directories and 0644 on every other file below `tree`."""
    for path in sorted(tree.rglob("*")):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        executable = path.is_dir() or mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        path.chmod(0o755 if executable else 0o644)


# zopfli's settings for the minimal wheel: 15 iterations without block splitting pack its members within
# ~0.4 KB of zopfli's best (block splitting) in a quarter of the time (BENCHMARKS.md "Wheels").
ZOPFLI_ITERATIONS = 15


def _zlib_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def _zopfli_deflate(data: bytes) -> bytes:
    import zopfli.zlib

    # A zlib stream: 2 header bytes, the raw deflate stream a zip member holds, then a 4-byte checksum.
    return zopfli.zlib.compress(data, numiterations=ZOPFLI_ITERATIONS, blocksplitting=0)[2:-4]


def _zip_bytes(members: list[tuple[zipfile.ZipInfo, bytes]], deflate) -> bytes:
    # The layout zipfile writes for a seekable file: local header, deflate stream, no extra fields or
    # data descriptors, then the central directory; only the deflate streams come from `deflate`.
    out, central = bytearray(), bytearray()
    for info, data in members:
        name, packed = info.filename.encode(), deflate(data)
        year, month, day, hour, minute, second = info.date_time
        fields = struct.pack("<HHHHIIIH", 0 if name.isascii() else 0x800, zipfile.ZIP_DEFLATED,
                             hour << 11 | minute << 5 | second // 2, (year - 1980) << 9 | month << 5 | day,
                             zlib.crc32(data), len(packed), len(data), len(name))
        if max(len(data), len(out)) >= 0xFFFFFFFF:
            raise ValueError(f"{info.filename}: a zip64 archive is needed, which this writer does not produce")
        central += struct.pack("<4sBBH", b"PK\x01\x02", 20, info.create_system, 20) + fields[:-2] + struct.pack(
            "<HHHHHII", len(name), 0, 0, 0, 0, info.external_attr, len(out)) + name
        out += struct.pack("<4sH", b"PK\x03\x04", 20) + fields + b"\0\0" + name + packed
    count = len(members)
    return bytes(out + central + struct.pack("<4s4HIIH", b"PK\x05\x06", 0, 0, count, count, len(central), len(out), 0))


def recompress_zip(path: Path, zopfli: bool = False) -> None:
    """Deflate every member of the zip at `path` again, keeping names, order, times and modes: at zlib's best
    level (the wheel writer leaves its default, which packs worse), or with zopfli when `zopfli` (smaller
    standard deflate streams, slower to make; the `zopfli` package must be importable)."""
    with zipfile.ZipFile(path) as src:
        members = [(info, src.read(info)) for info in src.infolist()]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(_zip_bytes(members, _zopfli_deflate if zopfli else _zlib_deflate))
    os.replace(tmp, path)


def write_tar_gz(path: str, root: Path, base_dir: str) -> str:
    """Write `root/base_dir` to the .tar.gz `path` with every time SOURCE_DATE_EPOCH, sorted members,
    owner 0 with no names, and modes 0755 (directories, executables) or 0644; return `path`."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or FALLBACK_EPOCH)
    top = root / base_dir
    members = [top] + sorted(top.rglob("*"))

    def normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime = epoch
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        if not info.issym():
            info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
        return info

    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in members:
            tar.add(member, arcname=member.relative_to(root).as_posix(), recursive=False, filter=normalized)
    return path
