"""One method ready to run: instructions compiled to steps at load, a tight loop at execute."""

from __future__ import annotations

import functools
import math
import threading
import weakref
from time import perf_counter_ns as now  # the clock of every ETDump event (tracers record these ticks)
from typing import Callable, Optional

import torch

from executorch.exir import schema
from executorch.runtime import _layout
from executorch.runtime._errors import ExecuTorchError, InvalidProgramError
from executorch.runtime._meta import MethodMeta, TensorInfo
from executorch.runtime._python import _kernels, _ops
from executorch.runtime._python._values import PlanValues, SharedArena, TensorSpec

# Like the native runtime, stop a method that jumps around forever (a malformed loop).
MAX_INSTRUCTIONS = 10_000_000


class _Chain:
    __slots__ = ("steps", "labels", "jumps", "logged")

    def __init__(self, steps: list, labels: list[str], jumps: bool, logged: list) -> None:
        self.steps, self.labels, self.jumps = steps, labels, jumps
        self.logged = logged  # per step: the values a tracer logs after it (kernel outs, delegate args)


class PythonMethod:
    """Runs one ExecutionPlan with torch kernels over its planned memory."""

    def __init__(self, program: schema.Program, plan: schema.ExecutionPlan, external=None,
                 shared: Optional[SharedArena] = None) -> None:
        self.name = plan.name
        self._program = program
        self._external = external
        self._plan = plan
        self._delegates: dict[int, tuple] = {}
        self._values = PlanValues(program, plan, external, shared)
        self._objs = self._values.objects
        self._resolved: dict[int, _ops.Resolved] = {}
        self._dynamic = self._written_at_run_time()
        self._trace = _TraceSlot()  # its tracer is an ETDumpGen while profiling (enable_etdump=True)
        self._chains = [self._compile(i, chain) for i, chain in enumerate(plan.chains)]
        self._inputs = [self._input_binder(pos, idx) for pos, idx in enumerate(self._checked(plan.inputs, "input"))]
        self._outputs = [self._output_reader(idx) for idx in self._checked(plan.outputs, "output")]
        self._meta = plan_meta(plan)
        # One call at a time: every call reuses the same planned memory.
        self._lock = threading.Lock()

    def set_event_tracer(self, tracer) -> None:
        self._trace.tracer = tracer

    def meta(self) -> MethodMeta:
        return self._meta

    def execute(self, inputs: list) -> list:
        """Run on inputs already checked against `meta()` (count, tensor dtypes and shapes)."""
        with self._lock, torch.no_grad():
            for bind, value in zip(self._inputs, inputs):
                bind(value)
            if self._trace.tracer is not None:
                return self._execute_traced(self._trace.tracer)
            for c, chain in enumerate(self._chains):
                self._run(c, chain)
            return [read() for read in self._outputs]

    def _execute_traced(self, tracer) -> list:
        """`execute` recording an "Execute" block: the run, each instruction, delegate events
        (through `tracer`, which a delegate may reach) and, with a debug buffer, the values."""
        tracer.create_event_block("Execute")
        start = now()
        for c, chain in enumerate(self._chains):
            self._run_traced(tracer, c, chain)
        tracer.chain_id, tracer.debug_handle = -1, 0
        tracer.profile("Method::execute", start, now(), -1, 0)
        outputs = [read() for read in self._outputs]
        if tracer.logs_outputs:
            for value in outputs:
                tracer.log_value(value, -1, 0, output=True)
        return outputs

    def _run_traced(self, tracer, c: int, chain: _Chain) -> None:
        steps, labels, logged, objs, pc, n = chain.steps, chain.labels, chain.logged, self._objs, 0, len(chain.steps)
        budget = MAX_INSTRUCTIONS
        try:
            while pc < n:
                budget -= 1
                if budget < 0:
                    raise ExecuTorchError(
                        f"method {self.name!r} ran {MAX_INSTRUCTIONS} instructions without finishing; "
                        f"the program loops forever (check its JumpFalse destinations)")
                label = labels[pc]
                tracer.chain_id, tracer.debug_handle = c, pc
                outer = now()
                if label.startswith("delegate"):
                    nxt = steps[pc]()
                    end = now()
                    if tracer.logs_outputs:  # its arguments, before its event, as the native engine orders them
                        for idx in logged[pc]:
                            tracer.log_value(objs[idx], c, pc)
                    tracer.profile("DELEGATE_CALL", outer, end, c, pc)
                    pc = nxt if type(nxt) is int else pc + 1
                    continue
                elif label in _CONTROL:
                    nxt = steps[pc]()
                    tracer.profile(_CONTROL[label], outer, now(), c, pc)
                else:
                    inner = now()
                    nxt = steps[pc]()
                    end = now()
                    if tracer.logs_outputs:
                        for idx in logged[pc]:
                            tracer.log_value(objs[idx], c, pc)
                    tracer.profile("native_call_" + label.split("::", 1)[-1], inner, end, c, pc)
                    tracer.profile("OPERATOR_CALL", outer, now(), c, pc)
                    pc = nxt if type(nxt) is int else pc + 1
                    continue
                if tracer.logs_outputs:
                    for idx in logged[pc]:
                        tracer.log_value(objs[idx], c, pc)
                pc = nxt if type(nxt) is int else pc + 1
        except ExecuTorchError:
            raise
        except Exception as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ExecuTorchError(
                f"method {self.name!r}: instruction {pc} of chain {c} ({chain.labels[pc]}) failed: {detail}"
            ) from exc

    def _run(self, c: int, chain: _Chain) -> None:
        steps, pc = chain.steps, 0
        try:
            if not chain.jumps:
                for pc, step in enumerate(steps):
                    step()
                return
            budget, n = MAX_INSTRUCTIONS, len(steps)
            while pc < n:
                budget -= 1
                if budget < 0:
                    raise ExecuTorchError(
                        f"method {self.name!r} ran {MAX_INSTRUCTIONS} instructions without finishing; "
                        f"the program loops forever (check its JumpFalse destinations)")
                nxt = steps[pc]()
                pc = nxt if type(nxt) is int else pc + 1
        except ExecuTorchError:
            raise
        except Exception as exc:  # a kernel rejected its arguments: report where, keep the cause
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ExecuTorchError(
                f"method {self.name!r}: instruction {pc} of chain {c} ({chain.labels[pc]}) failed: {detail}"
            ) from exc

    # ---- load-time compilation

    def _checked(self, indices: list[int], what: str) -> list[int]:
        for idx in indices:
            self._check_index(idx, f"{what} list")
        return list(indices)

    def _check_index(self, idx: int, where: str) -> None:
        if not 0 <= idx < len(self._objs):
            raise InvalidProgramError(
                f"{where} of method {self.name!r} refers to value {idx}, but the method has {len(self._objs)} values")

    def _op(self, op_index: int) -> _ops.Resolved:
        if op_index not in self._resolved:
            if not 0 <= op_index < len(self._plan.operators):
                raise InvalidProgramError(
                    f"a KernelCall of method {self.name!r} uses operator {op_index}, but the method lists "
                    f"{len(self._plan.operators)}")
            self._resolved[op_index] = _ops.resolve(self._plan.operators[op_index])
        return self._resolved[op_index]

    def _written_at_run_time(self) -> set[int]:
        """Values whose object (not just contents) an instruction replaces, so nothing may pre-bind them."""
        written: set[int] = set()
        for chain in self._plan.chains:
            for instr in chain.instructions:
                args = instr.instr_args
                if isinstance(args, schema.MoveCall):
                    self._check_index(args.move_to, "a MoveCall")
                    written.add(args.move_to)
                elif isinstance(args, schema.KernelCall) and args.args and self._op(args.op_index).stores:
                    last = args.args[-1]
                    self._check_index(last, "a KernelCall")
                    if self._values.kind(last) not in (schema.Tensor, schema.TensorList):
                        written.add(last)
        for idx in self._plan.inputs:  # Int inputs: a delegate call sets them (set_int_input)
            self._check_index(idx, "a method input")
            if self._values.kind(idx) is schema.Int:
                written.add(idx)
        return written

    def _arg(self, idx: int) -> object:
        self._check_index(idx, "an instruction argument")
        objs, values = self._objs, self._values
        if idx in self._dynamic:
            return _ops.Dynamic(functools.partial(objs.__getitem__, idx))
        refs = values.list_refs(idx) if isinstance(objs[idx], list) else ()
        if any(r in self._dynamic for r in refs):
            return _ops.Dynamic(functools.partial(values.list_value, idx))
        return objs[idx]

    def _store(self, idx: int) -> Callable[[object], None]:
        objs, kind = self._objs, self._values.kind(idx)
        if kind is schema.Tensor:
            return lambda result: _copy_into(objs[idx], result)
        if kind is schema.TensorList:
            return lambda result: [_copy_into(t, r) for t, r in zip(self._values.list_value(idx), result)]
        return functools.partial(objs.__setitem__, idx)

    def _compile(self, c: int, chain: schema.Chain) -> _Chain:
        steps, labels, jumps, logged = [], [], False, []
        for pc, instr in enumerate(chain.instructions):
            args = instr.instr_args
            if isinstance(args, schema.KernelCall):
                op = self._op(args.op_index)
                bound = [self._arg(i) for i in args.args]
                self._check_writes(pc, op, args.args)
                specs = [self._values.specs.get(i) for i in args.args]
                store = self._store(args.args[-1]) if args.args else (lambda _r: None)
                steps.append(op.bind(bound, store, specs))
                labels.append(op.name)
                logged.append(list(args.args[-1:]))
            elif isinstance(args, schema.MoveCall):
                self._check_index(args.move_from, "a MoveCall")
                steps.append(functools.partial(_move, self._objs, args.move_from, args.move_to))
                labels.append("move")
                logged.append([])
            elif isinstance(args, schema.JumpFalseCall):
                self._check_index(args.cond_value_index, "a JumpFalseCall")
                if not 0 <= args.destination_instruction <= len(chain.instructions):
                    # the chain's length is allowed: it jumps past the last instruction
                    raise InvalidProgramError(
                        f"method {self.name!r}: jump instruction {pc} targets {args.destination_instruction}; its "
                        f"chain has {len(chain.instructions)} instructions; the file is malformed, export it again")
                steps.append(functools.partial(_jump_false, self._objs, args.cond_value_index,
                                               args.destination_instruction, pc + 1))
                labels.append("jump_false")
                logged.append([])
                jumps = True
            elif isinstance(args, schema.FreeCall):
                self._check_index(args.value_index, "a FreeCall")
                if self._values.kind(args.value_index) is not schema.Tensor:
                    raise InvalidProgramError(
                        f"instruction {pc} of method {self.name!r} frees value {args.value_index}, "
                        f"which is not a tensor")
                steps.append(functools.partial(_free, self._objs, args.value_index))
                labels.append("free")
                logged.append([])
            elif isinstance(args, schema.DelegateCall):
                backend, handle, delegate_id = self._delegate(pc, args)
                for i in args.args:
                    self._check_index(i, "a DelegateCall")
                steps.append(functools.partial(_call_delegate, backend, handle, self._objs, list(args.args),
                                               self._trace))
                labels.append(f"delegate {delegate_id}")
                logged.append(list(args.args))
            else:
                raise InvalidProgramError(f"instruction {pc} of method {self.name!r} has no valid kind")
        return _Chain(steps, labels, jumps, logged)

    def _check_writes(self, pc: int, op: _ops.Resolved, args: list[int]) -> None:
        """Constant data is shared with the file's bytes: no instruction may write into it."""
        for pos in op.writes:
            if pos >= len(args):
                continue
            idx = args[pos]
            targets = self._values.list_refs(idx) if self._values.kind(idx) is schema.TensorList else [idx]
            for t in targets:
                spec = self._values.specs.get(t)
                if spec is not None and spec.constant:
                    raise InvalidProgramError(
                        f"instruction {pc} of method {self.name!r} ({op.name}) writes into constant tensor "
                        f"value {t}; the program is corrupt, re-export it")

    def _delegate(self, pc: int, call: schema.DelegateCall) -> tuple:
        """The backend, its handle (one `init` per delegate entry) and the entry's id."""
        from executorch.runtime import python_backend

        delegates = self._plan.delegates
        d = call.delegate_index
        if not 0 <= d < len(delegates):
            raise InvalidProgramError(
                f"instruction {pc} of method {self.name!r} calls delegate {d}, but the method has "
                f"{len(delegates)}; the file is corrupt, re-export it")
        if d in self._delegates:
            return self._delegates[d]
        delegate = delegates[d]
        backend = python_backend.get_backend(delegate.id)
        if backend is None or not backend.is_available():
            raise ExecuTorchError(
                f"method {self.name!r} calls backend {delegate.id!r} (delegate {d}), which is not registered in the "
                f"Python runtime (registered: {', '.join(python_backend.registered_backend_names())}); install "
                "its package, register it with executorch.runtime.python_backend.register_backend, or run on the "
                "native runtime linked with it")
        try:
            handle = backend.init(_payload(self._program, delegate), list(delegate.compile_specs),
                                  _named_data(self._program, self._external))
        except ExecuTorchError:
            raise
        except Exception as exc:
            raise ExecuTorchError(
                f"backend {delegate.id!r} failed to initialise delegate {d} of method {self.name!r}: {exc}") from exc
        if hasattr(backend, "destroy"):
            weakref.finalize(self, backend.destroy, handle)
        self._delegates[d] = (backend, handle, delegate.id)
        return self._delegates[d]

    # ---- inputs and outputs

    def set_int_input(self, pos: int, value: int) -> None:
        """A new value for Int input `pos`, which `execute` then takes: a delegated partition's size
        input (the position read from a tensor before the call) changes on every run."""
        idx = self._plan.inputs[pos] if 0 <= pos < len(self._plan.inputs) else -1
        if idx < 0 or self._values.kind(idx) is not schema.Int or type(value) is not int:
            raise ExecuTorchError(
                f"method {self.name!r}: input {pos} is not an Int input that can take {value!r}; the delegate call "
                "and its nested program disagree, re-export the file")
        self._objs[idx] = value
        self._inputs[pos] = functools.partial(_check_fixed_input, self.name, pos, value)

    def _input_binder(self, pos: int, idx: int) -> Callable[[object], None]:
        kind, objs = self._values.kind(idx), self._objs
        if kind is schema.Tensor:
            spec = self._values.specs[idx]
            return functools.partial(_set_tensor_input, spec, objs, idx)
        if kind in (schema.Int, schema.Double, schema.Bool, schema.String, schema.Null):
            return functools.partial(_check_fixed_input, self.name, pos, objs[idx])
        raise ExecuTorchError(
            f"input {pos} of method {self.name!r} is a {kind.__name__}, "
            f"which the Python runtime cannot take as an input")

    def _output_reader(self, idx: int) -> Callable[[], object]:
        objs, values = self._objs, self._values
        kind = values.kind(idx)
        if kind is schema.Tensor:
            return lambda: objs[idx].clone()
        if kind in (schema.TensorList, schema.OptionalTensorList):
            return lambda: [None if t is None else t.clone() for t in values.list_value(idx)]
        if kind is schema.IntList:
            return lambda: values.list_value(idx)
        return lambda: _copy_if_list(objs[idx])


