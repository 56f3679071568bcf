"""Export models with a vendor's documented flow (its partitioner in `to_edge_transform_and_lower`, then
`to_executorch`) and write `<out>/<model>.pte`; the same script runs on this package (with `--vendor DIR`, the
folder holding the published wheel's vendor folders) and on the published stack.

    python vendor_lower_export.py OUT_DIR coreml|openvino MODEL... [--vendor DIR] [--stub-llm-builder]

The models are vendor_vulkan_export's (a conv/batch-norm/ReLU/mean/linear model, MobileNetV2). OpenVINO's flow
also saves the inputs and eager outputs (`<model>.io.pt`), for checking its payload on the OpenVINO runtime.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from vendor_vulkan_export import model


def partitioner(backend: str):
    if backend == "coreml":
        from executorch.backends.apple.coreml.partition import CoreMLPartitioner

        return CoreMLPartitioner()
    if backend == "openvino":
        from executorch.backends.openvino.partitioner import OpenvinoPartitioner
        from executorch.exir.backend.backend_details import CompileSpec

        return OpenvinoPartitioner([CompileSpec("device", b"CPU")])
    raise SystemExit(f"unknown backend {backend!r}: coreml or openvino")


def _stub_llm_builder() -> None:
    """OpenVINO's package imports `executorch.extension.llm.export.builder.LLMEdgeManager` (ExecuTorch's LLM export
    manager, which this package does not provide) for the annotations of its LLM weight compression; a stand-in
    module lets the rest of it load. The stand-in refuses to be used."""
    import types

    module = types.ModuleType("executorch.extension.llm.export.builder")

    class LLMEdgeManager:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError("LLMEdgeManager is a stand-in here: the LLM export manager is not provided")

    module.LLMEdgeManager = LLMEdgeManager
    sys.modules[module.__name__] = module


def main(argv: list[str]) -> None:
    if "--vendor" in argv:
        at = argv.index("--vendor")
        import executorch.backends

        executorch.backends.__path__.append(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    if "--stub-llm-builder" in argv:
        argv = [a for a in argv if a != "--stub-llm-builder"]
        _stub_llm_builder()
    import executorch
    from executorch.exir import to_edge_transform_and_lower

    out, backend = Path(argv[0]), argv[1]
    (out / "executorch_from.txt").write_text(str(Path(list(executorch.__path__)[0]).resolve()))
    for name in argv[2:]:
        start = time.perf_counter()
        m, inputs = model(name)
        ep = torch.export.export(m, inputs)
        program = to_edge_transform_and_lower(ep, partitioner=[partitioner(backend)]).to_executorch()
        (out / f"{name}.pte").write_bytes(program.buffer)
        if backend == "openvino":
            with torch.no_grad():
                torch.save({"inputs": inputs, "outputs": m(*inputs)}, out / f"{name}.io.pt")
        print(f"{name}: {len(program.buffer)} bytes in {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
