"""What preprocess writes, checked without a runtime: filter layouts, folded batch norm, fused
activations, external ids, named weights (the published runtime runs it: test_xnnpack_lower.py)."""

from __future__ import annotations

import torch
from torch import nn

from executorch.backends.xnnpack import XnnpackPartitioner
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize._program import deserialize_pte_binary


class _ConvBnRelu6(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)

    def forward(self, x, y):
        return self.dw(torch.nn.functional.relu6(self.bn(self.conv(x)))), y * 2.0


def _lowered(model, inputs):
    program = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    pte = deserialize_pte_binary(program.buffer)
    plan = pte.program.execution_plan[0]
    payloads = []
    for d in plan.delegates:
        data = pte.program.segment_data[d.processed.index]
        payloads.append(deserialize_xnnpack_binary(data))
    named = {k: pte.named_data.buffers[e.buffer_index] for k, e in pte.named_data.pte_data.items()}
    return payloads, named


def _constant(payload, graph, value_id, named, dtype=torch.float32):
    tv = xs.tensor_value(graph.xvalues[value_id])
    raw = bytes(payload.constant(tv.constant_buffer_idx, named))
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(tv.dims)


def test_conv_filters_batch_norm_and_activation_as_xnnpack_wants_them():
    torch.manual_seed(0)
    model = _ConvBnRelu6().eval()
    model.bn.running_mean.uniform_(-1, 1)
    model.bn.running_var.uniform_(0.5, 2)
    model.bn.weight.data.uniform_(0.5, 2)
    inputs = (torch.randn(1, 4, 8, 8), torch.randn(3))
    (payload,), named = _lowered(model, inputs)
    g = payload.graph
    nodes = [n.xnode_union for n in g.xnodes]
    conv = next(n for n in nodes if type(n) is xs.XNNConv2d)
    dw = next(n for n in nodes if type(n) is xs.XNNDepthwiseConv2d)
    fused = torch.nn.utils.fusion.fuse_conv_bn_eval(model.conv, model.bn)
    # OHWI filter and bias of the conv with the batch norm folded in.
    torch.testing.assert_close(_constant(payload, g, conv.filter_id, named), fused.weight.detach().permute(0, 2, 3, 1))
    torch.testing.assert_close(_constant(payload, g, conv.bias_id, named), fused.bias.detach())
    # ReLU6 is the conv's output range, not a node of its own.
    conv_node = next(n for n in g.xnodes if n.xnode_union is conv)
    assert conv_node.output_min_max == xs.OutputMinMax(0.0, 6.0)
    assert not any(type(n) is xs.XNNClamp for n in nodes)
    # Depthwise filter 1HWO, no bias.
    assert (dw.groups, dw.group_input_channels, dw.group_output_channels) == (8, 1, 1)
    assert dw.bias_id == xs.XNN_INVALID_VALUE_ID
    torch.testing.assert_close(_constant(payload, g, dw.filter_id, named), model.dw.weight.detach().permute(1, 2, 3, 0))
    # Inputs first, then outputs, by position; NHWC inside with one transpose in and one out.
    ext = sorted((xs.tensor_value(v).external_id, xs.tensor_value(v).flags) for v in g.xvalues
                 if xs.tensor_value(v).external_id != xs.XNN_INVALID_VALUE_ID)
    assert ext[0] == (0, xs.XNN_VALUE_FLAG_EXTERNAL_INPUT) and ext[-1][1] == xs.XNN_VALUE_FLAG_EXTERNAL_OUTPUT
    assert [n.perm for n in nodes if type(n) is xs.XNNStaticTranspose] == [[0, 2, 3, 1], [0, 3, 1, 2]]
    # Every constant is named by the SHA-256 of its bytes.
    import hashlib

    for c in g.constant_data[1:]:
        assert c.named_key == hashlib.sha256(named[c.named_key]).hexdigest() and c.size == len(named[c.named_key])
