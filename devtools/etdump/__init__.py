"""ETDump: the runtime's profiling and debug record (`.etdp`), its dataclasses, writer and reader."""