# Instructions that are not kernel or delegate calls, and the event name each gets while profiling.
_CONTROL = {"move": "MOVE_CALL", "jump_false": "JF_CALL", "free": "FREE_CALL"}


class _TraceSlot:
    """Where a method's steps find its tracer (a slot, so steps need no reference to the method)."""

    __slots__ = ("tracer",)

    def __init__(self) -> None:
        self.tracer = None


def _call_delegate(backend, handle, objs: list, indices: list[int], trace: _TraceSlot) -> None:
    args = [objs[i] for i in indices]
    if trace.tracer is not None and getattr(backend, "execute_traced", None) is not None:
        backend.execute_traced(handle, args, trace.tracer)
    else:
        backend.execute(handle, args)


def _payload(program: schema.Program, delegate: schema.BackendDelegate) -> memoryview:
    ref = delegate.processed
    if ref.location == schema.DataLocation.SEGMENT:
        pool, what = program.segment_data, "segment"
    else:
        pool, what = [d.data for d in program.backend_delegate_data], "inline data entry"
    if not 0 <= ref.index < len(pool):
        raise InvalidProgramError(
            f"delegate {delegate.id!r} keeps its payload in {what} {ref.index}, but the file has {len(pool)}; "
            "the file is corrupt, re-export it")
    return memoryview(pool[ref.index])


