"""Runs the published constant propagation / quant fusion on a program and describes the result.

Run with the reference python (ET_REFERENCE_PYTHON), never imported by the project:
    python reference_const_prop.py PASS IN.pt2 [IN.pt2 ...]
Each IN.pt2 is a saved torch.export program; PASS is `constant_prop` or `quant_fusion`. IN.json gets
the described program (see describe_program); its new constants go to IN.constants.pt.
"""

import json
import sys

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (the q/dq ops the quantized programs call)

import executorch.kernels.quantized  # noqa: F401
from executorch.exir import EdgeCompileConfig, to_edge
from executorch.exir.passes.constant_prop_pass import constant_prop_pass
from executorch.exir.passes.quant_fusion_pass import quant_fusion_and_const_prop_pass

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from const_prop_models import describe_program  # noqa: E402

which, paths = sys.argv[1], sys.argv[2:]
for path in paths:
    ep = to_edge(torch.export.load(path), compile_config=EdgeCompileConfig(_check_ir_validity=False)).exported_program()
    ep = (constant_prop_pass if which == "constant_prop" else quant_fusion_and_const_prop_pass)(ep)
    stem = path[: -len(".pt2")]
    with open(stem + ".json", "w") as f:
        json.dump(describe_program(ep), f, indent=1)
    torch.save({k: v for k, v in ep.constants.items() if k.startswith("_prop_tensor_constant")}, stem + ".constants.pt")
