"""`PropagateDeviceConfig`: which method inputs and outputs skip the host/device copies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass
class PropagateDeviceConfig:
    """With `skip_h2d_for_method_inputs` an input feeding a device delegate would be the caller's
    device memory, and with `skip_d2h_for_method_outputs` a delegate's output the method's output in
    device memory; both need caller-bound memory the runtimes here do not provide, so `to_executorch`
    refuses them (a bool for every method, or a dict method -> bool)."""

    skip_h2d_for_method_inputs: Union[bool, dict] = False
    skip_d2h_for_method_outputs: Union[bool, dict] = False

    def __hash__(self) -> int:
        return hash((str(self.skip_h2d_for_method_inputs), str(self.skip_d2h_for_method_outputs)))
