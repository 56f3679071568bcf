"""Run one float32 program on the installed wheel's native extension alone, in any CPython (no torch needed).

  python native_smoke.py MODEL.pte INPUT.bin OUTPUT.bin 1,3,16,16

Used where torch 2.13 cannot be installed beside the wheel: each CPython of the wheel matrix, and
an arm64 CPython under QEMU. With torch importable it is imported first, so the extension is also
shown to load beside torch's own libraries.
"""

import array
import importlib.util
import platform
import sys
import sysconfig

if importlib.util.find_spec("torch"):
    import torch

    print("torch", torch.__version__)
from executorch.extension.pybindings import _portable_lib as lib  # noqa: E402

FLOAT32 = 6  # ExecuTorch's ScalarType code

pte, inp, out, dims = sys.argv[1:5]
suffix = sysconfig.get_config_var("EXT_SUFFIX")
if not lib.__file__.endswith(suffix):
    sys.exit(f"the extension {lib.__file__} does not carry this interpreter's suffix {suffix}")
with open(pte, "rb") as f:
    method = lib.Program(f.read()).load_method("forward")
with open(inp, "rb") as f:
    x = array.array("f", f.read())
method.set_input_tensor(0, x.buffer_info()[0], len(x) * x.itemsize, FLOAT32, [int(d) for d in dims.split(",")])
method.execute()
kind, code, sizes, order, nbytes = method.output(0)
if kind != "Tensor" or code != FLOAT32:
    sys.exit(f"output 0 is {kind} of dtype code {code}, not a float32 tensor")
y = array.array("f", bytes(nbytes))
method.copy_output(0, y.buffer_info()[0], nbytes)
with open(out, "wb") as f:
    f.write(y.tobytes())
print(f"ran on {platform.machine()} CPython {platform.python_version()}: output {list(sizes)}")
