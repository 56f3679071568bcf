"""The model zoo: published parameter counts, seeded determinism, outputs of order 1, eager runs and torch.export."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest
import torch
from torch.utils._pytree import tree_flatten

from executorch.devtools.compare import assert_outputs_close
from executorch.examples.models import DYNAMIC_SHAPES, MODELS

MODELS_DIR = Path(__file__).resolve().parents[1] / "examples" / "models"


def _flat(outputs) -> list[torch.Tensor]:
    return tree_flatten(outputs)[0]


def _load_by_path(name: str):
    # The file the factory is defined in (resnet.py holds two), loaded on its own.
    path = MODELS_DIR / Path(inspect.getsourcefile(MODELS[name])).name
    spec = importlib.util.spec_from_file_location(f"zoo_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"make_{name}")


@pytest.mark.parametrize(("name", "count"), [("mobilenet_v2", 3_504_872), ("resnet18", 11_689_512),
                                                  ("resnet50", 25_557_032)])
def test_parameter_count_matches_torchvision(name, count):
    model, _ = MODELS[name]()
    assert sum(p.numel() for p in model.parameters()) == count


@pytest.mark.parametrize("name", sorted(MODELS))
def test_factory_is_deterministic_and_in_eval_mode(name):
    (m1, in1), (m2, in2) = MODELS[name](), MODELS[name]()
    assert not m1.training and not any(sub.training for sub in m1.modules())
    for a, b in zip(in1, in2):
        assert torch.equal(a, b)
    for (k1, v1), (k2, v2) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_outputs_are_of_order_one(name):
    # Degenerate outputs (MobileNetV2's torchvision init gave about 1e-9) make every comparison vacuous.
    model, inputs = MODELS[name]()
    with torch.no_grad():
        outputs = _flat(model(*inputs))
    for i, out in enumerate(outputs):
        spread = out.float().std().item() if out.numel() > 1 else out.float().abs().item()
        assert 0.1 < spread < 100 and out.abs().max().item() < 1e3, (name, i, spread)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_factory_loads_by_path(name):
    model, inputs = _load_by_path(name)()
    reference, ref_inputs = MODELS[name]()
    assert type(model).__name__ == type(reference).__name__
    with torch.no_grad():
        for a, b in zip(_flat(model(*inputs)), _flat(reference(*ref_inputs))):
            assert torch.equal(a, b)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_exported_program_matches_eager(name):
    model, inputs = MODELS[name]()
    dynamic_shapes = DYNAMIC_SHAPES[name]() if name in DYNAMIC_SHAPES else None
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    with torch.no_grad():
        expected = _flat(model(*inputs))
        actual = _flat(ep.module()(*inputs))
    assert len(actual) == len(expected) > 0
    assert all(torch.isfinite(e).all() for e in expected)
    assert_outputs_close(actual, expected)


def test_transformer_encoder_accepts_other_sequence_lengths():
    model, (x,) = MODELS["transformer_encoder"]()
    ep = torch.export.export(model, (x,), dynamic_shapes=DYNAMIC_SHAPES["transformer_encoder"]())
    for seq in (1, 37, 128):
        longer = torch.randn(2, seq, 64)
        with torch.no_grad():
            assert_outputs_close(ep.module()(longer), model(longer))


def test_multi_io_returns_tuple_with_dict():
    model, inputs = MODELS["multi_io"]()
    with torch.no_grad():
        out = model(*inputs)
    assert len(inputs) == 2 and isinstance(out, tuple) and isinstance(out[2], dict)
    assert len(_flat(out)) == 4


@pytest.mark.parametrize("name", sorted(MODELS))
def test_published_exporter_and_runtime_agree_with_eager(name, reference_runtime, tmp_path):
    factory = MODELS[name]
    spec = f"{inspect.getsourcefile(factory)}:{factory.__name__}"
    pte = reference_runtime.export(spec, tmp_path / f"{name}.pte")
    model, inputs = MODELS[name]()
    outputs = reference_runtime.run(pte, inputs, tmp_path)
    with torch.no_grad():
        assert_outputs_close(outputs, model(*inputs))
