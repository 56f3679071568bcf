"""Runs the TOSA payload of an Arm `.bpte` on the TOSA reference model and compares it with the bundled
expected outputs. Run with a Python that has Arm's tools (tosa-tools, ml_dtypes) and this package on its
path, as test_vendor_arm.py does:

    python vendor_tosa_check.py FILE.bpte MODEL.py

It prints one JSON line: the largest absolute difference from the expected output, that output's largest
magnitude, the output's quantization step for a quantized program (the dequantize after the delegate), and
how far the expected output is from the float model's (MODEL.py's ModelUnderTest on the case's input): for a
quantized program, the quantized module's own quantization error.
A float program's payload takes the float input; a quantized one takes the input quantized as the program's
quantize before the delegate does, and its int8 output is dequantized as the program's dequantize after.
"""

from __future__ import annotations

import json
import runpy
import sys

import numpy as np
import torch
import tosa_reference_model

from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
from executorch.exir import schema
from executorch.exir._serialize import read_program


def _scalar(plan, index: int) -> float:
    val = plan.values[index].val
    return float(getattr(val, "double_val", getattr(val, "int_val", 0)))


def _qparams(plan, call) -> tuple[float, int, int, int]:
    """(scale, zero point, quant_min, quant_max) of a quantize/dequantize_per_tensor call."""
    args = call.args
    return _scalar(plan, args[1]), int(_scalar(plan, args[2])), int(_scalar(plan, args[3])), int(_scalar(plan, args[4]))


def _tensor(value) -> torch.Tensor:
    t = value.val
    return torch.frombuffer(bytearray(t.data), dtype={6: torch.float32, 1: torch.int8}[int(t.scalar_type)]).reshape(
        list(t.sizes))


def main(path: str, model_file: str) -> None:
    bundled = deserialize_from_flatbuffer_to_bundled_program(open(path, "rb").read())
    program = read_program(bytes(bundled.program))
    plan = program.execution_plan[0]
    (delegate,) = plan.delegates
    where = delegate.processed
    payload = bytes(program.segment_data[where.index] if where.location == schema.DataLocation.SEGMENT
                    else program.backend_delegate_data[where.index].data)
    calls = [i.instr_args for i in plan.chains[0].instructions]
    kernels = {i: plan.operators[c.op_index].name for i, c in enumerate(calls) if isinstance(c, schema.KernelCall)}
    at = next(i for i, c in enumerate(calls) if isinstance(c, schema.DelegateCall))
    quantize = next((calls[i] for i, name in kernels.items() if i < at and name.endswith("quantize_per_tensor")
                     and "dequantize" not in name), None)
    dequantize = next((calls[i] for i, name in kernels.items() if i > at and name.endswith("dequantize_per_tensor")),
                      None)

    case = bundled.method_test_suites[0].test_cases[0]
    (x,) = [_tensor(v) for v in case.inputs]
    (expected,) = [_tensor(v) for v in case.expected_outputs]
    step = 0.0
    if quantize is not None:
        scale, zp, lo, hi = _qparams(plan, quantize)
        x = torch.clamp(torch.round(x / scale) + zp, lo, hi).to(torch.int8)
    outputs, status = tosa_reference_model.run(payload, [x.numpy()], initialize_variable_tensor_from_numpy=True)
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        sys.exit(f"the TOSA reference model refused the payload: {status}")
    (y,) = [torch.from_numpy(np.asarray(o)) for o in outputs]
    y = y.reshape(expected.shape)
    if dequantize is not None:
        scale, zp, _, _ = _qparams(plan, dequantize)
        y, step = (y.to(torch.float32) - zp) * scale, scale
    with torch.no_grad():
        eager = runpy.run_path(model_file)["ModelUnderTest"](_tensor(case.inputs[0]))
    print(json.dumps({"max_abs_diff": float((y.float() - expected).abs().max()),
                      "max_abs_expected": float(expected.abs().max()), "step": step,
                      "expected_from_float": float((expected - eager).abs().max())}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
