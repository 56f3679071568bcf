// VendorNpuBackend: runs the vendor_npu payload (see vendor_npu/payload.py) on the CPU.
// Registered through the public backend interface; nothing here is part of the runtime.
#include <executorch/runtime/backend/interface.h>

#include <cstdint>
#include <cstring>

namespace vendor_npu {
namespace {

using executorch::runtime::ArrayRef;
using executorch::runtime::Backend;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::Result;
using executorch::runtime::ScalarType;
using executorch::runtime::Span;

constexpr uint32_t kNone = 0xFFFFFFFF;
enum Kind : uint8_t { kInput = 0, kConstant = 1, kTemp = 2, kOutput = 3 };
enum Opcode : uint8_t { kAdd = 1, kMul = 2, kLinear = 3, kConv2d = 4 };

struct Slot {
  uint8_t kind;
  uint8_t ndim;
  int32_t sizes[4];
  int64_t numel;
  float* data;
};

struct Op {
  uint8_t opcode;
  uint32_t out, a, b, c;
  int32_t params[7];
};

struct Plan {
  Slot* slots;
  uint32_t n_slots;
  uint32_t* io;  // inputs, then outputs
  uint32_t n_inputs, n_outputs;
  Op* ops;
  uint32_t n_ops;
};

// Bounds-checked little-endian reader over the payload.
struct Reader {
  const uint8_t* p;
  size_t n, pos = 0;
  bool ok = true;
  template <typename T>
  T get() {
    T v{};
    if (!ok || n - pos < sizeof(T)) {
      ok = false;
      return v;
    }
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
};

bool valid_slot(const Plan& plan, uint32_t s) { return s < plan.n_slots; }

// Same-rank-or-broadcast check for add/mul (right-aligned, size 1 broadcasts).
bool broadcasts(const Slot& a, const Slot& out) {
  if (a.ndim > out.ndim) return false;
  for (int i = 0; i < a.ndim; ++i) {
    int32_t da = a.sizes[a.ndim - 1 - i], dout = out.sizes[out.ndim - 1 - i];
    if (da != dout && da != 1) return false;
  }
  return true;
}

Error check_op(const Plan& plan, const Op& op) {
  ET_CHECK_OR_RETURN(valid_slot(plan, op.out) && valid_slot(plan, op.a) && valid_slot(plan, op.b) &&
                         (op.c == kNone || valid_slot(plan, op.c)),
                     InvalidProgram, "vendor_npu: an op names a slot out of range");
  const Slot &o = plan.slots[op.out], &a = plan.slots[op.a], &b = plan.slots[op.b];
  ET_CHECK_OR_RETURN(o.kind == kTemp || o.kind == kOutput, InvalidProgram, "vendor_npu: an op writes an input");
  switch (op.opcode) {
    case kAdd:
    case kMul:
      ET_CHECK_OR_RETURN(broadcasts(a, o) && broadcasts(b, o), InvalidProgram, "vendor_npu: bad broadcast");
      return Error::Ok;
    case kLinear: {
      ET_CHECK_OR_RETURN(a.ndim >= 1 && b.ndim == 2 && o.ndim == a.ndim && a.sizes[a.ndim - 1] == b.sizes[1] &&
                             o.sizes[o.ndim - 1] == b.sizes[0] && o.numel / b.sizes[0] == a.numel / b.sizes[1],
                         InvalidProgram, "vendor_npu: linear shapes do not agree");
      ET_CHECK_OR_RETURN(op.c == kNone || plan.slots[op.c].numel == b.sizes[0], InvalidProgram,
                         "vendor_npu: linear bias size");
      return Error::Ok;
    }
    case kConv2d: {
      const int32_t* p = op.params;
      ET_CHECK_OR_RETURN(a.ndim == 4 && b.ndim == 4 && o.ndim == 4 && p[6] > 0 && a.sizes[1] % p[6] == 0 &&
                             b.sizes[0] % p[6] == 0 && b.sizes[1] == a.sizes[1] / p[6] && o.sizes[0] == a.sizes[0] &&
                             o.sizes[1] == b.sizes[0] && p[0] > 0 && p[1] > 0 && p[4] > 0 && p[5] > 0,
                         InvalidProgram, "vendor_npu: conv2d shapes do not agree");
      for (int d = 0; d < 2; ++d) {
        int64_t in = a.sizes[2 + d], k = b.sizes[2 + d];
        int64_t want = (in + 2 * int64_t(p[2 + d]) - int64_t(p[4 + d]) * (k - 1) - 1) / p[d] + 1;
        ET_CHECK_OR_RETURN(o.sizes[2 + d] == want, InvalidProgram, "vendor_npu: conv2d output size");
      }
      ET_CHECK_OR_RETURN(op.c == kNone || plan.slots[op.c].numel == b.sizes[0], InvalidProgram,
                         "vendor_npu: conv2d bias size");
      return Error::Ok;
    }
    default:
      ET_LOG(Error, "vendor_npu: unknown opcode %u", static_cast<unsigned>(op.opcode));
      return Error::InvalidProgram;
  }
}

void elementwise(const Op& op, const Slot& o, const Slot& a, const Slot& b) {
  for (int64_t i = 0; i < o.numel; ++i) {
    int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
    for (int d = o.ndim - 1; d >= 0; --d) {
      int64_t coord = rem % o.sizes[d];
      rem /= o.sizes[d];
      int ka = d - (o.ndim - a.ndim), kb = d - (o.ndim - b.ndim);
      if (ka >= 0) {
        if (a.sizes[ka] != 1) ia += coord * sa;
        sa *= a.sizes[ka];
      }
      if (kb >= 0) {
        if (b.sizes[kb] != 1) ib += coord * sb;
        sb *= b.sizes[kb];
      }
    }
    o.data[i] = op.opcode == kAdd ? a.data[ia] + b.data[ib] : a.data[ia] * b.data[ib];
  }
}

void linear(const Slot& o, const Slot& x, const Slot& w, const float* bias) {
  int64_t n = w.sizes[0], k = w.sizes[1], rows = x.numel / k;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      float acc = bias ? bias[j] : 0.f;
      for (int64_t t = 0; t < k; ++t) acc += x.data[r * k + t] * w.data[j * k + t];
      o.data[r * n + j] = acc;
    }
}

void conv2d(const Op& op, const Slot& o, const Slot& x, const Slot& w, const float* bias) {
  const int32_t* p = op.params;
  int64_t B = x.sizes[0], C = x.sizes[1], H = x.sizes[2], W = x.sizes[3];
  int64_t O = w.sizes[0], Cg = w.sizes[1], KH = w.sizes[2], KW = w.sizes[3], OH = o.sizes[2], OW = o.sizes[3];
  int64_t Og = O / p[6];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t oc = 0; oc < O; ++oc) {
      int64_t g = oc / Og;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float acc = bias ? bias[oc] : 0.f;
          for (int64_t ic = 0; ic < Cg; ++ic)
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * p[0] - p[2] + kh * p[4];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * p[1] - p[3] + kw * p[5];
                if (iw < 0 || iw >= W) continue;
                acc += x.data[((b * C + g * Cg + ic) * H + ih) * W + iw] * w.data[((oc * Cg + ic) * KH + kh) * KW + kw];
              }
            }
          o.data[((b * O + oc) * OH + oh) * OW + ow] = acc;
        }
    }
}

