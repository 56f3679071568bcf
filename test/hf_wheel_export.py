"""Exports a tiny HF decoder with the executorch that this interpreter imports (run with only the
installed minimal wheel on the path): python -S hf_wheel_export.py OUT.pte ARCH.

Prints the file executorch was imported from, so the caller can check it was the wheel."""

import sys

import executorch
import hf_tiny_models as hf
from executorch.exir import to_edge

out, arch = sys.argv[1], sys.argv[2]
ep = hf.export(hf.make_wrapper(arch))
to_edge(ep).to_executorch().write_to_file(out)
print(executorch.__file__)
