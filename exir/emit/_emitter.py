"""Emission: one edge-dialect graph becomes one `ExecutionPlan` of out-variant kernel calls.

Values are laid out the way the ExecuTorch exporter lays them out (constants, then inputs,
then per instruction its outputs and its arguments), tensors other than constants are placed
in one planned arena, and static-shape views of planned tensors become aliases (same bytes,
no instruction).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import fx
from torch.export.graph_signature import InputKind, OutputKind

from executorch.exir import memory_planning
from executorch.exir import schema as S
from executorch.exir._dtypes import scalar_type
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.dialects._edge_ops import (ALIAS_VIEW_COPIES, SAME_ORDER_COPIES, out_variant, prim_op_name,
                                                writes_first_argument)
from executorch.exir.emit._program_state import DEFAULT_EXTERNAL_TAG, ConstantTable, ProgramState
from executorch.exir.error import ExportError
from executorch.exir.passes._graph import source_line
from executorch.exir.passes.propagate_device_pass import CPU, device_of
from executorch.exir.tensor_layout import TensorLayout
from executorch.exir.passes.write_back import mutated_placeholders


def _is_alias_view(target, val, base) -> bool:
    if target in ALIAS_VIEW_COPIES:
        return True
    if target not in SAME_ORDER_COPIES or not isinstance(base, fx.Node):
        return False
    base_val = base.meta.get("val")
    if not isinstance(base_val, torch.Tensor) or not isinstance(val, torch.Tensor):
        return False
    if target is torch.ops.aten.expand_copy.default and tuple(val.shape) != tuple(base_val.shape):
        return False
    return base_val.dtype == val.dtype and base_val.is_contiguous() and val.is_contiguous()


@dataclass
class _Planned:
    """A planned tensor value and the storage it uses (shared with the tensors it aliases)."""

    value: S.Tensor
    buffer: memory_planning.Buffer


class _MethodEmitter:
    """Emits one method; what all methods share comes from `program`."""

    def __init__(self, name: str, ep: torch.export.ExportedProgram, program: ProgramState,
                 memory_plan: memory_planning.MemoryPlanningPass):
        self.name = name
        self.ep = ep
        self.graph = ep.graph_module.graph
        self.program = program
        self.memory_plan = memory_plan
        self.shared_state = program.shared if memory_plan.share_mutable_buffers else None
        self.shared_offset: dict[int, int] = {}  # id(buffer) -> its offset in the shared-state arena
        self.mutated = mutated_placeholders(ep.graph_signature)  # placeholder name -> buffer / input name
        self.state: list[memory_planning.Buffer] = []  # storage of mutable buffers: live for the whole call
        self.written: list[memory_planning.Buffer] = []  # storage a write-back copy_ changes
        self.delegates: list[S.BackendDelegate] = []
        self.delegate_calls: list[tuple[int, Any]] = []  # (instruction index, lowered module)
        self.owner: dict[fx.Graph, fx.GraphModule] = {ep.graph_module.graph: ep.graph_module}
        self.frames: list[S.FrameList] = []
        self.moved_into: list[tuple[int, int]] = []  # (branch result, cond output) pairs
        self.values: list[S.EValue] = []
        self.node_values: dict[fx.Node, Any] = {}
        self.planned: list[_Planned] = []
        self.buffer_of: dict[int, memory_planning.Buffer] = {}
        self.operators: list[S.Operator] = []
        self.op_index: dict[tuple[str, str], int] = {}
        self.instructions: list[S.Instruction] = []
        self.debug_handles: list = []  # per instruction: its node's debug handle (None without one)
        self.step: dict[fx.Node, int] = {}

    # values -----------------------------------------------------------------------------
    def _add(self, val: Any) -> int:
        self.values.append(S.EValue(val))
        return len(self.values) - 1

    def _tensor_value(self, t: torch.Tensor, node: fx.Node, data_buffer_idx: int = 0) -> S.Tensor:
        sizes, dynamism = self._sizes(t, node)
        device = device_of(node)
        return S.Tensor(
            scalar_type=scalar_type(t.dtype),
            storage_offset=0,
            sizes=sizes,
            dim_order=self._dim_order(t, dynamism),
            requires_grad=bool(t.requires_grad),
            data_buffer_idx=data_buffer_idx,
            allocation_info=None,
            shape_dynamism=dynamism,
            # Host tensors say nothing, which readers take as the host, as ExecuTorch writes them.
            extra_tensor_info=None if device == CPU else S.ExtraTensorInfo(device_type=device[0],
                                                                          device_index=device[1]),
        )

    def _sizes(self, t: torch.Tensor, node: fx.Node) -> tuple[list[int], S.TensorShapeDynamism]:
        sizes, dynamic = [], False
        for s in t.shape:
            if isinstance(s, int):
                sizes.append(s)
                continue
            dynamic = True
            sizes.append(self._upper_bound(s, node))
        return sizes, S.TensorShapeDynamism.DYNAMIC_BOUND if dynamic else S.TensorShapeDynamism.STATIC

    def _upper_bound(self, s: torch.SymInt, node: fx.Node) -> int:
        expr = s.node.expr
        try:
            upper = int(s.node.shape_env.bound_sympy(expr).upper)
        except (TypeError, ValueError, AttributeError, OverflowError):
            upper = None  # unbounded: sympy's or torch's infinity
        if upper is None or upper > 2**31 - 1:
            where = source_line(node)
            raise ExportError(
                f"method '{self.name}': node '{node.name}'{' (' + where + ')' if where else ''} has a dimension "
                f"{expr} with no upper bound; .pte programs plan memory for the largest shape, so give each "
                "dynamic dimension a maximum, e.g. torch.export.Dim('n', max=1024)"
            )
        return upper

    @staticmethod
    def _dim_order(t: torch.Tensor, dynamism) -> list[int]:
        if dynamism != S.TensorShapeDynamism.STATIC or t.dim() == 0:
            return list(range(t.dim()))
        strides = t.stride()
        return sorted(range(t.dim()), key=lambda d: (-strides[d], d))

    def _planned_tensor(self, t: torch.Tensor, node: fx.Node, alias_of: Optional[int] = None) -> int:
        value = self._tensor_value(t, node)
        idx = self._add(value)
        if alias_of is not None:
            buf = self.buffer_of[alias_of]
        else:
            nbytes = t.element_size()
            for s in value.sizes:
                nbytes *= s
            buf = memory_planning.Buffer(size=nbytes, first=self.step[node], last=self.step[node],
                                         device=tuple(device_of(node)))
        self.buffer_of[idx] = buf
        self.planned.append(_Planned(value, buf))
        return idx

    def _scalar(self, v: Any) -> int:
        if isinstance(v, bool):
            return self._add(S.Bool(v))
        if isinstance(v, int):
            return self._add(S.Int(v))
        if isinstance(v, float):
            return self._add(S.Double(v))
        raise TypeError(v)

    def _scalar_tensor(self, x: Any, node: fx.Node) -> int:
        """A Python scalar passed where the kernel takes a tensor becomes a 0-dim constant,
        of the dtype the op computes in (the scalar's own kind decides against an int tensor)."""
        others = [a.meta["val"] for a in node.args
                  if isinstance(a, fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)]
        ref = others[0].dtype if others else None
        if isinstance(x, bool):
            dtype = torch.bool if ref in (None, torch.bool) else ref
        elif isinstance(x, int):
            dtype = ref if ref is not None and ref != torch.bool else torch.int64
        else:
            dtype = ref if ref is not None and ref.is_floating_point else torch.get_default_dtype()
        t = torch.tensor(x, dtype=dtype)
        return self._add(S.Tensor(scalar_type(dtype), 0, [], [], False, self.program.constants.add(t), None))

    def _arg(self, arg: Any, ty: torch.Type, node: fx.Node) -> int:
        """Emit one kernel argument as the value(s) its schema type calls for."""
        if isinstance(arg, fx.Node):
            return self._node_value(arg)
        if arg is None:
            return self._add(S.Null())
        kind = ty.kind() if ty is not None else ""
        if kind == "OptionalType":
            return self._arg(arg, ty.getElementType(), node)
        if isinstance(arg, torch.dtype):
            return self._add(S.Int(int(scalar_type(arg))))
        if isinstance(arg, (torch.layout, torch.memory_format, torch.device)):
            return self._add(S.Int(_ENUMS.get(arg, 0)))
        if isinstance(arg, str):
            return self._add(S.String(arg))
        if isinstance(arg, (list, tuple)):
            elem = ty.getElementType() if kind == "ListType" else None
            ek = elem.kind() if elem is not None else ""
            if ek in ("FloatType",):
                return self._add(S.DoubleList([float(a) for a in arg]))
            if ek == "BoolType":
                return self._add(S.BoolList([bool(a) for a in arg]))
            if ek == "TensorType":
                return self._add(S.TensorList([self._node_value(a) for a in arg]))
            if ek == "OptionalType":
                return self._add(S.OptionalTensorList([-1 if a is None else self._node_value(a) for a in arg]))
            items = [self._node_value(a) if isinstance(a, fx.Node) else self._add(S.Int(int(a))) for a in arg]
            return self._add(S.IntList(items))
        if isinstance(arg, (bool, int, float)):
            return self._scalar(arg)
        raise ExportError(
            f"method '{self.name}': node '{node.name}' has an argument {arg!r} of type {type(arg).__name__} that "
            ".pte programs cannot hold; pass it as a tensor or a Python scalar"
        )

    def _node_value(self, n: fx.Node) -> int:
        v = self.node_values.get(n)
        if not isinstance(v, int):
            raise ExportError(f"method '{self.name}': value of node '{n.name}' is used before it is defined")
        return v

    def _operator(self, name: str, overload: str) -> int:
        key = (name, overload)
        if key not in self.op_index:
            self.op_index[key] = len(self.operators)
            self.operators.append(S.Operator(name=name, overload=overload))
        return self.op_index[key]

    # nodes ------------------------------------------------------------------------------
    def emit(self) -> S.ExecutionPlan:
        nodes = list(self.graph.nodes)
        self.step = {n: i for i, n in enumerate(nodes)}
        inputs = self._emit_placeholders(nodes)
        outputs: list[int] = []
        for node in nodes:
            if node.op == "call_function":
                self._emit_call(node)
            elif node.op == "output":
                outputs = self._emit_outputs(node)
        memory_planning.extend_lifetimes(self.graph, self._buffer_of_node, self.state,
                                         [(self.buffer_of[src], self.buffer_of[dst]) for src, dst in self.moved_into])
        self._plan()
        gm_spec = self.ep.call_spec
        from torch.utils._pytree import treespec_dumps

        return S.ExecutionPlan(
            name=self.name,
            container_meta_type=S.ContainerMetadata(
                encoded_inp_str=treespec_dumps(gm_spec.in_spec) if gm_spec.in_spec is not None else "",
                encoded_out_str=treespec_dumps(gm_spec.out_spec) if gm_spec.out_spec is not None else "",
            ),
            values=self.values,
            inputs=inputs,
            outputs=outputs,
            chains=[S.Chain(inputs=[], outputs=[], instructions=self.instructions,
                            stacktrace=self.frames if self.program.config.emit_stacktrace else None)],
            operators=self.operators,
            delegates=self.delegates,
            non_const_buffer_sizes=self.arena_sizes,
            non_const_buffer_device=self.arena_devices,
        )

    def _emit_placeholders(self, nodes: list[fx.Node]) -> list[int]:
        sig = self.ep.graph_signature
        kinds = {spec.arg.name: spec for spec in sig.input_specs if hasattr(spec.arg, "name")}
        user_inputs: list[fx.Node] = []
        for node in nodes:
            if node.op != "placeholder":
                continue
            spec = kinds.get(node.name)
            v = node.meta.get("val")
            if spec is None or spec.kind == InputKind.USER_INPUT:
                user_inputs.append(node)
                continue
            if spec.kind == InputKind.BUFFER and node.name in self.mutated:
                self.node_values[node] = self._mutable_buffer(node, spec)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                data = self._constant_data(spec).detach()
                tag = self._external_tag(node, spec)
                if tag is None:
                    self.node_values[node] = self._add(self._tensor_value(v, node, self.program.constants.add(data)))
                    continue
                value = self._tensor_value(v, node)
                value.extra_tensor_info = S.ExtraTensorInfo(
                    fully_qualified_name=spec.target, location=S.TensorDataLocation.EXTERNAL)
                self.program.external.add(tag, spec.target, data,
                                  TensorLayout(value.scalar_type, list(value.sizes), list(value.dim_order)))
                self.node_values[node] = self._add(value)
            else:
                raise ExportError(
                    f"method '{self.name}': input '{node.name}' is a {spec.kind.name.lower()}, which .pte programs "
                    "cannot hold; remove it from the model's forward"
                )
        inputs = []
        for node in user_inputs:
            v = node.meta.get("val")
            if isinstance(v, torch.Tensor):
                # an unplanned input (no allocation info) is the caller's memory, bound at run time
                self.node_values[node] = (self._planned_tensor(v, node) if self.memory_plan.alloc_graph_input
                                          else self._add(self._tensor_value(v, node)))
            elif isinstance(v, (bool, int, float)):
                self.node_values[node] = self._scalar(v)
            elif isinstance(v, torch.SymInt):
                # A size computed outside a delegated partition (the position read from a tensor):
                # the nested program takes it as an Int the delegate call sets on each run.
                self.node_values[node] = self._add(S.Int(0))
            else:
                raise ExportError(
                    f"method '{self.name}': input '{node.name}' is a {type(v).__name__}; .pte methods take tensors "
                    "and Python scalars, so pass it as a tensor"
                )
            inputs.append(self.node_values[node])
        self.written = [self.buffer_of[self.node_values[n]] for n in nodes
                        if n.op == "placeholder" and n.name in self.mutated
                        and self.node_values.get(n) in self.buffer_of]
        return inputs

    def _external_tag(self, node: fx.Node, spec) -> Optional[str]:
        """The `.ptd` file (tag) this parameter or buffer goes to, or None to keep it in the `.pte`.
        Lifted tensor constants stay in the `.pte`: they belong to the code, not the weights."""
        if self.program.external.tag_of is None or spec.kind == InputKind.CONSTANT_TENSOR:
            return None
        tag = self.program.external.tag_of(node)
        if tag is True:
            return DEFAULT_EXTERNAL_TAG
        if tag is None or tag is False:
            return None
        if not isinstance(tag, str) or not tag or "/" in tag or tag in (".", ".."):
            raise ExportError(
                f"ExecutorchBackendConfig.external_constants returned {tag!r} for {spec.target!r}; return a "
                "file name without '/' (str), True for the default file, or None/False to keep it in the .pte")
        return tag

    def _mutable_buffer(self, node: fx.Node, spec) -> int:
        """A buffer the method updates: planned memory that keeps its contents between calls of one
        loaded method. Its initial contents go into the file only when a pass marked it
        (`et_init_buffer`); otherwise the runtime starts it from whatever the arena holds."""
        idx = self._planned_tensor(node.meta["val"], node)
        value = self.values[idx].val
        if node.meta.get("et_init_buffer"):
            data = self._constant_data(spec).detach()
            value.data_buffer_idx = self.program.mutable.add(data.contiguous())
        if self.program.config.emit_mutable_buffer_names:
            device = device_of(node)
            value.extra_tensor_info = S.ExtraTensorInfo(
                mutable_data_segments_idx=0, fully_qualified_name=spec.target, location=S.TensorDataLocation.SEGMENT,
                device_type=device[0], device_index=device[1])
        self.state.append(self.buffer_of[idx])
        if self.shared_state is not None:
            buf = self.buffer_of[idx]
            kind = (str(node.meta["val"].dtype), tuple(value.sizes))
            self.shared_offset[id(buf)] = self.shared_state.place(spec.target, buf.size, kind, self.name)
        return idx

    def _constant_data(self, spec) -> torch.Tensor:
        if spec.target in self.ep.state_dict:
            return self.ep.state_dict[spec.target]
        return self.ep.constants[spec.target]

    def _emit_call(self, node: fx.Node) -> None:
        target = node.target
        if target is operator.getitem:
            src, i = node.args
            self.node_values[node] = self.node_values[src][i]
            return
        if target is torch.ops.higher_order.cond:
            self._emit_cond(node)
            return
        if target in (torch.ops.higher_order.map_impl, torch.ops.higher_order.scan):
            self._emit_loop(node)
            return
        if target is executorch_call_delegate:
            self._emit_delegate(node)
            return
        if target is torch.ops.aten.copy_.default:
            self._emit_write_back(node)
            return
        val = node.meta.get("val")
        prim = prim_op_name(target)
        if prim is not None:
            args = [self._arg(a, None, node) if not isinstance(a, fx.Node) else self._node_value(a) for a in node.args]
            out = self._add(S.Int(0))
            self.node_values[node] = out
            self._instruction(prim, args + [out], node=node)
            return
        base = node.args[0] if node.args else None
        if (_is_alias_view(target, val, base) and isinstance(base, fx.Node)
                and self.node_values.get(base) in self.buffer_of
                and device_of(base) == CPU == device_of(node)
                and not self._written_back(self.buffer_of[self.node_values[base]])
                and all(isinstance(s, int) for s in val.shape)
                and all(isinstance(s, int) for s in base.meta["val"].shape)):
            self.node_values[node] = self._planned_tensor(val, node, alias_of=self.node_values[base])
            return
        if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten" and writes_first_argument(target):
            self._emit_in_place(node)
            return
        out_op = out_variant(target, node, self.name)
        given = _given_args(node)
        vals = list(val) if isinstance(val, (list, tuple)) else [val]
        outs = [self._planned_tensor(v, node) for v in vals]
        args = []
        out_args = []
        for a in out_op._schema.arguments:
            if a.is_out:
                out_args.append(a)
                continue
            if a.name in given:
                x = given[a.name]
            elif a.has_default_value():
                x = a.default_value
            else:
                raise ExportError(f"method '{self.name}': node '{node.name}' is missing argument '{a.name}'")
            if isinstance(x, (bool, int, float)) and _is_tensor_type(a.type):
                args.append(self._scalar_tensor(x, node))
            else:
                args.append(self._arg(x, a.type, node))
        if len(out_args) == 1 and out_args[0].type.kind() == "ListType":
            # list-returning ops (split): a TensorList out argument, and the same list returned
            args.append(self._add(S.TensorList(list(outs))))
            args.append(self._add(S.TensorList(list(outs))))
        else:
            args += outs
            args.append(outs[0] if len(outs) == 1 else self._add(S.TensorList(list(outs))))
        self.node_values[node] = outs if isinstance(val, (list, tuple)) else outs[0]
        name, overload = out_op._schema.name, out_op._schema.overload_name
        self._instruction(name, args, overload, node=node)

    def _emit_in_place(self, node: fx.Node) -> None:
        """An in-place ATen op (from reinplace_pass): the node's value is its first argument, written by the kernel."""
        given = _given_args(node)
        schema = node.target._schema
        args = []
        for a in schema.arguments:
            x = given[a.name] if a.name in given else a.default_value if a.has_default_value() else None
            scalar_tensor = isinstance(x, (bool, int, float)) and _is_tensor_type(a.type)
            args.append(self._scalar_tensor(x, node) if scalar_tensor else self._arg(x, a.type, node))
        self.node_values[node] = args[0]
        self._instruction(schema.name, args + [args[0]], schema.overload_name, node=node)

    def _emit_write_back(self, node: fx.Node) -> None:
        """`copy_(dest, src)`: ExecuTorch's in-place `aten::copy_` kernel writes src into dest's
        memory (a mutated buffer's or input's); the node's value is dest itself."""
        dest, src = node.args[0], node.args[1]
        non_blocking = node.args[2] if len(node.args) > 2 else node.kwargs.get("non_blocking", False)
        out = self._node_value(dest)
        args = [out, self._node_value(src), self._add(S.Bool(bool(non_blocking))), out]
        self.node_values[node] = out
        self._instruction("aten::copy_", args, node=node)

    def _instruction(self, name: str, args: list[int], overload: str = "", node: Optional[fx.Node] = None) -> None:
        self._append(S.KernelCall(op_index=self._operator(name, overload), args=args), node)

    def _append(self, instr_args: S.InstructionArguments, node: Optional[fx.Node]) -> S.InstructionArguments:
        self.instructions.append(S.Instruction(instr_args))
        self.debug_handles.append(node.meta.get("debug_handle") if node is not None else None)
        if self.program.config.emit_stacktrace:
            self.frames.append(_frames(node))
        return instr_args

    def _emit_delegate(self, node: fx.Node) -> None:
        """A lowered partition: one BackendDelegate entry and a DelegateCall whose arguments are
        the partition's inputs, then its outputs (planned like any kernel's)."""
        lowered = getattr(self.owner[node.graph], node.args[0].target)
        args = []
        for a in node.args[1:]:
            args.append(self._node_value(a) if isinstance(a, fx.Node) else self._arg(a, None, node))
        val = node.meta["val"]
        # A partition returns a tuple of tensors; a module that calls a lowered module and is then exported
        # (torch traces the call as one node) may have it return a single tensor, used without a getitem.
        single = isinstance(val, torch.Tensor)
        outs = [self._planned_tensor(v, node) for v in ([val] if single else val)]
        self.node_values[node] = outs[0] if single else outs
        index = len(self.delegates)
        self.delegates.append(self.program.delegates.add(lowered))
        self.delegate_calls.append((len(self.instructions), lowered))
        self._append(S.DelegateCall(delegate_index=index, args=args + outs), node)
        # As ExecuTorch maps a DelegateCall: to the debug handles of the partition's nodes, in graph
        # order, so a debugger matches the call's logged outputs with the nodes they stand for.
        handles = [n.meta["debug_handle"] for n in lowered.original_module.graph.nodes
                   if n.op == "call_function" and n.meta.get("debug_handle") is not None]
        if handles:
            self.debug_handles[-1] = handles

    def _emit_cond(self, node: fx.Node) -> None:
        """`torch.cond`: both branches inline, chosen by jumps; each moves its results into the
        cond's outputs. Branch tensors live from the cond to the last use of its outputs."""
        pred, true_ref, false_ref, operands = node.args
        owner = self.owner[node.graph]
        outs = [self._planned_tensor(v, node) for v in node.meta["val"]]
        to_false = self._append(S.JumpFalseCall(self._node_value(pred), -1), node)
        self._emit_branch(getattr(owner, true_ref.target), operands, outs, node)
        to_end = self._append(S.JumpFalseCall(self._add(S.Bool(False)), -1), node)
        to_false.destination_instruction = len(self.instructions)
        self._emit_branch(getattr(owner, false_ref.target), operands, outs, node)
        to_end.destination_instruction = len(self.instructions)
        self.node_values[node] = outs

    def _emit_branch(self, gm: fx.GraphModule, operands, outs: list[int], cond: fx.Node) -> None:
        self.owner[gm.graph] = gm
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for ph, operand in zip(placeholders, operands):
            self.node_values[ph] = self._node_value(operand)
        for n in gm.graph.nodes:
            self.step[n] = self.step[cond]
            if n.op == "call_function":
                self._emit_call(n)
            elif n.op == "output":
                for src, dst in zip(n.args[0], outs):
                    moved = self._node_value(src)
                    self._append(S.MoveCall(moved, dst), cond)
                    if moved in self.buffer_of:
                        self.moved_into.append((moved, dst))

    def _emit_loop(self, node: fx.Node) -> None:
        """`torch.map` / `torch.scan` as ExecuTorch lowers them: the body inline once, run for each row of
        the scanned tensors by a backward jump. A counter value selects row `i` of each (`select_copy`),
        `et_copy_index` stacks each per-row result, and scan's carries are planned tensors that
        `copy_` sets from the initial values and then from each step's new carries."""
        if node.target is torch.ops.higher_order.map_impl:
            body_ref, xs, extra = node.args
            carries_in, vals = [], list(node.meta["val"])
        else:
            body_ref, carries_in, xs, extra = node.args
            vals = list(node.meta["val"])
        body = getattr(self.owner[node.graph], body_ref.target)
        n_carry = len(carries_in)
        carries = [self._planned_tensor(v, node) for v in vals[:n_carry]]
        stacked = [self._planned_tensor(v, node) for v in vals[n_carry:]]
        for idx in stacked:  # et_copy_index grows them row by row
            self.values[idx].val.shape_dynamism = S.TensorShapeDynamism.DYNAMIC_BOUND
        counter, count, one = self._add(S.Int(0)), self._add(S.Int(0)), self._add(S.Int(1))
        done = self._add(S.Bool(False))
        self._instruction("aten::sym_size", [self._node_value(xs[0]), self._add(S.Int(0)), count], "int", node)
        for dst, src in zip(carries, carries_in):
            self._copy_into(dst, self._node_value(src), node)
        start = len(self.instructions)
        rows = []
        for x, ph in zip(xs, [n for n in body.graph.nodes if n.op == "placeholder"][n_carry:]):
            self.step[ph] = self.step[node]
            row = self._planned_tensor(ph.meta["val"], ph)
            self._instruction("aten::select_copy", [self._node_value(x), self._add(S.Int(0)), counter, row, row],
                              "int_out", node)
            rows.append(row)
        results = self._emit_body(body, carries + rows + [self._node_value(a) for a in extra], node)
        # torch refuses bodies that return their inputs, so no result is a carry itself: each copy_ reads
        # a value this step computed.
        for dst, src in zip(stacked, results[n_carry:]):
            self._instruction("executorch_prim::et_copy_index", [dst, src, counter], "tensor", node)
        for dst, src in zip(carries, results[:n_carry]):
            self._copy_into(dst, src, node)
        self._instruction("executorch_prim::add", [counter, one, counter], "Scalar", node)
        self._instruction("executorch_prim::eq", [counter, count, done], "Scalar", node)
        self._append(S.JumpFalseCall(done, start), node)
        # The counter ends at the row count; back to 0 for the method's next execution.
        self._instruction("executorch_prim::sub", [counter, count, counter], "Scalar", node)
        self.node_values[node] = carries + stacked

    def _emit_body(self, gm: fx.GraphModule, operands: list[int], owner_node: fx.Node) -> list[int]:
        """Emit a loop body's nodes with its placeholders bound to `operands`; its result values."""
        self.owner[gm.graph] = gm
        for ph, operand in zip([n for n in gm.graph.nodes if n.op == "placeholder"], operands):
            self.node_values[ph] = operand
        results: list[int] = []
        for n in gm.graph.nodes:
            self.step[n] = self.step[owner_node]
            if n.op == "call_function":
                self._emit_call(n)
            elif n.op == "output":
                results = [self._node_value(a) for a in n.args[0]]
        return results

    def _copy_into(self, dst: int, src: int, node: fx.Node) -> None:
        self._instruction("aten::copy_", [dst, src, self._add(S.Bool(False)), dst], node=node)

    def _written_back(self, buf: memory_planning.Buffer) -> bool:
        """Whether a write-back `copy_` changes this storage (a mutated buffer's or input's)."""
        return any(buf is b for b in self.written)

    def _emit_outputs(self, node: fx.Node) -> list[int]:
        sig = self.ep.graph_signature
        outs = []
        for spec, arg in zip(sig.output_specs, node.args[0]):
            if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
                in_place = isinstance(arg, fx.Node) and arg.op == "placeholder" and arg.name in self.mutated
                if not (in_place or isinstance(arg, fx.Node) and arg.target is torch.ops.aten.copy_.default):
                    raise ExportError(
                        f"method '{self.name}': the update of {spec.target!r} has no write-back copy; lower the "
                        "program with EdgeProgramManager.to_executorch, which adds it"
                    )
                continue  # written in place (by its copy_, or by the op itself), not a method output
            if spec.kind != OutputKind.USER_OUTPUT:
                raise ExportError(
                    f"method '{self.name}': the model mutates {spec.kind.name.lower().replace('_', ' ')} "
                    f"'{spec.target}' in forward, which this exporter does not support yet; "
                    "return the new value as an output instead"
                )
            if isinstance(arg, fx.Node):
                outs.append(self._node_value(arg))
            elif arg is None:
                outs.append(self._add(S.Null()))
            else:
                outs.append(self._arg(arg, None, node))
        return outs

    # planning ---------------------------------------------------------------------------
    def _buffer_of_node(self, node: fx.Node) -> Optional[memory_planning.Buffer]:
        idx = self.node_values.get(node)
        return self.buffer_of.get(idx) if isinstance(idx, int) else None

    def _plan(self) -> None:
        """Memory planning places the buffers (but shared state: arena 2); each value records where."""
        buffers = [b for b in {id(p.buffer): p.buffer for p in self.planned}.values()
                   if id(b) not in self.shared_offset]
        arenas = memory_planning.plan_method(self.name, buffers, self.memory_plan,
                                             self.program.config.enable_non_cpu_memory_planning,
                                             self.shared_state is not None, self.ep)
        for p in self.planned:
            shared = self.shared_offset.get(id(p.buffer))
            p.value.allocation_info = (S.AllocationDetails.at(p.buffer.memory_id, p.buffer.offset) if shared is None
                                       else S.AllocationDetails.at(memory_planning.SHARED_STATE_ARENA, shared))
        on_device = [i for i, (_, device) in enumerate(arenas, start=1) if device != memory_planning.HOST]
        self.arena_sizes = [0] + [size for size, _ in arenas]
        self.arena_devices = [S.NonConstBufferDevice(buffer_idx=i, device_type=S.DeviceType(arenas[i - 1][1][0]),
                                                     device_index=arenas[i - 1][1][1]) for i in on_device] or None


def emit_method_with_delegates(name: str, ep: torch.export.ExportedProgram, program: ProgramState,
                               memory_plan: memory_planning.MemoryPlanningPass):
    """The ExecutionPlan of one edge-dialect program (adding to `program`'s tables), (instruction index,
    lowered module) for each DelegateCall in it, and {instruction index: debug handle} for the
    instructions whose node has one."""
    emitter = _MethodEmitter(name, ep, program, memory_plan)
    plan = emitter.emit()
    handles = {pc: h for pc, h in enumerate(emitter.debug_handles) if h is not None}
    return plan, emitter.delegate_calls, handles


def _frames(node: Optional[fx.Node]) -> S.FrameList:
    """The Python frames that produced `node`, outermost first, from its recorded stack trace."""
    frames: list[S.Frame] = []
    lines = ((node.meta.get("stack_trace") or "") if node is not None else "").splitlines()
    for i, line in enumerate(lines):
        text = line.strip()
        if not text.startswith('File "'):
            continue
        try:
            filename = text.split('"')[1]
            lineno = int(text.split("line ")[1].split(",")[0])
            name = text.rsplit(" in ", 1)[1]
        except (IndexError, ValueError):
            continue
        context = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].strip().startswith("File ") else ""
        frames.append(S.Frame(filename=filename, lineno=lineno, name=name, context=context))
    return S.FrameList(items=frames)