class VendorNpuBackend final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> /*compile_specs*/) const override {
    MemoryAllocator* mem = context.get_runtime_allocator();
    Reader r{static_cast<const uint8_t*>(processed->data()), processed->size()};
    ET_CHECK_OR_RETURN(r.n >= 4 && std::memcmp(r.p, "VNP1", 4) == 0, InvalidProgram,
                       "vendor_npu: the payload is not a VNP1 program");
    r.pos = 4;
    Plan* plan = mem->allocate_list<Plan>(1);
    ET_CHECK_OR_RETURN(plan != nullptr, MemoryAllocationFailed, "vendor_npu: out of method memory");
    plan->n_slots = r.get<uint32_t>();
    ET_CHECK_OR_RETURN(r.ok && plan->n_slots <= r.n, InvalidProgram, "vendor_npu: truncated payload");
    plan->slots = mem->allocate_list<Slot>(plan->n_slots + 1);
    ET_CHECK_OR_RETURN(plan->slots != nullptr, MemoryAllocationFailed, "vendor_npu: out of method memory");
    for (uint32_t i = 0; i < plan->n_slots; ++i) {
      Slot& s = plan->slots[i];
      s.kind = r.get<uint8_t>();
      s.ndim = r.get<uint8_t>();
      ET_CHECK_OR_RETURN(r.ok && s.ndim <= 4 && s.kind <= kOutput, InvalidProgram, "vendor_npu: bad slot %u", i);
      s.numel = 1;
      for (int d = 0; d < s.ndim; ++d) {
        s.sizes[d] = r.get<int32_t>();
        ET_CHECK_OR_RETURN(r.ok && s.sizes[d] >= 0 && s.sizes[d] < (1 << 24), InvalidProgram,
                           "vendor_npu: bad size in slot %u", i);
        s.numel *= s.sizes[d];
      }
      uint16_t key_len = r.get<uint16_t>();
      ET_CHECK_OR_RETURN(r.ok && key_len < 256 && r.n - r.pos >= key_len, InvalidProgram,
                         "vendor_npu: bad key in slot %u", i);
      s.data = nullptr;
      if (s.kind == kConstant) {
        char key[256];
        std::memcpy(key, r.p + r.pos, key_len);
        key[key_len] = '\0';
        // Weights live in the program's named data, shared between partitions.
        Result<FreeableBuffer> weights = context.get_named_data_map()->get_data(key);
        if (!weights.ok()) return weights.error();
        ET_CHECK_OR_RETURN(weights->size() == size_t(s.numel) * sizeof(float) &&
                               reinterpret_cast<uintptr_t>(weights->data()) % alignof(float) == 0,
                           InvalidProgram, "vendor_npu: named data '%s' has the wrong size", key);
        s.data = const_cast<float*>(static_cast<const float*>(weights->data()));
      } else if (s.kind == kTemp) {
        s.data = mem->allocate_list<float>(static_cast<size_t>(s.numel) + 1);
        ET_CHECK_OR_RETURN(s.data != nullptr, MemoryAllocationFailed, "vendor_npu: out of method memory");
      }
      r.pos += key_len;
    }
    plan->n_inputs = r.get<uint32_t>();
    ET_CHECK_OR_RETURN(r.ok && plan->n_inputs <= plan->n_slots, InvalidProgram, "vendor_npu: bad input count");
    uint32_t inputs[64];
    ET_CHECK_OR_RETURN(plan->n_inputs <= 64, NotSupported, "vendor_npu: more than 64 inputs");
    for (uint32_t i = 0; i < plan->n_inputs; ++i) inputs[i] = r.get<uint32_t>();
    plan->n_outputs = r.get<uint32_t>();
    ET_CHECK_OR_RETURN(r.ok && plan->n_outputs <= plan->n_slots, InvalidProgram, "vendor_npu: bad output count");
    plan->io = mem->allocate_list<uint32_t>(plan->n_inputs + plan->n_outputs + 1);
    ET_CHECK_OR_RETURN(plan->io != nullptr, MemoryAllocationFailed, "vendor_npu: out of method memory");
    std::memcpy(plan->io, inputs, plan->n_inputs * sizeof(uint32_t));
    for (uint32_t i = 0; i < plan->n_outputs; ++i) plan->io[plan->n_inputs + i] = r.get<uint32_t>();
    for (uint32_t i = 0; i < plan->n_inputs + plan->n_outputs; ++i)
      ET_CHECK_OR_RETURN(r.ok && valid_slot(*plan, plan->io[i]) &&
                             plan->slots[plan->io[i]].kind == (i < plan->n_inputs ? kInput : kOutput),
                         InvalidProgram, "vendor_npu: bad input/output slot");
    plan->n_ops = r.get<uint32_t>();
    ET_CHECK_OR_RETURN(r.ok && plan->n_ops <= r.n, InvalidProgram, "vendor_npu: bad op count");
    plan->ops = mem->allocate_list<Op>(plan->n_ops + 1);
    ET_CHECK_OR_RETURN(plan->ops != nullptr, MemoryAllocationFailed, "vendor_npu: out of method memory");
    for (uint32_t i = 0; i < plan->n_ops; ++i) {
      Op& op = plan->ops[i];
      op.opcode = r.get<uint8_t>();
      op.out = r.get<uint32_t>();
      op.a = r.get<uint32_t>();
      op.b = r.get<uint32_t>();
      op.c = r.get<uint32_t>();
      for (int k = 0; k < 7; ++k) op.params[k] = r.get<int32_t>();
      ET_CHECK_OR_RETURN(r.ok, InvalidProgram, "vendor_npu: truncated op %u", i);
      Error e = check_op(*plan, op);
      if (e != Error::Ok) return e;
    }
    // Everything needed is parsed into method memory: the payload can go.
    processed->Free();
    return static_cast<DelegateHandle*>(plan);
  }

  Error execute(BackendExecutionContext& /*context*/, DelegateHandle* handle, Span<EValue*> args) const override {
    Plan& plan = *static_cast<Plan*>(handle);
    ET_CHECK_OR_RETURN(args.size() == plan.n_inputs + plan.n_outputs, InvalidArgument,
                       "vendor_npu: %zu arguments, expected %u", args.size(), plan.n_inputs + plan.n_outputs);
    for (size_t i = 0; i < args.size(); ++i) {
      Slot& s = plan.slots[plan.io[i]];
      ET_CHECK_OR_RETURN(args[i]->isTensor(), InvalidArgument, "vendor_npu: argument %zu is not a tensor", i);
      auto t = args[i]->toTensor();
      ET_CHECK_OR_RETURN(t.scalar_type() == ScalarType::Float && t.numel() == s.numel, InvalidArgument,
                         "vendor_npu: argument %zu is not float32[%lld]", i, static_cast<long long>(s.numel));
      s.data = t.mutable_data_ptr<float>();
    }
    for (uint32_t i = 0; i < plan.n_ops; ++i) {
      const Op& op = plan.ops[i];
      const Slot &o = plan.slots[op.out], &a = plan.slots[op.a], &b = plan.slots[op.b];
      const float* bias = op.c == kNone ? nullptr : plan.slots[op.c].data;
      ET_CHECK_OR_RETURN(o.data && a.data && b.data, InvalidState, "vendor_npu: op %u reads an unset slot", i);
      if (op.opcode == kAdd || op.opcode == kMul)
        elementwise(op, o, a, b);
      else if (op.opcode == kLinear)
        linear(o, a, b, bias);
      else
        conv2d(op, o, a, b, bias);
    }
    return Error::Ok;
  }
};

VendorNpuBackend g_backend;
const Error g_registered = executorch::runtime::register_backend(Backend{"VendorNpuBackend", &g_backend});

}  // namespace
}  // namespace vendor_npu
