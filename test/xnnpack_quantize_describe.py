"""Quantize models with `XNNPACKQuantizer` (whichever executorch this python imports) and save what
each converted graph holds: every quantize/dequantize call with its parameters, and the outputs.

    python xnnpack_quantize_describe.py OUT_DIR FILE.py:FACTORY@SETUP ...    (SETUP: a key of SETUPS)

writes OUT_DIR/<FACTORY>@<SETUP>.pt for each job.
Run by test/test_xnnpack_quantizer.py in this project's environment and, as a separate process, in the
published ExecuTorch's; it imports torch, torchao and executorch only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

CONFIGS = {
    "static_pc": dict(is_per_channel=True),
    "static_pt": dict(is_per_channel=False),
    "dynamic_pc": dict(is_per_channel=True, is_dynamic=True),
    "dynamic_pt": dict(is_per_channel=False, is_dynamic=True),
}


def _setup(quantizer, get_config, name: str):
    """A global config, or one of the scoped setups (module name, module type, operator)."""
    if name in CONFIGS:
        return quantizer.set_global(get_config(**CONFIGS[name]))
    if name == "fc2_only":
        return quantizer.set_module_name("fc2", get_config(is_per_channel=True))
    if name == "linear_type_dynamic":
        return (quantizer.set_global(get_config(is_per_channel=True))
                .set_module_type(torch.nn.Linear, get_config(is_per_channel=True, is_dynamic=True)))
    if name == "linear_op_static_pt":
        return quantizer.set_operator_type(torch.ops.aten.linear.default, get_config(is_per_channel=False))
    raise ValueError(f"unknown setup {name!r}")


def load_factory(spec: str):
    """The factory of `FILE.py:FACTORY`; each file is loaded once per process, under its own module name
    (torch.export's guards look source modules up by name)."""
    path, _, name = spec.rpartition(":")
    module_name = f"quant_model_{Path(path).stem}"
    if module_name not in sys.modules:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    return getattr(sys.modules[module_name], name)


def _value(arg, gm):
    if isinstance(arg, torch.fx.Node):
        if arg.op == "get_attr":
            owner, _, name = arg.target.rpartition(".")
            return getattr(gm.get_submodule(owner), name).detach().clone()
        if arg.op == "placeholder":
            return "placeholder"
        return f"node:{arg.target}"
    if isinstance(arg, torch.dtype):
        return str(arg)
    if isinstance(arg, (list, tuple)):
        return [_value(a, gm) for a in arg]
    return arg


def describe(gm: torch.fx.GraphModule) -> list:
    """One entry per quantized_decomposed call in graph order: op name, what it reads (the producing op,
    or a constant's value), its parameters, and the ops that read its result."""
    out = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or "quantized_decomposed" not in str(node.target):
            continue
        out.append({
            "op": str(node.target),
            "reads": _value(node.args[0], gm),
            "params": [_value(a, gm) for a in node.args[1:]],
            "kwargs": {k: _value(v, gm) for k, v in node.kwargs.items()},
            "users": sorted(str(u.target) for u in node.users),
        })
    return out


def quantize(model, inputs, setup: str):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (XNNPACKQuantizer,
                                                                         get_symmetric_quantization_config)

    captured = torch.export.export(model, inputs, strict=True).module()
    quantizer = _setup(XNNPACKQuantizer(), get_symmetric_quantization_config, setup)
    prepared = prepare_pt2e(captured, quantizer)
    with torch.no_grad():
        prepared(*inputs)
    return convert_pt2e(prepared)


def run(job: str) -> dict:
    """`FILE.py:FACTORY@SETUP` -> {"qdq": describe(converted), "outputs": converted(*inputs)}."""
    spec, _, setup = job.rpartition("@")
    threads = torch.get_num_threads()
    # One summation order, whatever the machine: calibration's observed ranges (hence every scale)
    # and the outputs are then the same bits in both environments.
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model, inputs = load_factory(spec)()
        converted = quantize(model, inputs, setup)
        with torch.no_grad():
            outputs = converted(*inputs)
    finally:
        torch.set_num_threads(threads)
    return {"qdq": describe(converted), "outputs": outputs}


def job_name(job: str) -> str:
    return job.rpartition(":")[2]


def main(argv) -> None:
    out_dir, *jobs = argv
    for job in jobs:
        torch.save(run(job), f"{out_dir}/{job_name(job)}.pt")


if __name__ == "__main__":
    main(sys.argv[1:])