def _named_data(program: schema.Program, external=None) -> dict[str, memoryview]:
    """The program's named data, then the `.ptd` entries (a key in both: the program's wins)."""
    out = {key: entry.data for key, entry in (external or {}).items()}
    for entry in program.named_data or ():
        if not 0 <= entry.segment_index < len(program.segment_data):
            raise InvalidProgramError(
                f"named data {entry.key!r} is in segment {entry.segment_index}, but the file has "
                f"{len(program.segment_data)}; the file is corrupt, re-export it")
        out[entry.key] = memoryview(program.segment_data[entry.segment_index])
    return out


def _copy_if_list(value: object) -> object:
    return list(value) if isinstance(value, list) else value


def _copy_into(slot: torch.Tensor, result: object) -> None:
    if result is slot:
        return
    if not isinstance(result, torch.Tensor):
        raise TypeError(f"kernel returned {type(result).__name__} where the program expects a tensor")
    if slot.shape != result.shape:
        _kernels.resize(slot, result.shape)
    slot.copy_(result)


def _move(objs: list, src: int, dst: int) -> None:
    objs[dst] = objs[src]


def _jump_false(objs: list, cond: int, dest: int, nxt: int) -> int:
    value = objs[cond]
    if isinstance(value, torch.Tensor):
        if value.dtype != torch.bool:
            raise TypeError(f"jump condition (value {cond}) is a {value.dtype} tensor; it must be bool")
        holds = bool(value.all())
    elif isinstance(value, bool):
        holds = value
    else:
        raise TypeError(f"jump condition (value {cond}) is {type(value).__name__}; it must be a bool or bool tensor")
    return nxt if holds else dest


