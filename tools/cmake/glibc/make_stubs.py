"""Write link-time stand-ins for an older glibc (zig's stub libraries) that GCC can link against."""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The stub libraries zig writes under the sonames they stand in for; its dynamic loader stub
# (libld.so.2) takes the architecture's loader name.
_LIBS = ("libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1")
_LOADERS = {"x86_64": "ld-linux-x86-64.so.2", "aarch64": "ld-linux-aarch64.so.1"}


def _zig() -> Path:
    spec = importlib.util.find_spec("ziglang")
    if spec is None or spec.origin is None:
        raise SystemExit(f"error: EXECUTORCH_GLIBC_TARGET needs the `ziglang` package (its glibc stubs) in "
                         f"{sys.executable}: pip install ziglang, or configure with -DEXECUTORCH_GLIBC_TARGET= "
                         f"to link against this machine's glibc")
    return Path(spec.origin).parent / "zig"


def _zig_stubs(version: str, arch: str, work: Path) -> Path:
    """Has zig build its stubs for `arch`-linux-gnu.`version` (a throwaway link) and returns their folder."""
    cache = work / "zig-cache"
    probe = work / "probe.c"
    probe.write_text("int executorch_probe(void) { return 0; }\n")
    env = dict(os.environ, ZIG_GLOBAL_CACHE_DIR=str(cache), ZIG_LOCAL_CACHE_DIR=str(cache))
    # No compiler runtime: only the libc stubs are wanted, and building compiler-rt takes minutes.
    cmd = [str(_zig()), "build-lib", "-dynamic", "-target", f"{arch}-linux-gnu.{version}", "-lc",
           "-fno-compiler-rt", "-fno-ubsan-rt", f"-femit-bin={work / 'probe.so'}", str(probe)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
    if done.returncode != 0:
        raise SystemExit(f"error: zig could not make glibc {version} stubs for {arch} "
                         f"(`{' '.join(cmd)}`): {done.stderr.strip()}")
    found = sorted({p.parent for p in cache.rglob("libc.so.6")})
    if len(found) != 1:
        raise SystemExit(f"error: expected one set of glibc stubs under {cache}, found {len(found)}; "
                         f"delete it and reconfigure")
    return found[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("version", help="the glibc to link against, e.g. 2.28")
    parser.add_argument("out", type=Path, help="folder to write the stubs and linker scripts into")
    parser.add_argument("--nonshared", required=True, type=Path,
                        help="the compiler's libc_nonshared.a (gcc -print-file-name=libc_nonshared.a)")
    parser.add_argument("--arch", default=platform.machine(),
                        help="the CPU the stubs are for (default: this machine's; aarch64 for a cross build)")
    args = parser.parse_args(argv)
    arch = args.arch
    if arch not in _LOADERS:
        raise SystemExit(f"error: EXECUTORCH_GLIBC_TARGET supports {', '.join(_LOADERS)}, not {arch}: "
                         f"configure with -DEXECUTORCH_GLIBC_TARGET= to link against this machine's glibc")
    if not args.nonshared.is_file():
        raise SystemExit(f"error: {args.nonshared} (libc_nonshared.a) does not exist: install the glibc development "
                         f"files (e.g. apt-get install libc6-dev)")
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    loader = _LOADERS[arch]
    with tempfile.TemporaryDirectory() as work:
        stubs = _zig_stubs(args.version, arch, Path(work))
        for soname in _LIBS:
            shutil.copyfile(stubs / soname, out / soname)
        shutil.copyfile(stubs / "libld.so.2", out / loader)
    # What `-lc`, `-lm`, ... find first: linker scripts naming the stubs, as the system's own
    # libc.so names the real libc.so.6 and the static helpers every program links.
    (out / "libc.so").write_text(
        f"GROUP ( {out}/libc.so.6 {args.nonshared.resolve()} AS_NEEDED ( {out}/{loader} ) )\n")
    for soname in _LIBS[1:]:
        (out / soname.split(".so")[0]).with_suffix(".so").write_text(f"INPUT ( {out}/{soname} )\n")
    print(out)


if __name__ == "__main__":
    main()
