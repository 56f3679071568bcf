"""The fake engine and the custom op that runs it, as Torch-TensorRT's `execute_engine` is run.

An engine is a uint8 tensor: b"FKE1", then u32 C, then float32 scale[C] and shift[C]. Running it on
inputs [x] or [x, y] (float32, last dim C) gives two outputs: r = x * scale + shift (+ y), and relu(r).
The op takes the device the engine was built for as a string, as Torch-TensorRT's engines carry it.
"""

from __future__ import annotations

import struct

import torch

MAGIC = b"FKE1"

lib = torch.library.Library("test_device", "DEF")
lib.define("execute_engine(Tensor[] inputs, Tensor engine, str device) -> Tensor[]")


def make_engine(channels: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scale, shift = torch.randn(channels, generator=g), torch.randn(channels, generator=g)
    raw = MAGIC + struct.pack("<I", channels) + scale.numpy().tobytes() + shift.numpy().tobytes()
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).clone()


def parse_engine(raw: bytes) -> tuple[torch.Tensor, torch.Tensor]:
    if raw[:4] != MAGIC or len(raw) < 8:
        raise ValueError("not a fake engine (no FKE1 header)")
    (channels,) = struct.unpack_from("<I", raw, 4)
    if len(raw) != 8 + 8 * channels:
        raise ValueError(f"fake engine of {channels} channels holds {len(raw)} bytes, not {8 + 8 * channels}")
    values = torch.frombuffer(bytearray(raw[8:]), dtype=torch.float32)
    return values[:channels], values[channels:]


def run_engine(inputs: list, scale: torch.Tensor, shift: torch.Tensor) -> list:
    r = inputs[0] * scale + shift
    if len(inputs) > 1:
        r = r + inputs[1]
    return [r, torch.relu(r)]


@torch.library.impl(lib, "execute_engine", "CPU")
def _execute_engine(inputs, engine, device):
    scale, shift = parse_engine(bytes(engine.contiguous().numpy().tobytes()))
    return run_engine(list(inputs), scale, shift)


@torch.library.register_fake("test_device::execute_engine")
def _execute_engine_fake(inputs, engine, device):
    return [torch.empty_like(inputs[0]), torch.empty_like(inputs[0])]