def emit_constant_method(name: str, value: Any, constants: ConstantTable) -> S.ExecutionPlan:
    """A method with no instructions that returns a constant (tensor, scalar, or a list of them)."""
    values: list[S.EValue] = []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for v in items:
        if isinstance(v, torch.Tensor):
            t = S.Tensor(scalar_type(v.dtype), 0, list(v.shape), list(range(v.dim())), False,
                         constants.add(v.detach()), None)
            values.append(S.EValue(t))
        elif isinstance(v, bool):
            values.append(S.EValue(S.Bool(v)))
        elif isinstance(v, int):
            values.append(S.EValue(S.Int(v)))
        elif isinstance(v, float):
            values.append(S.EValue(S.Double(v)))
        elif isinstance(v, str):
            values.append(S.EValue(S.String(v)))
        else:
            raise ExportError(
                f"constant method '{name}': value of type {type(v).__name__} cannot be stored; "
                "use a tensor, a bool, an int, a float, a str, or a list of them"
            )
    from torch.utils._pytree import tree_flatten, treespec_dumps

    _, out_spec = tree_flatten(value)
    _, in_spec = tree_flatten(((), {}))
    return S.ExecutionPlan(
        name=name,
        container_meta_type=S.ContainerMetadata(treespec_dumps(in_spec), treespec_dumps(out_spec)),
        values=values,
        inputs=[],
        outputs=list(range(len(values))),
        chains=[S.Chain(inputs=[], outputs=[], instructions=[], stacktrace=None)],
        operators=[],
        delegates=[],
        non_const_buffer_sizes=[0],
    )


def _is_tensor_type(ty) -> bool:
    return ty.kind() == "TensorType" or (ty.kind() == "OptionalType" and ty.getElementType().kind() == "TensorType")


def _given_args(node: fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name (positional ones named by the functional schema)."""
    names = [a.name for a in node.target._schema.arguments]
    given = dict(zip(names, node.args))
    given.update(node.kwargs)
    return given


_ENUMS: dict[Any, int] = {
    torch.strided: 0,
    torch.contiguous_format: 0,
    torch.preserve_format: 1,
    torch.channels_last: 2,
    torch.channels_last_3d: 3,
}
