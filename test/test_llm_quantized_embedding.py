"""Quantized embedding tables and ring-buffer KV caches, the pieces optimum-executorch's recommended command
(`--qembedding 4w --use_custom_kv_cache`) exports: torchao's weight-only embeddings stored as 8/4/2-bit
`quantized_decomposed::embedding_*` tables by to_executorch's quant fusion, and `llama::update_cache_with_indices`
behind `CustomRingKVCache`, each run on both engines and on the published runtime against eager."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
import torch

import executorch.extension.llm.custom_ops  # noqa: F401  (registers the llama ops)
from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.exir._serialize._program import read_program
from executorch.exir.passes.quant_fusion_pass import pack_embedding_weight

from conftest import project_runtimes  # noqa: E402

VOCAB, DIM = 40, 32


def _engines() -> list:
    return [pytest.param(name, id=name) for name in ("python", "native")]


def _runtime(engine: str):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    return runtime


def _published(pte: bytes, calls: list, reference_runtime, tmp_path: Path) -> list:
    """Each call's outputs on the published runtime, one loaded method (state carries over)."""
    (tmp_path / "m.pte").write_bytes(pte)
    torch.save([("forward", list(call)) for call in calls], tmp_path / "m.calls.pt")
    runner = Path(__file__).with_name("reference_stateful.py")
    done = subprocess.run([reference_runtime.python, str(runner), str(tmp_path), "m"], capture_output=True, text=True,
                          timeout=600)
    err = tmp_path / "m.err.txt"
    assert done.returncode == 0 and not err.exists(), (done.stderr[-2000:], err.read_text() if err.exists() else "")
    return torch.load(tmp_path / "m.out.pt")


class _LookUp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        self.lin = torch.nn.Linear(DIM, 8)

    def forward(self, idx):
        return self.lin(self.emb(idx)), self.emb(idx)


# (torchao weight dtype, granularity, expected op, stored table dtype as ScalarType's number, stored columns)
WIDTHS = {
    "4bit-per-row": ("int4", None, "embedding_4bit", 0, DIM // 2),
    "8bit-groups-of-8": ("int8", 8, "embedding_byte", 1, DIM),
    "2bit-groups-of-16": ("int2", 16, "embedding_2bit", 0, DIM // 4),
}


def _quantized(width: str):
    if importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed (pip install torchao==0.18.0)")
    from torchao.quantization.granularity import PerAxis, PerGroup
    from torchao.quantization.quant_api import IntxWeightOnlyConfig, quantize_

    dtype, group = WIDTHS[width][:2]
    torch.manual_seed(0)
    model = _LookUp().eval()
    granularity = PerAxis(0) if group is None else PerGroup(group)
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=getattr(torch, dtype), granularity=granularity),
              lambda module, fqn: isinstance(module, torch.nn.Embedding))
    return model


def _lowered(model) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower

    ep = torch.export.export(model, (torch.zeros(2, 5, dtype=torch.long),))
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return edge.to_executorch(ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)).buffer


_FILES: dict = {}


def _file(width: str) -> tuple:
    if width not in _FILES:
        model = _quantized(width)
        _FILES[width] = (model, _lowered(model))
    return _FILES[width]


def _tables(pte: bytes) -> list:
    plan = read_program(pte).execution_plan[0]
    names = [f"{op.name}.{op.overload}" for op in plan.operators]
    found = []
    for chain in plan.chains:
        for instruction in chain.instructions:
            index = getattr(instruction.instr_args, "op_index", None)
            if index is not None and "embedding" in names[index]:
                table = plan.values[instruction.instr_args.args[0]].val
                found.append((names[index], int(table.scalar_type), list(table.sizes)))
    return found


INDICES = torch.tensor([[0, 7, 39, 7, 12], [3, 3, 21, 30, 1]])


@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_table_is_stored_narrow_and_looked_up_by_the_quantized_op(width):
    _, pte = _file(width)
    _, _, op, stored, columns = WIDTHS[width]
    # The module looks the table up twice; both lookups read one stored table.
    assert _tables(pte) == [(f"quantized_decomposed::{op}.out", stored, [VOCAB, columns])] * 2
    plan = read_program(pte).execution_plan[0]
    tables = {plan.values[i.instr_args.args[0]].val.data_buffer_idx for c in plan.chains for i in c.instructions
              if getattr(i.instr_args, "op_index", None) is not None}
    assert len(tables) == 1
    # No float copy of the table is stored beside it.
    assert not [v for v in plan.values if getattr(v.val, "sizes", None) == [VOCAB, DIM]
                and int(v.val.scalar_type) == 6 and v.val.data_buffer_idx > 0]


@pytest.mark.parametrize("engine", _engines())
@pytest.mark.parametrize("width", list(WIDTHS))
def test_lookups_match_eager_on_our_engines(width, engine):
    model, pte = _file(width)
    program = _runtime(engine).load_program(pte)
    got = program.load_method("forward").execute([INDICES])
    with torch.no_grad():
        want = list(model(INDICES))
    assert_outputs_close(got, want)
    # The gate: another row's values are another answer.
    assert not compare_outputs([got[1]], [want[1].roll(1, dims=1)]).ok


