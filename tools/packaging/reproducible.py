"""Make wheel and sdist bytes depend on the sources only: a fixed timestamp and normalized file modes."""

from __future__ import annotations

import gzip
import os
import stat
import subprocess
import tarfile
import zipfile
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


def recompress_zip(path: Path, level: int = 9) -> None:
    """Deflate every member of the zip at `path` again at `level` (zlib's best by default), keeping
    names, order, times and modes: the wheel writer leaves zlib's default level, which packs worse."""
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for old in src.infolist():
            new = zipfile.ZipInfo(old.filename, old.date_time)
            new.external_attr, new.create_system = old.external_attr, old.create_system
            new.compress_type = old.compress_type
            dst.writestr(new, src.read(old), compresslevel=level)
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
