"""The `et_copy` ops: `_h2d_copy` and `_d2h_copy` move a tensor between host and device memory.

`PropagateDevicePass` puts them around delegates that run on a device. Ahead of time both are
copies on the host; the runtimes run their `.out` overloads through the device's allocator.
"""

from __future__ import annotations

import torch

lib = torch.library.Library("et_copy", "DEF")
for _name in ("_h2d_copy", "_d2h_copy"):
    lib.define(f"{_name}(Tensor self) -> Tensor")
    lib.define(f"{_name}.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")
    lib.impl(_name, lambda self: self.clone(), "CompositeExplicitAutograd")
    lib.impl(f"{_name}.out", lambda self, *, out: out.copy_(self), "CompositeExplicitAutograd")

h2d_copy = torch.ops.et_copy._h2d_copy.default
d2h_copy = torch.ops.et_copy._d2h_copy.default