@pytest.mark.parametrize("width", list(WIDTHS))
def test_lookups_match_eager_on_the_published_runtime(width, reference_runtime, tmp_path):
    model, pte = _file(width)
    (got,) = _published(pte, [[INDICES]], reference_runtime, tmp_path)
    with torch.no_grad():
        assert_outputs_close(got, list(model(INDICES)))


def test_packing_puts_the_first_value_high_for_4_bits_and_low_for_2():
    from executorch.exir.dialects import _quantized_ops  # noqa: F401  (defines the embedding ops)

    values = torch.tensor([[-8, 7, 0, -1, 3, -4, 1, 2]], dtype=torch.int8)
    assert pack_embedding_weight(values, 4).tolist() == [[0x0F, 0x87, 0xB4, 0x9A]]
    twos = torch.tensor([[-2, 1, 0, -1]], dtype=torch.int8)
    assert pack_embedding_weight(twos, 2).tolist() == [[0b01_10_11_00]]
    # The op reading the packed table gives the values back (scale 1, no zero point).
    for bits, ints in ((4, values), (2, twos)):
        table = torch.ops.quantized_decomposed.__getattr__(f"embedding_{bits}bit")(
            pack_embedding_weight(ints, bits), torch.ones(1), None, -(1 << (bits - 1)), (1 << (bits - 1)) - 1,
            torch.tensor([0]))
        assert table.tolist() == ints.float().tolist()
    with pytest.raises(ValueError, match="whole bytes"):
        pack_embedding_weight(torch.zeros(1, 3, dtype=torch.int8), 4)


def test_bad_indices_are_an_error_on_the_native_engine():
    from executorch.runtime import ExecuTorchError

    _, pte = _file("4bit-per-row")
    method = _runtime("native").load_program(pte).load_method("forward")
    with pytest.raises(ExecuTorchError):
        method.execute([torch.tensor([[0, 1, 2, 3, VOCAB]])])


def test_update_cache_with_indices_writes_the_named_slots():
    cache = torch.zeros(1, 6, 2, 3)
    value = torch.randn(1, 3, 2, 3)
    torch.ops.llama.update_cache_with_indices(value, cache, 0, torch.tensor([[4, 1, 4]]))
    assert torch.equal(cache[0, 4], value[0, 2]) and torch.equal(cache[0, 1], value[0, 1])  # a later repeat wins
    assert not cache[0, [0, 2, 3, 5]].any()
    for bad in (torch.tensor([[0, 6, 1]]), torch.tensor([[0, -1, 1]])):
        with pytest.raises(ValueError, match="outside"):
            torch.ops.llama.update_cache_with_indices(value, cache, 0, bad)


class _RingAttention(torch.nn.Module):
    """One attention step over a sliding-window ring cache: what optimum's ring-cache attention computes."""

    def __init__(self, window: int) -> None:
        super().__init__()
        from executorch.examples.models.llama.source_transformation.custom_kv_cache import CustomRingKVCache

        self.cache = CustomRingKVCache(1, window, 2, 4)

    def forward(self, q, k, v, input_pos):
        k_all, v_all = self.cache.update(input_pos, k, v)
        mask = self.cache.create_causal_mask_for_ring_buffer(input_pos[0].item(), q.size(2))
        return torch.nn.functional.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)


def _ring_calls(steps: int) -> list:
    torch.manual_seed(1)
    return [[torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4), torch.tensor([pos])]
            for pos in range(steps)]


def _windowed_reference(calls: list, window: int) -> list:
    """Attention of each step's query over the last `window` keys and values, computed directly."""
    outs = []
    for i, (q, _, _, _) in enumerate(calls):
        first = max(0, i - window + 1)
        k = torch.cat([c[1] for c in calls[first:i + 1]], dim=2)
        v = torch.cat([c[2] for c in calls[first:i + 1]], dim=2)
        outs.append(torch.nn.functional.scaled_dot_product_attention(q, k, v))
    return outs


def test_ring_cache_attends_over_the_window_in_eager():
    window, calls = 3, _ring_calls(9)
    model = _RingAttention(window)
    got = [model(*call) for call in calls]
    want = _windowed_reference(calls, window)
    assert_outputs_close(got, want)
    # The gate: a window one longer is another answer once the ring wraps.
    assert not compare_outputs(got[-1:], _windowed_reference(calls, window + 1)[-1:]).ok


@pytest.fixture(scope="module")
def ring_program() -> bytes:
    from executorch.exir import to_edge

    model = _RingAttention(3)
    ep = torch.export.export(model, tuple(_ring_calls(1)[0]), strict=False)
    return to_edge(ep).to_executorch().buffer


@pytest.mark.parametrize("engine", _engines())
def test_ring_cache_program_decodes_past_the_window_on_our_engines(ring_program, engine):
    calls = _ring_calls(9)
    method = _runtime(engine).load_program(ring_program).load_method("forward")
    got = [method.execute(list(call))[0] for call in calls]
    assert_outputs_close(got, _windowed_reference(calls, 3))


def test_ring_cache_program_decodes_past_the_window_on_the_published_runtime(ring_program, reference_runtime,
                                                                             tmp_path):
    calls = _ring_calls(9)
    got = [outs[0] for outs in _published(ring_program, calls, reference_runtime, tmp_path)]
    assert_outputs_close(got, _windowed_reference(calls, 3))