def _free(objs: list, idx: int) -> None:
    t = objs[idx]
    # Planned and constant memory belongs to the program; only a tensor's own allocation goes.
    if isinstance(t, torch.Tensor) and t.untyped_storage().resizable():
        t.set_()


def _set_tensor_input(spec: TensorSpec, objs: list, idx: int, value: torch.Tensor) -> None:
    # The public Method checked dtype and shape against the metadata; a shape past the
    # planned storage would still fail here, in resize, rather than overwrite memory.
    target = objs[idx]
    if target.shape != value.shape:
        _kernels.resize(target, value.shape, spec.dim_order)
    target.copy_(value)


def _check_fixed_input(method: str, pos: int, expected: object, value: object) -> None:
    ok = (type(value) is type(expected) and value == expected) or (
        isinstance(expected, float) and type(value) is int and value == expected)
    if not ok:
        raise ExecuTorchError(
            f"input {pos} of method {method!r} was fixed to {expected!r} when the program was exported, "
            f"got {value!r}; pass {expected!r}, or re-export the model with the value you need")


def plan_meta(plan: schema.ExecutionPlan) -> MethodMeta:
    """The method's inputs and outputs as MethodMeta, read from the plan without loading it."""
    def info(idx: int) -> Optional[TensorInfo]:
        if not 0 <= idx < len(plan.values):
            raise InvalidProgramError(f"method {plan.name!r} lists value {idx} as an input or output, out of range")
        t = plan.values[idx].val
        if not isinstance(t, schema.Tensor):
            return None
        dtype = _layout.to_dtype(t.scalar_type)
        itemsize = dtype.itemsize if dtype is not None else 1
        return TensorInfo(tuple(t.sizes), int(t.scalar_type), t.allocation_info is not None,
                          math.prod(t.sizes) * itemsize, int(t.shape_dynamism))
    return MethodMeta.make(plan.name, [info(i) for i in plan.inputs], [info(i) for i in plan.outputs])
