// Turns an XNNPACK graph into a Plan: values with upper-bound shapes and storage, ops in graph
// order on the float or int8 kernels (weights packed once for them; float ones dequantized where
// an op computes in float), and one arena whose slots are reused between values whose lifetimes
// do not overlap.
#include "backends/xnnpack/runtime/compiler.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "backends/xnnpack/runtime/executor.h"
#include "backends/xnnpack/runtime/ops/ops.h"
#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/quantized.h"
#include "xnnpack/schema_generated.h"

namespace executorch {
namespace backends {
namespace xnnpack {

using runtime::Error;
using runtime::FreeableBuffer;
using runtime::NamedDataMap;
using runtime::Result;
namespace fb = fb_xnnpack;

namespace {

// Value flags of the format.
constexpr uint32_t kExternalInput = 1, kExternalOutput = 2;
constexpr size_t kAlign = 64;
// Activations plus scratch of one delegate: far above what on-device graphs plan (MobileNetV2 needs a
// few MB), and a bound on what a malformed payload's shapes can make init allocate.
constexpr size_t kMaxArenaBytes = size_t(2) << 30;

size_t align_up(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

// Bound on one delegate's packed weights (as kMaxArenaBytes bounds its activations).
constexpr size_t kMaxPackedBytes = size_t(8) << 30;

// A block of `bytes` (kAlign-aligned) owned by *owner; from 2 MiB on, on Linux, a mapping of its
// own aligned to 2 MiB and marked for transparent huge pages before anything touches it: weights
// and activations of a CNN are tens of megabytes swept every run, which with 4 KiB pages misses
// the TLB on most new lines. (Heap memory would not do: a block carved from pages the process
// touched before keeps its small pages.) A hint only (the system may ignore it). Null when out of
// memory.
uint8_t* huge_block(size_t bytes, Block* owner) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr size_t kHuge = size_t(2) << 20;
  if (bytes >= kHuge) {
    const size_t len = bytes + kHuge;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    *owner = Block(static_cast<uint8_t*>(m), BlockFree{len});
    uint8_t* p = static_cast<uint8_t*>(m);
    p += (kHuge - reinterpret_cast<uintptr_t>(p) % kHuge) % kHuge;
    (void)madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);
    return p;
  }
#endif
  *owner = Block(new (std::nothrow) uint8_t[bytes + kAlign], BlockFree{0});
  uint8_t* p = owner->get();
  if (p == nullptr) return nullptr;
  return p + (kAlign - reinterpret_cast<uintptr_t>(p) % kAlign) % kAlign;
}

float bf16_to_float(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// What compile() knows about one value beyond the Value itself.
struct ValueInfo {
  fb::XNNDatatype datatype = fb::XNNDatatype::xnn_datatype_invalid;
  uint32_t id = 0;
  const uint8_t* raw = nullptr;  // constant bytes (valid during compile)
  uint64_t raw_size = 0;
  // Quantization of a constant weight/bias.
  enum class Quant { kNone, kTensor, kChannel, kBlock, kDynamic } quant = Quant::kNone;
  const float* channel_scales = nullptr;  // kChannel (may be unaligned in the file: read with memcpy)
  const uint8_t* block_scales = nullptr;  // kBlock: bf16 values; or float when block_scales_f32
  bool block_scales_f32 = false;
  uint32_t num_scales = 0;
  int32_t channel_dim = 0;
  uint32_t block_size = 0;
};

class Compiler final : public NodeContext {
 public:
  Compiler(const Payload& p, const NamedDataMap* nd, Plan* plan) : payload_(p), named_(nd), plan_(*plan) {}

  Error run() {
    graph_ = fb::GetXNNGraph(payload_.flatbuffer);
    ET_CHECK_OR_RETURN(graph_ != nullptr && graph_->xvalues() != nullptr && graph_->xnodes() != nullptr, InvalidProgram,
                       "XnnpackBackend: the XNNPACK graph has no values or no nodes");
    ET_CHECK_OR_RETURN(graph_->num_externs() <= 4096, InvalidProgram,
                       "XnnpackBackend: the graph declares %u external values (at most 4096)", graph_->num_externs());
    plan_.num_externs = graph_->num_externs();
    ET_TRY(define_values());
    for (uint32_t i = 0; i < graph_->xnodes()->size(); ++i) { ET_TRY(define_node(i, graph_->xnodes()->Get(i))); }
    ET_TRY(check_externals());
    ET_TRY(select_compute());
    ET_TRY(decode_float_weights());
    ET_TRY(pack_weights());
    mark_dw_pw_pairs();
    ET_TRY(copy_loose_constants());
    ET_TRY(dry_run());
    return plan_memory();
  }

 private:
  // ---- values ---------------------------------------------------------------------------------
  Result<const uint8_t*> constant_bytes(uint32_t idx, uint64_t* size, uint32_t value_id) {
    if (payload_.constant_data != nullptr || graph_->constant_data() != nullptr) {
      const auto* table = graph_->constant_data();
      ET_CHECK_OR_RETURN(table != nullptr && idx < table->size(), InvalidProgram,
                         "XnnpackBackend: value %u refers to constant %u; the graph has %u", value_id, idx,
                         table ? table->size() : 0u);
      const fb::ConstantDataOffset* entry = table->Get(idx);
      ET_CHECK_OR_RETURN(entry != nullptr, InvalidProgram, "XnnpackBackend: constant %u is empty", idx);
      // An empty key (written for the unused entry 0) means the bytes are in the payload.
      if (entry->named_key() != nullptr && entry->named_key()->size() != 0) {
        ET_CHECK_OR_RETURN(named_ != nullptr, InvalidProgram,
                           "XnnpackBackend: constant %u is named data '%s' but the program has no named data", idx,
                           entry->named_key()->c_str());
        Result<FreeableBuffer> buf = named_->get_data(entry->named_key()->c_str());
        ET_CHECK_OR_RETURN(buf.ok(), InvalidProgram,
                           "XnnpackBackend: constant %u names '%s', which the program's named data lacks", idx,
                           entry->named_key()->c_str());
        buffers_.push_back(std::move(*buf));
        *size = buffers_.back().size();
        return static_cast<const uint8_t*>(buffers_.back().data());
      }
      const uint64_t off = entry->offset(), n = entry->size();
      ET_CHECK_OR_RETURN(payload_.constant_data != nullptr && off <= payload_.constant_data_size &&
                             n <= payload_.constant_data_size - off,
                         InvalidProgram,
                         "XnnpackBackend: constant %u [%" PRIu64 ", +%" PRIu64 ") lies outside the payload's %" PRIu64
                         "-byte constant region",
                         idx, off, n, payload_.constant_data_size);
      *size = n;
      return payload_.constant_data + off;
    }
    const auto* legacy = graph_->constant_buffer();
    ET_CHECK_OR_RETURN(legacy != nullptr && idx < legacy->size() && legacy->Get(idx) != nullptr &&
                           legacy->Get(idx)->storage() != nullptr,
                       InvalidProgram, "XnnpackBackend: value %u refers to constant buffer %u, which is missing",
                       value_id, idx);
    *size = legacy->Get(idx)->storage()->size();
    return legacy->Get(idx)->storage()->data();
  }

  Error define_values() {
    const auto* xvalues = graph_->xvalues();
    plan_.values.reserve(xvalues->size());
    info_.reserve(xvalues->size());
    for (uint32_t i = 0; i < xvalues->size(); ++i) {
      const fb::XValue* xv = xvalues->Get(i);
      const fb::XNNTensorValue* tv = nullptr;
      const fb::XNNQuantizedTensorValue* qv = nullptr;
      if (xv != nullptr && xv->xvalue_union_type() == fb::XValueUnion::XNNTensorValue) {
        tv = xv->xvalue_union_as_XNNTensorValue();
      } else if (xv != nullptr && xv->xvalue_union_type() == fb::XValueUnion::XNNQuantizedTensorValue) {
        qv = xv->xvalue_union_as_XNNQuantizedTensorValue();
        tv = qv ? qv->tensor_value() : nullptr;
      }
      ET_CHECK_OR_RETURN(tv != nullptr, InvalidProgram, "XnnpackBackend: value %u is not a tensor value", i);
      Value v;
      ValueInfo vi;
      vi.id = tv->id_out();
      vi.datatype = tv->datatype();
      ET_CHECK_OR_RETURN(ids_.emplace(vi.id, static_cast<uint32_t>(i)).second, InvalidProgram,
                         "XnnpackBackend: value id %u is defined twice", vi.id);
      ET_CHECK_OR_RETURN((tv->flags() & ~(kExternalInput | kExternalOutput)) == 0, InvalidProgram,
                         "XnnpackBackend: value %u has unknown flags 0x%x", vi.id, tv->flags());
      const auto* dims = tv->dims();
      const uint32_t rank = dims ? dims->size() : 0;
      ET_CHECK_OR_RETURN(rank <= kMaxDims, NotImplemented,
                         "XnnpackBackend: value %u has %u dims; this backend handles at most %d", vi.id, rank,
                         kMaxDims);
      v.rank = static_cast<int>(rank);
      int64_t numel = 1;
      for (uint32_t d = 0; d < rank; ++d) {
        const int64_t n = dims->Get(d);
        v.max_dims[d] = v.dims[d] = n;
        ET_CHECK_OR_RETURN(n == 0 || numel <= kMaxNumel / n, InvalidProgram,
                           "XnnpackBackend: value %u's shape has more than 2^40 elements", vi.id);
        numel *= n;
      }
      ET_TRY(set_dtype(v, vi, tv, qv));
      if (tv->flags() & (kExternalInput | kExternalOutput)) {
        ET_CHECK_OR_RETURN(tv->external_id() < plan_.num_externs, InvalidProgram,
                           "XnnpackBackend: value %u has external id %u; the graph declares %u externals", vi.id,
                           tv->external_id(), plan_.num_externs);
        v.external = tv->external_id();
        v.is_input = (tv->flags() & kExternalInput) != 0;
        v.is_output = (tv->flags() & kExternalOutput) != 0;
        ET_CHECK_OR_RETURN(!(v.is_input && v.is_output), NotImplemented,
                           "XnnpackBackend: value %u is both an input and an output of the graph", vi.id);
      }
      if (tv->constant_buffer_idx() != 0) {
        ET_CHECK_OR_RETURN(v.external == kNoValue, InvalidProgram,
                           "XnnpackBackend: value %u is both external and constant", vi.id);
        ET_UNWRAP(raw, constant_bytes(tv->constant_buffer_idx(), &vi.raw_size, vi.id));
        vi.raw = raw;
        const uint64_t need = raw_bytes(v, vi);
        ET_CHECK_OR_RETURN(vi.raw_size >= need, InvalidProgram,
                           "XnnpackBackend: constant value %u holds %" PRIu64 " bytes; its shape needs %" PRIu64, vi.id,
                           vi.raw_size, need);
      }
      plan_.values.push_back(v);
      info_.push_back(vi);
    }
    return Error::Ok;
  }

  // Bytes of a constant in the file's layout.
  static uint64_t raw_bytes(const Value& v, const ValueInfo& vi) {
    const uint64_t n = static_cast<uint64_t>(v.max_numel());
    switch (vi.datatype) {
      case fb::XNNDatatype::xnn_datatype_qcint4:
      case fb::XNNDatatype::xnn_datatype_qbint4: {
        // Rows of the last dim, two values a byte, each row padded to a whole byte.
        const uint64_t cols = v.rank ? static_cast<uint64_t>(v.max_dims[v.rank - 1]) : 1;
        return cols == 0 ? 0 : (n / cols) * ((cols + 1) / 2);
      }
      case fb::XNNDatatype::xnn_datatype_qint8:
      case fb::XNNDatatype::xnn_datatype_quint8:
      case fb::XNNDatatype::xnn_datatype_qcint8: return n;
      default: return n * 4;
    }
  }

  Error set_dtype(Value& v, ValueInfo& vi, const fb::XNNTensorValue* tv, const fb::XNNQuantizedTensorValue* qv) {
    using D = fb::XNNDatatype;
    const D d = tv->datatype();
    const bool constant = tv->constant_buffer_idx() != 0;
    switch (d) {
      case D::xnn_datatype_fp32: v.dtype = DType::kF32; break;
      case D::xnn_datatype_int32: v.dtype = DType::kI32; break;
      case D::xnn_datatype_qint8:
      case D::xnn_datatype_quint8: v.dtype = d == D::xnn_datatype_qint8 ? DType::kQS8 : DType::kQU8; break;
      case D::xnn_datatype_qdint8: v.dtype = DType::kQD8; break;
      case D::xnn_datatype_qint32:
      case D::xnn_datatype_qcint32:
      case D::xnn_datatype_qcint8:
      case D::xnn_datatype_qcint4:
      case D::xnn_datatype_qbint4:
        ET_CHECK_OR_RETURN(constant, NotImplemented,
                           "XnnpackBackend: value %u has datatype %s, supported here for constant weights only", vi.id,
                           fb::EnumNameXNNDatatype(d));
        v.dtype = DType::kF32;  // decoded to float when the weights are packed
        break;
      default:
        ET_CHECK_OR_RETURN(false, NotImplemented,
                           "XnnpackBackend: value %u has datatype %s, which this backend does not support", vi.id,
                           fb::EnumNameXNNDatatype(d));
    }
    const bool quantized = d != D::xnn_datatype_fp32 && d != D::xnn_datatype_int32;
    ET_CHECK_OR_RETURN(quantized == (qv != nullptr), InvalidProgram,
                       "XnnpackBackend: value %u of datatype %s %s quantization parameters", vi.id,
                       fb::EnumNameXNNDatatype(d), qv ? "has unexpected" : "lacks");
    if (!qv) return Error::Ok;
    switch (qv->quant_params_type()) {
      case fb::XNNQuantParams::PerTensorQuant: {
        const fb::PerTensorQuant* q = qv->quant_params_as_PerTensorQuant();
        ET_CHECK_OR_RETURN(q != nullptr && std::isfinite(q->scale()) && q->scale() > 0, InvalidProgram,
                           "XnnpackBackend: value %u has a per-tensor scale that is not a positive number", vi.id);
        ET_CHECK_OR_RETURN(d == D::xnn_datatype_qint8 || d == D::xnn_datatype_quint8 || d == D::xnn_datatype_qint32,
                           NotImplemented, "XnnpackBackend: value %u: per-tensor quantization of %s is not supported",
                           vi.id, fb::EnumNameXNNDatatype(d));
        const int32_t lo = d == D::xnn_datatype_quint8 ? 0 : -128, hi = d == D::xnn_datatype_quint8 ? 255 : 127;
        ET_CHECK_OR_RETURN(d == D::xnn_datatype_qint32 || (q->zero_point() >= lo && q->zero_point() <= hi),
                           InvalidProgram, "XnnpackBackend: value %u has zero point %d outside [%d, %d]", vi.id,
                           q->zero_point(), lo, hi);
        v.scale = q->scale();
        v.zero_point = q->zero_point();
        vi.quant = ValueInfo::Quant::kTensor;
        return Error::Ok;
      }
      case fb::XNNQuantParams::PerChannelQuant: {
        const fb::PerChannelQuant* q = qv->quant_params_as_PerChannelQuant();
        ET_CHECK_OR_RETURN(q != nullptr && q->channel_dim() >= 0 && q->channel_dim() < v.rank, InvalidProgram,
                           "XnnpackBackend: value %u's channel dim is outside its %d dims", vi.id, v.rank);
        ET_CHECK_OR_RETURN(d == D::xnn_datatype_qcint8 || d == D::xnn_datatype_qcint32 || d == D::xnn_datatype_qcint4,
                           NotImplemented, "XnnpackBackend: value %u: per-channel quantization of %s is not supported",
                           vi.id, fb::EnumNameXNNDatatype(d));
        vi.quant = ValueInfo::Quant::kChannel;
        vi.channel_dim = q->channel_dim();
        const uint64_t channels = static_cast<uint64_t>(v.max_dims[vi.channel_dim]);
        if (q->scale_buffer_idx() != 0) {
          uint64_t size = 0;
          ET_UNWRAP(bytes, constant_bytes(q->scale_buffer_idx(), &size, vi.id));
          ET_CHECK_OR_RETURN(size >= channels * 4, InvalidProgram,
                             "XnnpackBackend: value %u's scales hold %" PRIu64 " bytes for %" PRIu64 " channels", vi.id,
                             size, channels);
          vi.channel_scales = reinterpret_cast<const float*>(bytes);
        } else {
          ET_CHECK_OR_RETURN(q->scale() != nullptr && q->scale()->size() >= channels, InvalidProgram,
                             "XnnpackBackend: value %u has %u scales for %" PRIu64 " channels", vi.id,
                             q->scale() ? q->scale()->size() : 0u, channels);
          vi.channel_scales = q->scale()->data();
        }
        vi.num_scales = static_cast<uint32_t>(channels);
        return Error::Ok;
      }
      case fb::XNNQuantParams::PerChannelGroupQuant: {
        const fb::PerChannelGroupQuant* q = qv->quant_params_as_PerChannelGroupQuant();
        ET_CHECK_OR_RETURN(d == D::xnn_datatype_qbint4, NotImplemented,
                           "XnnpackBackend: value %u: blockwise quantization of %s is not supported", vi.id,
                           fb::EnumNameXNNDatatype(d));
        ET_CHECK_OR_RETURN(q != nullptr && v.rank == 2 && q->channel_dim() == 0 && q->group_size() > 0 &&
                               v.max_dims[1] % q->group_size() == 0,
                           InvalidProgram,
                           "XnnpackBackend: value %u: blockwise weights must be 2-D, blocked along dim 1 by a "
                           "block size dividing it",
                           vi.id);
        const uint64_t n = static_cast<uint64_t>(v.max_dims[0]) * (v.max_dims[1] / q->group_size());
        vi.quant = ValueInfo::Quant::kBlock;
        vi.block_size = static_cast<uint32_t>(q->group_size());
        if (q->scale_buffer_idx() != 0) {
          uint64_t size = 0;
          ET_UNWRAP(bytes, constant_bytes(q->scale_buffer_idx(), &size, vi.id));
          ET_CHECK_OR_RETURN(q->num_scales() == n && size >= n * 2, InvalidProgram,
                             "XnnpackBackend: value %u has %u block scales (%" PRIu64
                             " bytes); its shape needs %" PRIu64,
                             vi.id, q->num_scales(), size, n);
          vi.block_scales = bytes;
        } else {
          ET_CHECK_OR_RETURN(q->scale() != nullptr && q->scale()->size() == n, InvalidProgram,
                             "XnnpackBackend: value %u has %u block scales; its shape needs %" PRIu64, vi.id,
                             q->scale() ? q->scale()->size() : 0u, n);
          vi.block_scales = reinterpret_cast<const uint8_t*>(q->scale()->data());
          vi.block_scales_f32 = true;
        }
        vi.num_scales = static_cast<uint32_t>(n);
        return Error::Ok;
      }
      case fb::XNNQuantParams::PerTokenDynamicQuant: {
        const fb::PerTokenDynamicQuant* q = qv->quant_params_as_PerTokenDynamicQuant();
        ET_CHECK_OR_RETURN(d == D::xnn_datatype_qdint8 && !constant, NotImplemented,
                           "XnnpackBackend: value %u: dynamic quantization of %s%s is not supported", vi.id,
                           fb::EnumNameXNNDatatype(d), constant ? " constants" : "");
        ET_CHECK_OR_RETURN(q != nullptr && q->num_nonbatch_dims() >= 0 && q->num_nonbatch_dims() <= v.rank,
                           InvalidProgram, "XnnpackBackend: value %u has %d non-batch dims of %d", vi.id,
                           q ? q->num_nonbatch_dims() : -1, v.rank);
        v.nonbatch_dims = q->num_nonbatch_dims();
        vi.quant = ValueInfo::Quant::kDynamic;
        return Error::Ok;
      }
      default:
        ET_CHECK_OR_RETURN(false, NotImplemented, "XnnpackBackend: value %u has unsupported quantization %s", vi.id,
                           fb::EnumNameXNNQuantParams(qv->quant_params_type()));
    }
  }

  // The constant's values as float, in the file's element order (numel floats).
  Result<float*> decode_constant(uint32_t vidx) {
    const Value& v = plan_.values[vidx];
    const ValueInfo& vi = info_[vidx];
    const int64_t n = v.max_numel();
    std::unique_ptr<float[]> out(new (std::nothrow) float[n > 0 ? n : 1]);
    ET_CHECK_OR_RETURN(out != nullptr, MemoryAllocationFailed, "XnnpackBackend: out of memory decoding value %u",
                       vi.id);
    float* o = out.get();
    const uint8_t* raw = vi.raw;
    using D = fb::XNNDatatype;
    int64_t inner = 1, channels = 1;
    if (vi.quant == ValueInfo::Quant::kChannel) {
      channels = v.max_dims[vi.channel_dim];
      for (int d = vi.channel_dim + 1; d < v.rank; ++d) inner *= v.max_dims[d];
    }
    auto channel_scale = [&](int64_t i) {
      float s;
      std::memcpy(&s, vi.channel_scales + ((i / inner) % channels), 4);
      return s;
    };
    switch (vi.datatype) {
      case D::xnn_datatype_fp32: std::memcpy(o, raw, static_cast<size_t>(n) * 4); break;
      case D::xnn_datatype_int32:
        for (int64_t i = 0; i < n; ++i) {
          int32_t q;
          std::memcpy(&q, raw + 4 * i, 4);
          o[i] = static_cast<float>(q);
        }
        break;
      case D::xnn_datatype_qint8:
        for (int64_t i = 0; i < n; ++i) o[i] = (int32_t(int8_t(raw[i])) - v.zero_point) * v.scale;
        break;
      case D::xnn_datatype_quint8:
        for (int64_t i = 0; i < n; ++i) o[i] = (int32_t(raw[i]) - v.zero_point) * v.scale;
        break;
      case D::xnn_datatype_qint32:
      case D::xnn_datatype_qcint32:
        for (int64_t i = 0; i < n; ++i) {
          int32_t q;
          std::memcpy(&q, raw + 4 * i, 4);
          o[i] = static_cast<float>(q) * (vi.quant == ValueInfo::Quant::kChannel ? channel_scale(i) : v.scale);
        }
        break;
      case D::xnn_datatype_qcint8:
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(int8_t(raw[i])) * channel_scale(i);
        break;
      case D::xnn_datatype_qcint4:
      case D::xnn_datatype_qbint4: {
        const int64_t cols = v.max_dims[v.rank - 1], row_bytes = (cols + 1) / 2;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t r = i / cols, c = i % cols;
          const uint8_t byte = raw[r * row_bytes + c / 2];
          const int32_t q = int32_t((c & 1) ? (byte >> 4) : (byte & 15)) - 8;
          float s;
          if (vi.quant == ValueInfo::Quant::kBlock) {
            const int64_t b = r * (cols / vi.block_size) + c / vi.block_size;
            if (vi.block_scales_f32) {
              std::memcpy(&s, vi.block_scales + 4 * b, 4);
            } else {
              uint16_t h;
              std::memcpy(&h, vi.block_scales + 2 * b, 2);
              s = bf16_to_float(h);
            }
          } else {
            s = channel_scale(i);
          }
          o[i] = static_cast<float>(q) * s;
        }
        break;
      }
      default:
        ET_CHECK_OR_RETURN(false, NotImplemented, "XnnpackBackend: cannot decode constant %u of datatype %s", vi.id,
                           fb::EnumNameXNNDatatype(vi.datatype));
    }
    plan_.owned_floats.push_back(std::move(out));
    return o;
  }

  // Constants read directly by kernels (not conv/FC weights): copied, since named data is only
  // valid during init. Quantized ones stay in their integer form.
  Error copy_loose_constants() {
    for (uint32_t i = 0; i < plan_.values.size(); ++i) {
      Value& v = plan_.values[i];
      if (info_[i].raw == nullptr || v.constant != nullptr) continue;
      if (!used_loose_.count(i)) continue;
      if (v.dtype == DType::kF32 && info_[i].datatype != fb::XNNDatatype::xnn_datatype_fp32) {
        ET_UNWRAP(f, decode_constant(i));
        v.constant = f;
      } else {
        const size_t bytes = static_cast<size_t>(v.max_numel()) * dtype_size(v.dtype);
        std::unique_ptr<uint8_t[]> copy(new (std::nothrow) uint8_t[bytes ? bytes : 1]);
        ET_CHECK_OR_RETURN(copy != nullptr, MemoryAllocationFailed, "XnnpackBackend: out of memory");
        std::memcpy(copy.get(), info_[i].raw, bytes);
        v.constant = copy.get();
        plan_.owned_bytes.push_back(std::move(copy));
      }
      v.data = const_cast<void*>(v.constant);
    }
    return Error::Ok;
  }

  // ---- nodes ----------------------------------------------------------------------------------
  Error lookup(uint32_t id, const Op& op, const char* role, uint32_t* out) override {
    auto it = ids_.find(id);
    ET_CHECK_OR_RETURN(it != ids_.end(), InvalidProgram,
                       "XnnpackBackend: node %u (%s) names %s value %u, which the graph does not define", op.node_index,
                       op.name, role, id);
    *out = it->second;
    return Error::Ok;
  }

  Value& value(uint32_t index) override { return plan_.values[index]; }

  Error input(Op& op, uint32_t id, const char* role) override {
    uint32_t idx;
    ET_TRY(lookup(id, op, role, &idx));
    ET_CHECK_OR_RETURN(info_[idx].raw != nullptr || plan_.values[idx].is_input || written_.count(idx), InvalidProgram,
                       "XnnpackBackend: node %u (%s) reads value %u before any node writes it", op.node_index, op.name,
                       id);
    op.in[op.n_in++] = idx;
    if (info_[idx].raw != nullptr) used_loose_.insert(idx);
    return Error::Ok;
  }

  Error output(Op& op, uint32_t id) override {
    ET_TRY(lookup(id, op, "output", &op.out));
    const Value& v = plan_.values[op.out];
    ET_CHECK_OR_RETURN(info_[op.out].raw == nullptr && !v.is_input, InvalidProgram,
                       "XnnpackBackend: node %u (%s) writes value %u, which is a constant or a graph input",
                       op.node_index, op.name, info_[op.out].id);
    ET_CHECK_OR_RETURN(!written_.count(op.out), InvalidProgram,
                       "XnnpackBackend: value %u is written by two nodes (the second: node %u, %s)", info_[op.out].id,
                       op.node_index, op.name);
    written_.insert(op.out);
    return Error::Ok;
  }

  // Weights of conv/FC: checked here; decode_float_weights() or pack_weights() reads them once
  // select_compute() has chosen the kernels.
  Error weights(Op& op, uint32_t filter_id, uint32_t bias_id, int64_t out_channels, int64_t per_channel) override {
    uint32_t f;
    ET_TRY(lookup(filter_id, op, "filter", &f));
    ET_CHECK_OR_RETURN(info_[f].raw != nullptr, NotImplemented,
                       "XnnpackBackend: node %u (%s) has a filter computed at run time; only constant filters are "
                       "supported",
                       op.node_index, op.name);
    ET_CHECK_OR_RETURN(plan_.values[f].max_numel() == out_channels * per_channel, InvalidProgram,
                       "XnnpackBackend: node %u (%s): filter %u has %" PRId64 " elements, expected %" PRId64
                       " x %" PRId64,
                       op.node_index, op.name, info_[f].id, plan_.values[f].max_numel(), out_channels, per_channel);
    op.filter = f;
    if (bias_id != kNoValue) {
      uint32_t b;
      ET_TRY(lookup(bias_id, op, "bias", &b));
      ET_CHECK_OR_RETURN(info_[b].raw != nullptr && plan_.values[b].max_numel() == out_channels, NotImplemented,
                         "XnnpackBackend: node %u (%s): the bias must be a constant of %" PRId64 " elements",
                         op.node_index, op.name, out_channels);
      op.bias_value = b;
    }
    return Error::Ok;
  }

  // Float weights (in the file's layout: OHWI / 1HWO / [out, in]) for the ops computing in float.
  Error decode_float_weights() {
    for (Op& op : plan_.ops) {
      if (op.filter == kNoValue || op.compute != Compute::kFloat) continue;
      ET_UNWRAP(w, decode_constant(op.filter));
      op.weights = w;
      if (op.bias_value != kNoValue) {
        ET_UNWRAP(b, decode_constant(op.bias_value));
        op.bias = b;
      }
    }
    return Error::Ok;
  }

  // ---- integer kernels ------------------------------------------------------------------------
  // The filter's scale of output channel `oc` (a per-tensor scale for every channel).
  float filter_scale(uint32_t f, int64_t oc) const {
    if (info_[f].quant != ValueInfo::Quant::kChannel) return plan_.values[f].scale;
    float s;
    std::memcpy(&s, info_[f].channel_scales + oc, 4);
    return s;
  }

  // Whether the filter's quantization suits the int8 kernels: int8, symmetric, one scale per
  // output channel along `out_dim` (or one per tensor).
  bool qs8_filter(uint32_t f, int out_dim) const {
    const ValueInfo& w = info_[f];
    using D = fb::XNNDatatype;
    if (w.datatype == D::xnn_datatype_qint8) return plan_.values[f].zero_point == 0;
    return w.datatype == D::xnn_datatype_qcint8 && w.quant == ValueInfo::Quant::kChannel && w.channel_dim == out_dim;
  }

  bool int32_bias(uint32_t b) const {
    using D = fb::XNNDatatype;
    return b == kNoValue || info_[b].datatype == D::xnn_datatype_qint32 ||
           info_[b].datatype == D::xnn_datatype_qcint32 || info_[b].datatype == D::xnn_datatype_int32;
  }

  // The op producing value `v` (null for inputs and constants).
  Op* producer(uint32_t v) {
    for (Op& op : plan_.ops) {
      if (op.out == v) return &op;
    }
    return nullptr;
  }

  // Picks the int8 kernels for the ops whose operands are quantized as they take them:
  // QS8 convolution / depthwise / fully connected (int8 weights per channel, int32 bias), QS8 add
  // of same-shape operands, QS8 global average pooling, and QD8 fully connected (a float -> qdint8
  // Convert into int8 or 4-bit weights: the layer quantizes the float rows itself, so the Convert
  // goes when nothing else reads its result). Everything else computes in float.
  Error select_compute() {
    for (Op& op : plan_.ops) {
      const uint32_t in0 = op.in[0];
      const Value& x = plan_.values[in0];
      const Value& y = plan_.values[op.out];
      const bool qs8_io = x.dtype == DType::kQS8 && y.dtype == DType::kQS8;
      switch (op.kind) {
        case OpKind::kConv:
        case OpKind::kDepthwiseConv:
          if (qs8_io && qs8_filter(op.filter, op.kind == OpKind::kConv ? 0 : 3) && int32_bias(op.bias_value) &&
              op.conv.kernel_h * op.conv.kernel_w <= 256) {
            op.compute = Compute::kQs8;
          }
          break;
        case OpKind::kFullyConnected:
          if (qs8_io && qs8_filter(op.filter, (op.flags & kFlagTransposeWeights) ? 1 : 0) &&
              int32_bias(op.bias_value)) {
            op.compute = Compute::kQs8;
          } else if (x.dtype == DType::kQD8 && x.nonbatch_dims == 1 && y.dtype == DType::kF32 &&
                     (op.flags & kFlagTransposeWeights) == 0 && qd8_filter(op.filter) &&
                     (op.bias_value == kNoValue ||
                      info_[op.bias_value].datatype == fb::XNNDatatype::xnn_datatype_fp32)) {
            const Op* convert = producer(op.in[0]);
            if (convert != nullptr && convert->kind == OpKind::kConvert &&
                plan_.values[convert->in[0]].dtype == DType::kF32) {
              op.compute = Compute::kQd8;
              op.in[0] = convert->in[0];
            }
          }
          break;
        case OpKind::kBinary: {
          const Value& b = plan_.values[op.in[1]];
          const BinaryKind kind = static_cast<BinaryKind>(op.sub);
          if (!qs8_io || b.dtype != DType::kQS8 ||
              (kind != BinaryKind::kAdd && kind != BinaryKind::kSub && kind != BinaryKind::kMul)) {
            break;
          }
          const Qs8BinaryParams p = qs8_binary_params(kind, x, b, y);
          if (!p.ok) break;
          op.compute = Compute::kQs8;
          op.params[0] = p.a_mul, op.params[1] = p.b_mul, op.params[2] = p.shift, op.params[3] = p.bias;
          op.alpha = p.scale;
          break;
        }
        case OpKind::kGlobalAvgPool:
          // The kernel's limits: 16384 channels, 2^23 pixels.
          if (qs8_io && x.rank == 4 && x.max_dims[3] <= 16384 && x.max_dims[1] * x.max_dims[2] <= (int64_t(1) << 23)) {
            op.compute = Compute::kQs8;
          }
          break;
        default: break;
      }
      if (op.compute != Compute::kFloat && !int8_packable(op)) {
        op.compute = Compute::kFloat;
        op.in[0] = in0;
      }
      if (op.compute == Compute::kQs8) {
        op.qmin = qbound(op.out_min, y, false);
        op.qmax = qbound(op.out_max, y, true);
      }
    }
    fuse_qs8_clamps();
    drop_unread_converts();
    return Error::Ok;
  }

  // A Clamp on a QS8 value in the same quantization clamps the integers: folded into the int8 op
  // producing its input when nothing else reads that value, else run on its own in int8.
  void fuse_qs8_clamps() {
    std::vector<int> readers(plan_.values.size(), 0);
    for (const Op& op : plan_.ops) {
      for (int i = 0; i < op.n_in; ++i) ++readers[op.in[i]];
    }
    std::vector<Op> kept;
    kept.reserve(plan_.ops.size());
    for (Op& op : plan_.ops) {
      const Value& x = plan_.values[op.in[0]];
      const Value& y = plan_.values[op.out];
      if (op.kind != OpKind::kUnary || static_cast<UnaryKind>(op.sub) != UnaryKind::kClamp || x.dtype != DType::kQS8 ||
          y.dtype != DType::kQS8 || x.scale != y.scale || x.zero_point != y.zero_point || x.rank != y.rank ||
          !std::equal(x.max_dims, x.max_dims + x.rank, y.max_dims)) {
        kept.push_back(op);
        continue;
      }
      op.compute = Compute::kQs8;
      op.qmin = qbound(op.out_min, y, false);
      op.qmax = qbound(op.out_max, y, true);
      Op* prev = kept.empty() ? nullptr : &kept.back();
      if (prev != nullptr && prev->out == op.in[0] && prev->compute == Compute::kQs8 && readers[op.in[0]] == 1 &&
          !x.is_output && prev->kind != OpKind::kUnary) {
        prev->qmin = std::max(prev->qmin, op.qmin);
        prev->qmax = std::min(prev->qmax, op.qmax);
        prev->out = op.out;
        continue;
      }
      kept.push_back(op);
    }
    plan_.ops.swap(kept);
  }

  // Marks each depthwise convolution (float or QS8) that only feeds the pointwise convolution
  // after it (MobileNet's blocks, on maps of 14 rows and more) to run with it as one kernel call; see
  // Op::fuse_next. The depthwise output then never exists: plan_memory() gives it no slot.
  void mark_dw_pw_pairs() {
    std::vector<int> readers(plan_.values.size(), 0);
    for (const Op& op : plan_.ops) {
      for (int i = 0; i < op.n_in; ++i) ++readers[op.in[i]];
    }
    for (size_t i = 0; i + 1 < plan_.ops.size(); ++i) {
      Op& dw = plan_.ops[i];
      const Op& pw = plan_.ops[i + 1];
      const Value& mid = plan_.values[dw.out];
      // Float, or int8 throughout (QS8 kernels, every value QS8).
      const DType t = dw.compute == Compute::kFloat ? DType::kF32 : DType::kQS8;
      if (dw.kind != OpKind::kDepthwiseConv || pw.kind != OpKind::kConv || dw.compute == Compute::kQd8 ||
          pw.compute != dw.compute || dw.packed == nullptr || pw.packed == nullptr || pw.n_in != 1 ||
          pw.in[0] != dw.out || readers[dw.out] != 1 || mid.is_output || mid.dtype != t ||
          plan_.values[dw.in[0]].dtype != t || plan_.values[pw.out].dtype != t || !to_conv_nhwc(pw.conv).pointwise() ||
          pw.conv.groups != 1 || mid.rank != 4 || mid.max_dims[3] > kernels::cpu::kDwPwMaxChannels ||
          mid.max_dims[0] * mid.max_dims[1] < kernels::cpu::kDwPwMinRows)
        continue;
      dw.fuse_next = true;
      ++i;
    }
  }

  // Whether the int8 kernels take the op's geometry (packing can still refuse bad scales).
  bool int8_packable(const Op& op) const {
    namespace cpu = kernels::cpu;
    const cpu::Isa isa = cpu::best_int8_isa();
    const int64_t n = op.conv.group_out, k = op.conv.group_in;
    switch (op.kind) {
      case OpKind::kConv:
      case OpKind::kDepthwiseConv: {
        const cpu::ConvNhwc c = to_conv_nhwc(op.conv);
        return c.valid() && cpu::conv2d_nhwc_qs8_packed_bytes(c, isa) != 0;
      }
      case OpKind::kFullyConnected:
        return op.compute == Compute::kQs8
                   ? cpu::fully_connected_qs8_packed_bytes(n, k, isa) != 0
                   : cpu::fully_connected_qd8_packed_bytes(n, k, qd8_group(op.filter, k), isa) != 0;
      default: return true;
    }
  }

  bool qd8_filter(uint32_t f) const {
    const ValueInfo& w = info_[f];
    using D = fb::XNNDatatype;
    const int64_t k = plan_.values[f].max_dims[1];
    switch (w.datatype) {
      case D::xnn_datatype_qcint8: return w.quant == ValueInfo::Quant::kChannel && w.channel_dim == 0;
      case D::xnn_datatype_qcint4: return w.quant == ValueInfo::Quant::kChannel && w.channel_dim == 0 && k % 2 == 0;
      case D::xnn_datatype_qbint4: return w.block_size % 8 == 0 || w.block_size == k;
      default: return false;
    }
  }

  // Converts to qdint8 whose every reader now quantizes its float rows itself.
  void drop_unread_converts() {
    std::vector<int> readers(plan_.values.size(), 0);
    for (const Op& op : plan_.ops) {
      for (int i = 0; i < op.n_in; ++i) ++readers[op.in[i]];
    }
    std::vector<Op> kept;
    kept.reserve(plan_.ops.size());
    for (const Op& op : plan_.ops) {
      const Value& y = plan_.values[op.out];
      if (op.kind == OpKind::kConvert && y.dtype == DType::kQD8 && readers[op.out] == 0 && !y.is_output) continue;
      kept.push_back(op);
    }
    plan_.ops.swap(kept);
  }

  // A node: its family's define step reads it into an Op (ops/ops.h).
  Error define_node(uint32_t index, const fb::XNode* node) {
    static constexpr DefineStep kFamilies[] = {define_conv, define_gemm, define_elementwise, define_pool, define_shape};
    ET_CHECK_OR_RETURN(node != nullptr, InvalidProgram, "XnnpackBackend: node %u is empty", index);
    Op op;
    op.node_index = index;
    const fb::XNodeUnion type = node->xnode_union_type();
    op.name = fb::EnumNameXNodeUnion(type);
    if (op.name == nullptr || *op.name == '\0') op.name = "unknown";
    if (type <= fb::XNodeUnion::MAX) op.kind_ordinal = ++kind_counts_[static_cast<size_t>(type)];
    ET_CHECK_OR_RETURN(node->xnode_union() != nullptr, InvalidProgram, "XnnpackBackend: node %u (%s) is empty", index,
                       op.name);
    if (const fb::OutputMinMax* mm = node->output_min_max()) {
      op.out_min = mm->output_min();
      op.out_max = mm->output_max();
    }
    for (DefineStep define : kFamilies) {
      Error err = Error::Ok;
      if (!define(*this, node, op, &err)) continue;
      ET_TRY(err);
      plan_.ops.push_back(op);
      return Error::Ok;
    }
    ET_CHECK_OR_RETURN(false, NotImplemented,
                       "XnnpackBackend: node %u is %s, a node kind this backend does not implement; lower that "
                       "operator outside the delegate or run the file on a runtime with XNNPACK",
                       index, op.name);
    return Error::Ok;
  }

  // Every external id is one value, used once; inputs and outputs in external-id order.
  Error check_externals() {
    std::vector<uint32_t> by_ext(plan_.num_externs, kNoValue);
    for (uint32_t i = 0; i < plan_.values.size(); ++i) {
      const Value& v = plan_.values[i];
      if (v.external == kNoValue) continue;
      ET_CHECK_OR_RETURN(by_ext[v.external] == kNoValue, InvalidProgram,
                         "XnnpackBackend: external id %u is given to two values (%u and %u)", v.external,
                         info_[by_ext[v.external]].id, info_[i].id);
      by_ext[v.external] = i;
      ET_CHECK_OR_RETURN(
          v.dtype == DType::kF32 || v.dtype == DType::kI32 || v.dtype == DType::kQS8 || v.dtype == DType::kQU8,
          NotImplemented, "XnnpackBackend: external value %u has a datatype the call cannot pass", info_[i].id);
      ET_CHECK_OR_RETURN(!v.is_output || written_.count(i), InvalidProgram,
                         "XnnpackBackend: graph output %u is written by no node", info_[i].id);
    }
    for (uint32_t e = 0; e < plan_.num_externs; ++e) {
      if (by_ext[e] == kNoValue) continue;
      (plan_.values[by_ext[e]].is_input ? plan_.inputs : plan_.outputs).push_back(by_ext[e]);
    }
    return Error::Ok;
  }

  // Convolutions and fully connected layers get their weights packed once for the NHWC
  // micro-kernels (float or int8, as select_compute() chose); the float copies are then dropped.
  // All of them share one block (see huge_block): a model's weights are megabytes, streamed once
  // per run, and with 4 KiB pages most of their accesses also miss the TLB.
  Error pack_weights() {
    namespace cpu = kernels::cpu;
    std::vector<size_t> sizes(plan_.ops.size(), 0);
    size_t total = 0;
    for (size_t i = 0; i < plan_.ops.size(); ++i) {
      Op& op = plan_.ops[i];
      const bool conv = op.kind == OpKind::kConv || op.kind == OpKind::kDepthwiseConv;
      if (!conv && op.kind != OpKind::kFullyConnected) continue;
      const cpu::Isa isa = op.compute == Compute::kFloat ? cpu::best_float_isa() : cpu::best_int8_isa();
      const cpu::ConvNhwc c = to_conv_nhwc(op.conv);
      if (conv && !c.valid()) {
        ET_CHECK_OR_RETURN(op.compute == Compute::kFloat, InvalidProgram,
                           "XnnpackBackend: node %u (%s) has a geometry the int8 kernels refuse", op.node_index,
                           op.name);
        continue;
      }
      const int64_t n = op.conv.group_out, k = op.conv.group_in;
      size_t bytes = 0;
      switch (op.compute) {
        case Compute::kFloat:
          bytes = conv ? cpu::conv2d_nhwc_f32_packed_bytes(c, isa) : cpu::fully_connected_f32_packed_bytes(n, k, isa);
          break;
        case Compute::kQs8:
          bytes = conv ? cpu::conv2d_nhwc_qs8_packed_bytes(c, isa) : cpu::fully_connected_qs8_packed_bytes(n, k, isa);
          break;
        case Compute::kQd8: bytes = cpu::fully_connected_qd8_packed_bytes(n, k, qd8_group(op.filter, k), isa); break;
      }
      if (bytes == 0) {
        ET_CHECK_OR_RETURN(op.compute == Compute::kFloat, InvalidProgram,
                           "XnnpackBackend: node %u (%s): the int8 kernels refuse its shape", op.node_index, op.name);
        continue;
      }
      sizes[i] = align_up(bytes);
      ET_CHECK_OR_RETURN(total <= kMaxPackedBytes - sizes[i], MemoryAllocationFailed,
                         "XnnpackBackend: the packed weights need more than %zu bytes", kMaxPackedBytes);
      total += sizes[i];
    }
    uint8_t* at = nullptr;
    if (total > 0) {
      at = huge_block(total, &plan_.packed_storage);
      ET_CHECK_OR_RETURN(at != nullptr, MemoryAllocationFailed, "XnnpackBackend: out of memory packing weights");
    }
    for (size_t i = 0; i < plan_.ops.size(); ++i) {
      if (sizes[i] == 0) continue;
      Op& op = plan_.ops[i];
      const bool conv = op.kind == OpKind::kConv || op.kind == OpKind::kDepthwiseConv;
      const cpu::Isa isa = op.compute == Compute::kFloat ? cpu::best_float_isa() : cpu::best_int8_isa();
      const cpu::ConvNhwc c = to_conv_nhwc(op.conv);
      const int64_t n = op.conv.group_out, k = op.conv.group_in;
      bool ok = false;
      switch (op.compute) {
        case Compute::kFloat:
          ok = conv ? cpu::conv2d_nhwc_f32_pack(
                          c, op.kind == OpKind::kConv ? cpu::ConvWeights::kOhwi : cpu::ConvWeights::kHwo, op.weights,
                          op.bias, isa, at)
                    : cpu::fully_connected_f32_pack(n, k, op.weights, (op.flags & 1) != 0, op.bias, isa, at);
          break;
        case Compute::kQs8: ET_TRY(pack_qs8(op, c, conv, isa, at, &ok)); break;
        case Compute::kQd8: ET_TRY(pack_qd8(op, isa, at, &ok)); break;
      }
      uint8_t* const mine = at;
      at += sizes[i];
      if (!ok) {
        ET_CHECK_OR_RETURN(op.compute == Compute::kFloat, InvalidProgram,
                           "XnnpackBackend: node %u (%s): the int8 kernels refuse its weights or scales (a scale "
                           "that is not a positive finite number?)",
                           op.node_index, op.name);
        continue;
      }
      release_floats(op.weights);
      release_floats(op.bias);
      op.weights = op.bias = nullptr;
      op.packed = mine;
    }
    return Error::Ok;
  }

  // Input channels sharing one weight scale: the block size of blockwise 4-bit weights, else k.
  int64_t qd8_group(uint32_t f, int64_t k) const {
    return info_[f].quant == ValueInfo::Quant::kBlock ? static_cast<int64_t>(info_[f].block_size) : k;
  }

  // The int32 bias of a QS8 op (copied: the file's bytes may be unaligned), or empty.
  Error int32_bias_values(const Op& op, int64_t n, std::vector<int32_t>* out) {
    if (op.bias_value == kNoValue) return Error::Ok;
    out->resize(static_cast<size_t>(n));
    std::memcpy(out->data(), info_[op.bias_value].raw, static_cast<size_t>(n) * 4);
    return Error::Ok;
  }

  Error pack_qs8(const Op& op, const kernels::cpu::ConvNhwc& c, bool conv, kernels::cpu::Isa isa, void* at, bool* ok) {
    namespace cpu = kernels::cpu;
    const Value& x = plan_.values[op.in[0]];
    const Value& y = plan_.values[op.out];
    const int64_t oc = conv ? c.out_channels() : op.conv.group_out;
    std::vector<float> scales(static_cast<size_t>(oc));
    for (int64_t i = 0; i < oc; ++i) scales[i] = filter_scale(op.filter, i);
    std::vector<int32_t> bias;
    ET_TRY(int32_bias_values(op, oc, &bias));
    cpu::Qs8ConvQuant q;
    q.in_scale = x.scale, q.in_zero_point = x.zero_point;
    q.weight_scales = scales.data();
    q.out_scale = y.scale, q.out_zero_point = y.zero_point;
    const int8_t* w = reinterpret_cast<const int8_t*>(info_[op.filter].raw);
    const int32_t* b = bias.empty() ? nullptr : bias.data();
    *ok = conv ? cpu::conv2d_nhwc_qs8_pack(
                     c, op.kind == OpKind::kConv ? cpu::ConvWeights::kOhwi : cpu::ConvWeights::kHwo, w, b, q, isa, at)
               : cpu::fully_connected_qs8_pack(op.conv.group_out, op.conv.group_in, w, (op.flags & 1) != 0, b, q, isa,
                                               at);
    return Error::Ok;
  }

  Error pack_qd8(const Op& op, kernels::cpu::Isa isa, void* at, bool* ok) {
    namespace cpu = kernels::cpu;
    const int64_t n = op.conv.group_out, k = op.conv.group_in;
    const ValueInfo& w = info_[op.filter];
    std::vector<float> bias;
    if (op.bias_value != kNoValue) {
      bias.resize(static_cast<size_t>(n));
      std::memcpy(bias.data(), info_[op.bias_value].raw, static_cast<size_t>(n) * 4);
    }
    const float* b = bias.empty() ? nullptr : bias.data();
    if (w.datatype == fb::XNNDatatype::xnn_datatype_qcint8 || w.datatype == fb::XNNDatatype::xnn_datatype_qcint4) {
      std::vector<float> scales(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) scales[i] = filter_scale(op.filter, i);
      *ok = w.datatype == fb::XNNDatatype::xnn_datatype_qcint8
                ? cpu::fully_connected_qd8_pack_qc8w(n, k, reinterpret_cast<const int8_t*>(w.raw), scales.data(), b,
                                                     isa, at)
                : cpu::fully_connected_qd8_pack_qb4w(n, k, k, w.raw, 8, scales.data(), false, b, isa, at);
      return Error::Ok;
    }
    // Blockwise: scales as the file gives them (bfloat16, or float in the legacy inline list).
    const size_t count = w.num_scales, elem = w.block_scales_f32 ? 4 : 2;
    std::vector<uint8_t> scales(count * elem);
    std::memcpy(scales.data(), w.block_scales, scales.size());
    *ok = cpu::fully_connected_qd8_pack_qb4w(n, k, w.block_size, w.raw, 8, scales.data(), !w.block_scales_f32, b, isa,
                                             at);
    return Error::Ok;
  }

  void release_floats(const float* p) {
    if (p == nullptr) return;
    for (auto& f : plan_.owned_floats) {
      if (f.get() == p) f.reset();
    }
  }

  // Runs shape inference on the upper-bound shapes: every node's shapes are checked here, at init,
  // and scratch is sized for the largest call.
  Error dry_run() {
    size_t scratch = 0;
    for (Op& op : plan_.ops) {
      ET_TRY(infer_shape(op, plan_));
      size_t need = 0;
      ET_TRY(scratch_bytes(op, plan_, &need));
      scratch = std::max(scratch, align_up(need));
    }
    plan_.scratch_bytes = scratch;
    return Error::Ok;
  }

  // Bytes to add to `offset` (a multiple of kAlign) so that slot `index` starts 5 cache lines
  // further into a 4 KiB page than slot index - 1 (modulo the page). Activation sizes are often
  // multiples of 4 KiB; with every slot at the same page offset, an op's input and output streams
  // move through the same low address bits together: MobileNetV2's 16 -> 96 pointwise layer took
  // 0.49 ms in the model against 0.42 alone, and takes 0.44 with these offsets (with slots 1 KiB
  // or 256 bytes apart, still 0.49-0.51; 3 or 5 lines apart, 0.41-0.44).
  static size_t slot_offset_pad(size_t offset, size_t index) {
    const size_t want = index * 320 % 4096, at = offset % 4096;
    return (want + 4096 - at) % 4096;
  }

  // Internal values share one arena: a value's slot is free again after its last reader.
  Error plan_memory() {
    const size_t nv = plan_.values.size();
    std::vector<int64_t> first(nv, -1), last(nv, -1);
    for (size_t k = 0; k < plan_.ops.size(); ++k) {
      const Op& op = plan_.ops[k];
      if (first[op.out] < 0) first[op.out] = static_cast<int64_t>(k);
      last[op.out] = std::max<int64_t>(last[op.out], static_cast<int64_t>(k));
      // A depthwise convolution run with the pointwise one after it reads its input until the
      // pair is done: the pointwise output must not take that slot.
      const int64_t reads_until = static_cast<int64_t>(op.fuse_next ? k + 1 : k);
      for (int i = 0; i < op.n_in; ++i) last[op.in[i]] = std::max(last[op.in[i]], reads_until);
    }
    // The output of a depthwise convolution run with the pointwise one after it is never stored.
    std::vector<bool> unstored(nv, false);
    for (const Op& op : plan_.ops) {
      if (op.fuse_next) unstored[op.out] = true;
    }
    struct Slot {
      size_t offset, size;
      int64_t free_after;
    };
    std::vector<Slot> slots;
    size_t total = 0;
    for (size_t k = 0; k < plan_.ops.size(); ++k) {
      const uint32_t vi = plan_.ops[k].out;
      Value& v = plan_.values[vi];
      if (first[vi] != static_cast<int64_t>(k)) continue;
      size_t bytes = align_up(static_cast<size_t>(v.max_numel()) * dtype_size(v.dtype));
      if (v.dtype == DType::kQD8) bytes += align_up(static_cast<size_t>(qd8_rows_max(v)) * 8);
      v.max_bytes = bytes;
      if (v.is_output || unstored[vi]) continue;
      // Best fit among free slots; a new slot at the end otherwise.
      Slot* best = nullptr;
      for (Slot& s : slots) {
        if (s.free_after < static_cast<int64_t>(k) && s.size >= bytes && (!best || s.size < best->size)) best = &s;
      }
      if (best == nullptr) {
        total += slot_offset_pad(total, slots.size());
        slots.push_back(Slot{total, bytes, -1});
        total += bytes;
        best = &slots.back();
      }
      best->free_after = last[vi] < 0 ? static_cast<int64_t>(k) : last[vi];
      v.arena_offset = static_cast<int64_t>(best->offset);
    }
    // QD8 outputs of the graph (never seen) would need row parameters too.
    for (size_t i = 0; i < nv; ++i) {
      ET_CHECK_OR_RETURN(!(plan_.values[i].is_output && plan_.values[i].dtype == DType::kQD8), NotImplemented,
                         "XnnpackBackend: value %u is a dynamically quantized graph output", info_[i].id);
    }
    plan_.arena_bytes = total;
    const size_t all = total + plan_.scratch_bytes + kAlign;
    ET_CHECK_OR_RETURN(total <= kMaxArenaBytes && plan_.scratch_bytes <= kMaxArenaBytes && all <= kMaxArenaBytes,
                       MemoryAllocationFailed,
                       "XnnpackBackend: the graph's activations and scratch need %zu + %zu bytes at their upper-bound "
                       "shapes, more than the %zu this backend allocates; export with smaller shape bounds",
                       total, plan_.scratch_bytes, kMaxArenaBytes);
    uint8_t* base = huge_block(all, &plan_.arena_storage);
    ET_CHECK_OR_RETURN(base != nullptr, MemoryAllocationFailed,
                       "XnnpackBackend: out of memory for %zu bytes of activations", all);
    plan_.arena = base;
    plan_.scratch = base + total;
    for (Value& v : plan_.values) {
      if (v.arena_offset < 0) continue;
      v.data = plan_.arena + v.arena_offset;
      if (v.dtype == DType::kQD8) {
        const size_t payload = align_up(static_cast<size_t>(v.max_numel()));
        v.row_scale = reinterpret_cast<float*>(plan_.arena + v.arena_offset + payload);
        v.row_zero_point = reinterpret_cast<int32_t*>(v.row_scale + qd8_rows_max(v));
      }
    }
    return Error::Ok;
  }

  const Payload& payload_;
  const NamedDataMap* named_;
  Plan& plan_;
  const fb::XNNGraph* graph_ = nullptr;
  std::vector<ValueInfo> info_;
  std::unordered_map<uint32_t, uint32_t> ids_;
  std::unordered_set<uint32_t> used_loose_, written_;
  std::vector<FreeableBuffer> buffers_;
  // Nodes of each kind so far, for the event names (backends/xnnpack/serialization/event_names.py).
  std::array<uint32_t, static_cast<size_t>(fb::XNodeUnion::MAX) + 1> kind_counts_{};
};

}  // namespace

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32: return 4;
    default: return 1;
  }
}

Error compile(const Payload& payload, const NamedDataMap* named_data, Plan* plan) {
  Compiler c(payload, named_data, plan);
  return c.run();
}

void BlockFree::operator()(uint8_t* p) const {
#if defined(__linux__)
  if (mapped != 0) {
    munmap(p, mapped);
    return;
  }
#endif
  delete[] p;
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
