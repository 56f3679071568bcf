"""Export models with Vulkan's flow (`VulkanPartitioner` in `to_edge_transform_and_lower`, then `to_executorch`)
and write `<out>/<model>.pte`; the same script runs on this package (with `--vendor DIR`, the folder holding the
published wheel's `executorch/backends/vulkan` and what it imports) and on the published stack.

    python vendor_vulkan_export.py OUT_DIR MODEL... [--vendor DIR]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

# The example models as plain torch modules, our own definitions, loadable without either executorch.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "models"))


class ConvLinear(torch.nn.Module):
    """A convolution with batch norm and ReLU, a mean, and a linear layer."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


def model(name: str):
    torch.manual_seed(0)
    if name == "conv_linear":
        m = ConvLinear().eval()
        with torch.no_grad():  # running statistics of a trained norm, so the fused weights differ from the conv's
            m.bn.running_mean.uniform_(-0.5, 0.5)
            m.bn.running_var.uniform_(0.5, 2.0)
        return m, (torch.randn(1, 3, 16, 16),)
    from mobilenet_v2 import make_mobilenet_v2

    return {"mv2": make_mobilenet_v2}[name]()


def main(argv: list[str]) -> None:
    if "--vendor" in argv:
        at = argv.index("--vendor")
        import executorch.backends

        executorch.backends.__path__.append(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    import executorch
    from executorch.backends.vulkan import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    out = Path(argv[0])
    (out / "executorch_from.txt").write_text(str(Path(list(executorch.__path__)[0]).resolve()))
    for name in argv[1:]:
        start = time.perf_counter()
        m, inputs = model(name)
        ep = torch.export.export(m, inputs)
        program = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()]).to_executorch()
        (out / f"{name}.pte").write_bytes(program.buffer)
        print(f"{name}: {len(program.buffer)} bytes in {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
