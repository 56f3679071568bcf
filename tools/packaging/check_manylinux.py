"""List the versioned symbols every ELF file of a wheel (or folder) needs and check them against a manylinux policy.

  python tools/packaging/check_manylinux.py WHEEL_OR_DIR [--plat manylinux_2_28_x86_64] [--list]

The policy (allowed symbol versions and libraries per tag) is read from the installed auditwheel
package, the same file `auditwheel show` judges by. Besides versions above the tag, it fails on an
undefined symbol with no version (outside the Python C API): that is a glibc or libstdc++ function
the link did not find, which would go unnoticed by a version check and fail to load elsewhere.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import zipfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection

_ARCH = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}
# Symbols an extension module leaves for the interpreter that loads it.
_PYTHON_API = ("Py", "_Py")
# The dynamic loader comes with glibc; auditwheel judges neither it nor the versions asked of it.
_LOADERS = ("ld-linux", "ld64.so")


@dataclass
class ElfNeeds:
    arch: str
    needed: list[str]
    # "GLIBC_2.29" -> symbols bound to it
    versions: dict[str, set[str]] = field(default_factory=dict)
    unversioned: set[str] = field(default_factory=set)
    defines: set[str] = field(default_factory=set)


def policy(plat: str) -> dict:
    """auditwheel's policy entry for `plat` (manylinux_2_28 or manylinux_2_28_x86_64)."""
    text = resources.files("auditwheel").joinpath("policy", "manylinux-policy.json").read_text()
    for entry in json.loads(text):
        if plat == entry["name"] or plat.startswith(entry["name"] + "_") or plat in entry.get("aliases", []):
            return entry
    raise SystemExit(f"error: auditwheel's policy has no tag {plat}: give one such as manylinux_2_28_x86_64")


def elf_needs(data: bytes) -> ElfNeeds:
    """The libraries, symbol versions and unversioned undefined symbols of one ELF file."""
    elf = ELFFile(io.BytesIO(data))
    dynamic = elf.get_section_by_name(".dynamic")
    needed = [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"] if dynamic else []
    needed = [lib for lib in needed if not lib.startswith(_LOADERS)]
    out = ElfNeeds(arch=_ARCH.get(elf["e_machine"], elf["e_machine"]), needed=needed)
    dynsym = elf.get_section_by_name(".dynsym")
    if dynsym is None:  # a static executable asks nothing of the system
        return out
    index_names: dict[int, str] = {}
    versym = None
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for verneed, auxes in section.iter_versions():
                for aux in auxes:
                    index_names[aux.entry.vna_other] = "" if verneed.name.startswith(_LOADERS) else aux.name
        elif isinstance(section, GNUVerSymSection):
            versym = section
    for i, sym in enumerate(dynsym.iter_symbols()):
        if i == 0:
            continue
        if sym.entry.st_shndx != "SHN_UNDEF":
            out.defines.add(sym.name)
            continue
        ndx = versym.get_symbol(i).entry.ndx if versym is not None else "VER_NDX_GLOBAL"
        ndx = ndx & 0x7FFF if isinstance(ndx, int) else ndx
        if ndx in index_names:
            if index_names[ndx]:
                out.versions.setdefault(index_names[ndx], set()).add(sym.name)
        elif sym.entry.st_info.bind != "STB_WEAK" and not sym.name.startswith(_PYTHON_API):
            out.unversioned.add(sym.name)
    return out


def elf_files(path: Path) -> dict[str, bytes]:
    """Every ELF file in a wheel or under a folder, by its name there."""
    found: dict[str, bytes] = {}
    if path.is_dir():
        items = ((str(p.relative_to(path)), p.read_bytes) for p in sorted(path.rglob("*"))
                 if p.is_file() and not p.is_symlink())
        for name, read in items:
            data = read()
            if data[:4] == b"\x7fELF":
                found[name] = data
        return found
    with zipfile.ZipFile(path) as zf:
        for name in sorted(zf.namelist()):
            data = zf.read(name)
            if data[:4] == b"\x7fELF":
                found[name] = data
    return found


def _allowed(entry: dict, arch: str, version: str) -> bool:
    prefix, _, number = version.rpartition("_")
    return number in entry["symbol_versions"].get(arch, {}).get(prefix, [])


def problems(files: dict[str, bytes], plat: str) -> list[str]:
    """One line per symbol version, library or unversioned symbol a file needs beyond `plat`."""
    entry = policy(plat)
    shipped = {Path(name).name for name in files}
    # 32-bit files and relocatable objects (.o in a .a) are not loaded as they are.
    loaded = {name: elf_needs(data) for name, data in files.items() if data[4] == 2 and data[16] != 1}
    # The wheel's own libraries export unversioned symbols to each other.
    own = set().union(*(needs.defines for needs in loaded.values()))
    out: list[str] = []
    for name, needs in loaded.items():
        for version, symbols in sorted(needs.versions.items()):
            if not _allowed(entry, needs.arch, version):
                out.append(f"{name}: {version} is not allowed by {entry['name']} ({', '.join(sorted(symbols)[:6])})")
        for lib in needs.needed:
            if lib not in entry["lib_whitelist"] and lib not in shipped:
                out.append(f"{name}: needs {lib}, which {entry['name']} does not allow and the wheel does not ship")
        unresolved = needs.unversioned - own
        if unresolved:
            out.append(f"{name}: undefined with no symbol version (unresolved at link time): "
                       f"{', '.join(sorted(unresolved)[:6])}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a wheel, or a folder of built files")
    parser.add_argument("--plat", default="manylinux_2_28_x86_64", help="the tag to check against")
    parser.add_argument("--list", action="store_true", help="print every file's symbol versions")
    args = parser.parse_args(argv)
    files = elf_files(args.path)
    if not files:
        print(f"error: {args.path} holds no ELF file: give a full wheel or a build folder", file=sys.stderr)
        return 1
    if args.list:
        for name, data in files.items():
            if data[4] == 2 and data[16] != 1:
                needs = elf_needs(data)
                print(f"{name}: {' '.join(sorted(needs.versions)) or '(static: no versioned symbols)'}")
    found = problems(files, args.plat)
    for line in found:
        print(f"FAIL {line}")
    print(f"{len(files)} ELF files in {args.path.name}: {'OK for' if not found else 'NOT'} {args.plat}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
