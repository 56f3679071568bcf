"""Emission: one edge-dialect graph, its memory planned, becomes one `ExecutionPlan` of out-variant kernel calls."""

# Values are laid out the way the ExecuTorch exporter lays them out (constants, then inputs, then per instruction
# its outputs and its arguments); each tensor other than a constant takes the place `memory_planning` recorded in
# its node's `TensorSpec`, and a view the plan put in its base's storage becomes an alias (same bytes, no
# instruction).

from __future__ import annotations

import operator
from typing import Any, Optional

import torch
from torch import fx
from torch.export.graph_signature import InputKind, OutputKind

from executorch.exir import memory_planning
from executorch.exir import schema as S
from executorch.exir._dtypes import scalar_type
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.dialects._edge_ops import out_variant, prim_op_name, writes_first_argument
from executorch.exir.emit._program_state import DEFAULT_EXTERNAL_TAG, ConstantTable, ProgramState
from executorch.exir.error import ExportError
from executorch.exir.passes.propagate_device_pass import CPU, device_of
from executorch.exir.tensor import TensorSpec, is_alias
from executorch.exir.tensor_layout import TensorLayout
from executorch.exir.passes.write_back import mutated_placeholders


class _MethodEmitter:
    """Emits one method; what all methods share comes from `program`."""

    def __init__(self, name: str, ep: torch.export.ExportedProgram, program: ProgramState):
        self.name = name
        self.ep = ep
        self.graph = ep.graph_module.graph
        self.program = program
        self.mutated = mutated_placeholders(ep.graph_signature)  # placeholder name -> buffer / input name
        self.delegates: list[S.BackendDelegate] = []
        self.delegate_calls: list[tuple[int, Any]] = []  # (instruction index, lowered module)
        self.owner: dict[fx.Graph, fx.GraphModule] = {ep.graph_module.graph: ep.graph_module}
        self.frames: list[S.FrameList] = []
        self.values: list[S.EValue] = []
        self.node_values: dict[fx.Node, Any] = {}
        self.operators: list[S.Operator] = []
        self.op_index: dict[tuple[str, str], int] = {}
        self.instructions: list[S.Instruction] = []
        self.debug_handles: list = []  # per instruction: its node's debug handle (None without one)

    # values -----------------------------------------------------------------------------
    def _add(self, val: Any) -> int:
        self.values.append(S.EValue(val))
        return len(self.values) - 1

    def _tensor_value(self, t: torch.Tensor, node: fx.Node, data_buffer_idx: int = 0,
                      spec: Optional[TensorSpec] = None) -> S.Tensor:
        spec = spec or memory_planning.tensor_spec(t, node, self.name)
        device = device_of(node)
        return S.Tensor(
            scalar_type=scalar_type(t.dtype),
            storage_offset=0,
            sizes=list(spec.shape),
            dim_order=list(spec.dim_order),
            requires_grad=bool(t.requires_grad),
            data_buffer_idx=data_buffer_idx,
            allocation_info=None,
            shape_dynamism=spec.shape_dynamism,
            # Host tensors say nothing, which readers take as the host, as ExecuTorch writes them.
            extra_tensor_info=None if device == CPU else S.ExtraTensorInfo(device_type=device[0],
                                                                          device_index=device[1]),
        )

    def _planned_tensor(self, t: torch.Tensor, node: fx.Node, spec: TensorSpec) -> int:
        """A tensor value where the memory plan put it (the caller's memory when the plan left it out)."""
        value = self._tensor_value(t, node, spec=spec)
        if spec.mem_id is not None:
            value.allocation_info = S.AllocationDetails.at(spec.mem_id, spec.mem_offset)
        return self._add(value)

    def _results(self, node: fx.Node) -> list[int]:
        """The planned tensors a call produces, one per result."""
        val, spec = node.meta["val"], node.meta["spec"]
        if isinstance(val, (list, tuple)):
            return [self._planned_tensor(v, node, s) for v, s in zip(val, spec)]
        return [self._planned_tensor(val, node, spec)]

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
        inputs = self._emit_placeholders(nodes)
        outputs: list[int] = []
        for node in nodes:
            if node.op == "call_function":
                self._emit_call(node)
            elif node.op == "output":
                outputs = self._emit_outputs(node)
        meta = self.ep.graph_module.meta  # the memory plan's arenas
        devices = [S.NonConstBufferDevice(buffer_idx=i, device_type=S.DeviceType(device[0]), device_index=device[1])
                   for i, device in meta["non_const_buffer_device"]]
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
            non_const_buffer_sizes=list(meta["non_const_buffer_sizes"]),
            non_const_buffer_device=devices or None,
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
                self.node_values[node] = self._planned_tensor(v, node, node.meta["spec"])
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
        idx = self._planned_tensor(node.meta["val"], node, node.meta["spec"])
        value = self.values[idx].val
        if node.meta.get("et_init_buffer"):
            data = self._constant_data(spec).detach()
            value.data_buffer_idx = self.program.mutable.add(data.contiguous())
        if self.program.config.emit_mutable_buffer_names:
            device = device_of(node)
            value.extra_tensor_info = S.ExtraTensorInfo(
                mutable_data_segments_idx=0, fully_qualified_name=spec.target, location=S.TensorDataLocation.SEGMENT,
                device_type=device[0], device_index=device[1])
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
        if is_alias(node):
            out = self.node_values[node] = self._planned_tensor(val, node, node.meta["spec"])
            if any(not isinstance(d, int) for d in val.shape):
                # A view over symbolic sizes: et_view gives it its base's memory and this call's sizes.
                size_type = torch.ops.aten.view_copy.default._schema.arguments[1].type
                self._instruction("executorch_prim::et_view", [self._node_value(node.args[0]),
                                                              self._arg(list(node.args[1]), size_type, node), out],
                                  "default", node=node)
            return
        if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten" and writes_first_argument(target):
            self._emit_in_place(node)
            return
        out_op = out_variant(target, node, self.name)
        given = _given_args(node)
        outs = self._results(node)
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
        outs = self._results(node)
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
        outs = self._results(node)
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
            if n.op == "call_function":
                self._emit_call(n)
            elif n.op == "output":
                for src, dst in zip(n.args[0], outs):
                    self._append(S.MoveCall(self._node_value(src), dst), cond)

    def _emit_loop(self, node: fx.Node) -> None:
        """`torch.map` / `torch.scan` as ExecuTorch lowers them: the body inline once, run for each row of
        the scanned tensors by a backward jump. A counter value selects row `i` of each (`select_copy`),
        `et_copy_index` stacks each per-row result, and scan's carries are planned tensors that
        `copy_` sets from the initial values and then from each step's new carries."""
        if node.target is torch.ops.higher_order.map_impl:
            (body_ref, xs, extra), carries_in = node.args, []
        else:
            body_ref, carries_in, xs, extra = node.args
        body = getattr(self.owner[node.graph], body_ref.target)
        n_carry = len(carries_in)
        outs = self._results(node)
        carries, stacked = outs[:n_carry], outs[n_carry:]
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
            row = self._planned_tensor(ph.meta["val"], ph, ph.meta["spec"])
            self._instruction("aten::select_copy", [self._node_value(x), self._add(S.Int(0)), counter, row, row],
                              "int_out", node)
            rows.append(row)
        results = self._emit_body(body, carries + rows + [self._node_value(a) for a in extra])
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

    def _emit_body(self, gm: fx.GraphModule, operands: list[int]) -> list[int]:
        """Emit a loop body's nodes with its placeholders bound to `operands`; its result values."""
        self.owner[gm.graph] = gm
        for ph, operand in zip([n for n in gm.graph.nodes if n.op == "placeholder"], operands):
            self.node_values[ph] = operand
        results: list[int] = []
        for n in gm.graph.nodes:
            if n.op == "call_function":
                self._emit_call(n)
            elif n.op == "output":
                results = [self._node_value(a) for a in n.args[0]]
        return results

    def _copy_into(self, dst: int, src: int, node: fx.Node) -> None:
        self._instruction("aten::copy_", [dst, src, self._add(S.Bool(False)), dst], node=node)

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


def emit_method_with_delegates(name: str, ep: torch.export.ExportedProgram, program: ProgramState):
    """The ExecutionPlan of one edge-dialect program, its memory planned (adding to `program`'s tables),
    (instruction index, lowered module) for each DelegateCall in it, and {instruction index: debug handle}
    for the instructions whose node has one."""
    emitter = _MethodEmitter(name, ep, program)
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
