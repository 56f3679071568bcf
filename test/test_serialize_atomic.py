"""Atomic writes (`write_chunks` to a path), which every .pte, .ptd, .bpte, ETRecord and ETDump write goes
through: concurrent writers, long names, symlinks, modes, errors naming the target, no temporaries left."""

from __future__ import annotations

import os
import re
import stat
import threading
import time

import pytest

from executorch.exir._serialize._atomic import STALE_AFTER_S, write_chunks


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_threads_writing_one_path_at_once_all_succeed_and_leave_one_whole_file(tmp_path):
    target = tmp_path / "model.pte"
    writers = 4
    meeting = threading.Barrier(writers, timeout=10)
    payloads = [[bytes([i]) * (1 << 16) for _ in range(16)] for i in range(writers)]
    errors = []

    def pieces(i):
        yield payloads[i][0]
        meeting.wait()  # every writer is mid-write before any finishes
        yield from payloads[i][1:]

    def write(i):
        try:
            write_chunks(target, pieces(i))
        except BaseException as e:  # noqa: BLE001 - collected for the assertion below
            errors.append(e)
            meeting.abort()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert target.read_bytes() in [b"".join(p) for p in payloads]
    assert [p.name for p in tmp_path.iterdir()] == ["model.pte"]


def test_a_name_at_the_file_system_limit_works(tmp_path):
    target = tmp_path / ("m" * 246 + ".pte")  # 250 characters
    write_chunks(target, [b"abc", b"def"])
    assert target.read_bytes() == b"abcdef"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_writing_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "model.pte"
    real.write_bytes(b"old")
    link = tmp_path / "link.pte"
    link.symlink_to(real)
    write_chunks(link, [b"new"])
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == b"new"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["model.pte"]


def test_an_existing_file_keeps_its_mode_and_a_new_one_gets_the_mode_open_gives(tmp_path):
    kept = tmp_path / "kept.pte"
    kept.write_bytes(b"old")
    kept.chmod(0o640)
    write_chunks(kept, [b"new"])
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_bytes() == b"new"
    fresh = tmp_path / "fresh.pte"
    write_chunks(fresh, [b"x"])
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~_umask()


@pytest.mark.parametrize("where", ["missing directory", "a directory"])
def test_errors_name_the_target_not_the_temporary(tmp_path, where):
    if where == "missing directory":
        target, kind = tmp_path / "no-such-dir" / "model.pte", FileNotFoundError
    else:
        target, kind = tmp_path / "model.pte", IsADirectoryError
        target.mkdir()
    with pytest.raises(kind) as info:
        write_chunks(target, [b"x"])
    assert info.value.filename == str(target) and info.value.filename2 is None
    assert str(target) in str(info.value) and not re.search(r"\.(tmp|partial)\b", str(info.value))
    assert sorted(p.name for p in tmp_path.iterdir()) == (["model.pte"] if where == "a directory" else [])


def test_an_exception_mid_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "model.pte"
    target.write_bytes(b"previous")

    def pieces():
        yield b"half"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_chunks(target, pieces())
    assert target.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["model.pte"]


def test_unrelated_files_survive_and_stale_temporaries_of_the_target_are_removed(tmp_path):
    target = tmp_path / "model.pte"
    # What another process's write in progress looks like, and names that only resemble ours.
    young = tmp_path / ".model.pte.0123abcd.tmp"
    other = tmp_path / ".other.pte.0123abcd.tmp"
    unrelated = tmp_path / f"model.pte.{os.getpid()}.partial"
    stale = tmp_path / ".model.pte.89abcdef.tmp"
    for p in (young, other, unrelated, stale):
        p.write_bytes(b"?")
    old = time.time() - STALE_AFTER_S - 60
    for p in (other, stale):
        os.utime(p, (old, old))
    write_chunks(target, [b"new"])
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (target, young, other, unrelated))


def test_the_file_reaches_the_disk_before_the_rename_and_the_rename_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(
        "fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("rename"), real_replace(a, b))[1])
    write_chunks(tmp_path / "model.pte", [b"x"])
    assert events == ["fsync file", "rename", "fsync dir"]
