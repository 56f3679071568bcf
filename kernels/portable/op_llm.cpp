// LLM custom ops: llama::custom_sdpa.out (fused attention over a KV cache), llama::update_cache.out and
// llama::update_cache_with_indices.out.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/half.h"
#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

bool float_like(ScalarType t) { return t == ScalarType::Float || is_half(t); }

// Shapes of one attention call, from query [B, S, H, D] and caches [B, L_max, Hkv, D].
struct Attn {
  int64_t batch, seq, heads, dim, cache_len, kv_heads, start, length;
  float scale;
  bool causal;
};

// One pass per query row: scores over the visible positions into `scores` (float32 scratch),
// a max-shifted softmax, then the weighted sum of value rows accumulated in float32 `acc`.
template <typename T>
void attend(const Attn& a, const T* q, const T* k, const T* v, const void* mask, cpu::Elem mask_elem,
            int64_t mask_stride, T* out, float* scores, float* acc) {
  const int64_t groups = a.heads / a.kv_heads;
  const int64_t q_row = a.heads * a.dim, kv_row = a.kv_heads * a.dim;
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t h = 0; h < a.heads; ++h) {
      const int64_t g = h / groups;
      const T* kb = k + b * a.cache_len * kv_row + g * a.dim;
      const T* vb = v + b * a.cache_len * kv_row + g * a.dim;
      for (int64_t i = 0; i < a.seq; ++i) {
        const T* qi = q + (b * a.seq + i) * q_row + h * a.dim;
        const int64_t visible = a.causal ? a.start + i + 1 : a.length;
        float mx = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          const T* kj = kb + j * kv_row;
          float dot = 0.f;
          for (int64_t d = 0; d < a.dim; ++d) dot += cpu::to_float(qi[d]) * cpu::to_float(kj[d]);
          float s = dot * a.scale;
          if (mask != nullptr) s += cpu::load_elem(mask, mask_elem, i * mask_stride + j);
          scores[j] = s;
          mx = s > mx ? s : mx;
        }
        // Every score -inf (a fully masked row): weights of zero, as a NaN-free result.
        const float shift = std::isinf(mx) ? 0.f : mx;
        float sum = 0.f;
        for (int64_t j = 0; j < visible; ++j) {
          scores[j] = std::exp(scores[j] - shift);
          sum += scores[j];
        }
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        for (int64_t d = 0; d < a.dim; ++d) acc[d] = 0.f;
        for (int64_t j = 0; j < visible; ++j) {
          const T* vj = vb + j * kv_row;
          const float w = scores[j] * inv;
          for (int64_t d = 0; d < a.dim; ++d) acc[d] += w * cpu::to_float(vj[d]);
        }
        T* oi = out + (b * a.seq + i) * q_row + h * a.dim;
        for (int64_t d = 0; d < a.dim; ++d) {
          if constexpr (std::is_same_v<T, float>)
            oi[d] = acc[d];
          else if constexpr (std::is_same_v<T, cpu::Half>)
            oi[d] = cpu::to_half(acc[d]);
          else
            oi[d] = cpu::to_bfloat16(acc[d]);
        }
      }
    }
  }
}

bool dense4(const Tensor& t) { return t.dim() == 4 && t.is_contiguous(); }

// custom_sdpa.out(query, key, value, SymInt start_pos, Tensor? attn_mask, float drpout_p,
//                 bool is_causal, float? scale, *, out)
void custom_sdpa_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor, Tag::Int, Tag::None, Tag::Double, Tag::Bool,
                                 Tag::None, Tag::Tensor}),
                  InvalidArgument);
  const Tensor q = args[0]->toTensor(), k = args[1]->toTensor(), v = args[2]->toTensor();
  const Tensor out = args[8]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, dense4(q) && dense4(k) && dense4(v), InvalidArgument, ,
                      "custom_sdpa: query, key and value must be contiguous 4-D [batch, seq, heads, head_dim]");
  const ScalarType t = q.scalar_type();
  ET_KERNEL_CHECK_MSG(ctx, float_like(t) && k.scalar_type() == t && v.scalar_type() == t && out.scalar_type() == t,
                      InvalidType, , "custom_sdpa: query, key, value and out must share one float dtype");
  Attn a{};
  a.batch = q.size(0), a.seq = q.size(1), a.heads = q.size(2), a.dim = q.size(3);
  a.cache_len = k.size(1), a.kv_heads = k.size(2);
  ET_KERNEL_CHECK_MSG(
      ctx,
      k.size(0) == a.batch && k.size(3) == a.dim && same_shape(k, v) && a.kv_heads > 0 && a.heads % a.kv_heads == 0,
      InvalidArgument, , "custom_sdpa: key/value caches do not match the query (batch, heads, head_dim)");
  a.start = args[3]->toInt();
  ET_KERNEL_CHECK_MSG(ctx, a.start >= 0 && a.start <= a.cache_len - a.seq, InvalidArgument, ,
                      "custom_sdpa: start_pos %lld + %lld positions run past the cache of %lld",
                      static_cast<long long>(a.start), static_cast<long long>(a.seq),
                      static_cast<long long>(a.cache_len));
  a.length = a.start + a.seq;
  ET_KERNEL_CHECK_MSG(ctx, args[5]->toDouble() == 0.0, InvalidArgument, ,
                      "custom_sdpa: drpout_p must be 0 (inference only)");
  a.causal = args[6]->toBool();
  const EValue& mask_arg = *args[4];
  ET_KERNEL_CHECK_MSG(ctx, mask_arg.isNone() || (mask_arg.isTensor() && !a.causal), InvalidArgument, ,
                      "custom_sdpa: attn_mask and is_causal cannot both be set");
  const void* mask = nullptr;
  int64_t mask_stride = 0;
  cpu::Elem mask_elem = cpu::Elem::kF32;
  if (mask_arg.isTensor()) {
    const Tensor m = mask_arg.toTensor();
    ET_KERNEL_CHECK_MSG(
        ctx,
        m.dim() == 2 && m.is_contiguous() && float_like(m.scalar_type()) && m.size(0) == a.seq && m.size(1) >= a.length,
        InvalidArgument, , "custom_sdpa: attn_mask must be a float [seq, >= start_pos + seq] tensor");
    mask = m.const_data_ptr();
    mask_stride = m.size(1);
    mask_elem = elem_of(m.scalar_type());
  }
  const EValue& scale_arg = *args[7];
  ET_KERNEL_CHECK(ctx, scale_arg.isNone() || scale_arg.isDouble(), InvalidArgument);
  a.scale = scale_arg.isDouble() ? static_cast<float>(scale_arg.toDouble())
                                 : 1.f / std::sqrt(static_cast<float>(a.dim > 0 ? a.dim : 1));
  if (!resize_out(ctx, out, q)) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "custom_sdpa: output must be contiguous");
  if (t == ScalarType::Float && (mask == nullptr || mask_elem == cpu::Elem::kF32)) {
    // float32: the fused kernel, parallel over batch * heads, on [B, S, H, D] through strides.
    cpu::AttentionShape s{};
    s.batch = a.batch, s.heads = a.heads, s.kv_heads = a.kv_heads, s.q_len = a.seq, s.kv_len = a.length;
    s.dim = a.dim;
    const int64_t q_row = a.heads * a.dim, kv_row = a.kv_heads * a.dim;
    const int64_t qs[3] = {a.seq * q_row, a.dim, q_row}, kvs[3] = {a.cache_len * kv_row, a.dim, kv_row};
    for (int i = 0; i < 3; ++i) {
      s.q_strides[i] = s.out_strides[i] = qs[i];
      s.k_strides[i] = s.v_strides[i] = kvs[i];
    }
    s.scale = a.scale, s.causal = a.causal, s.causal_offset = a.start;
    s.mask = static_cast<const float*>(mask), s.mask_row_stride = mask_stride;
    auto scratch = ctx.allocate_temp(cpu::attention_scratch_floats(s) * sizeof(float), 64);
    ET_KERNEL_CHECK_MSG(ctx, scratch.ok(), MemoryAllocationFailed, , "custom_sdpa: no temp memory for attention");
    cpu::attention(s, q.const_data_ptr<float>(), k.const_data_ptr<float>(), v.const_data_ptr<float>(),
                   out.mutable_data_ptr<float>(), static_cast<float*>(*scratch));
    return;
  }
  auto mem = ctx.allocate_temp(static_cast<size_t>(a.length + a.dim + 1) * sizeof(float), 64);
  ET_KERNEL_CHECK_MSG(ctx, mem.ok(), MemoryAllocationFailed, , "custom_sdpa: no temp memory for a row of scores");
  float* scores = static_cast<float*>(*mem);
  float* acc = scores + a.length;
  switch (t) {
    case ScalarType::Half:
      attend(a, q.const_data_ptr<cpu::Half>(), k.const_data_ptr<cpu::Half>(), v.const_data_ptr<cpu::Half>(), mask,
             mask_elem, mask_stride, out.mutable_data_ptr<cpu::Half>(), scores, acc);
      break;
    case ScalarType::BFloat16:
      attend(a, q.const_data_ptr<cpu::BFloat16>(), k.const_data_ptr<cpu::BFloat16>(), v.const_data_ptr<cpu::BFloat16>(),
             mask, mask_elem, mask_stride, out.mutable_data_ptr<cpu::BFloat16>(), scores, acc);
      break;
    default:
      attend(a, q.const_data_ptr<float>(), k.const_data_ptr<float>(), v.const_data_ptr<float>(), mask, mask_elem,
             mask_stride, out.mutable_data_ptr<float>(), scores, acc);
      break;
  }
}

// update_cache.out(value, Tensor(a!) cache, SymInt start_pos, *, out): value [B, S, H, D] into
// cache[:, start_pos:start_pos + S]; `out` is a placeholder the op leaves alone.
void update_cache_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor value = args[0]->toTensor(), cache = args[1]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, dense4(value) && dense4(cache), InvalidArgument, ,
                      "update_cache: value and cache must be contiguous 4-D [batch, seq, heads, head_dim]");
  ET_KERNEL_CHECK_MSG(ctx, value.scalar_type() == cache.scalar_type(), InvalidType, ,
                      "update_cache: value and cache dtypes differ");
  ET_KERNEL_CHECK_MSG(
      ctx, value.size(0) == cache.size(0) && value.size(2) == cache.size(2) && value.size(3) == cache.size(3),
      InvalidArgument, , "update_cache: value does not fit the cache in batch, heads or head_dim");
  const int64_t start = args[2]->toInt(), seq = value.size(1), len = cache.size(1);
  ET_KERNEL_CHECK_MSG(ctx, start >= 0 && start <= len - seq, InvalidArgument, ,
                      "update_cache: start_pos %lld + %lld positions run past the cache of %lld",
                      static_cast<long long>(start), static_cast<long long>(seq), static_cast<long long>(len));
  const size_t row = static_cast<size_t>(value.size(2) * value.size(3)) * value.element_size();
  const char* src = static_cast<const char*>(value.const_data_ptr());
  char* dst = static_cast<char*>(cache.mutable_data_ptr());
  for (int64_t b = 0; b < value.size(0); ++b)
    std::memmove(dst + (b * len + start) * static_cast<int64_t>(row), src + b * seq * static_cast<int64_t>(row),
                 static_cast<size_t>(seq) * row);
}

// update_cache_with_indices.out(value, Tensor(a!) cache, SymInt start_pos, Tensor indices, *, out): value[b, s]
// into cache[b, indices[b, s]] (a ring buffer's slots); where indices repeat, the later position wins.
void update_cache_with_indices_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Int, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor value = args[0]->toTensor(), cache = args[1]->toTensor(), indices = args[3]->toTensor();
  ET_KERNEL_CHECK_MSG(
      ctx, dense4(value) && dense4(cache), InvalidArgument, ,
      "update_cache_with_indices: value and cache must be contiguous 4-D [batch, seq, heads, head_dim]");
  ET_KERNEL_CHECK_MSG(ctx, value.scalar_type() == cache.scalar_type(), InvalidType, ,
                      "update_cache_with_indices: value and cache dtypes differ");
  ET_KERNEL_CHECK_MSG(
      ctx, value.size(0) == cache.size(0) && value.size(2) == cache.size(2) && value.size(3) == cache.size(3),
      InvalidArgument, , "update_cache_with_indices: value does not fit the cache in batch, heads or head_dim");
  ET_KERNEL_CHECK_MSG(ctx,
                      indices.scalar_type() == ScalarType::Long && indices.dim() == 2 && indices.is_contiguous() &&
                          indices.size(0) == value.size(0) && indices.size(1) == value.size(1),
                      InvalidArgument, , "update_cache_with_indices: indices must be int64 [batch, seq] like value");
  const int64_t seq = value.size(1), len = cache.size(1);
  const int64_t* slots = indices.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < indices.numel(); ++i)
    ET_KERNEL_CHECK_MSG(ctx, slots[i] >= 0 && slots[i] < len, InvalidArgument, ,
                        "update_cache_with_indices: index %lld is outside the cache's %lld positions",
                        static_cast<long long>(slots[i]), static_cast<long long>(len));
  const size_t row = static_cast<size_t>(value.size(2) * value.size(3)) * value.element_size();
  const char* src = static_cast<const char*>(value.const_data_ptr());
  char* dst = static_cast<char*>(cache.mutable_data_ptr());
  for (int64_t b = 0; b < value.size(0); ++b)
    for (int64_t s = 0; s < seq; ++s)
      std::memmove(dst + (b * len + slots[b * seq + s]) * static_cast<int64_t>(row),
                   src + (b * seq + s) * static_cast<int64_t>(row), row);
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_llm.inc"

}  // namespace kernels
}  // namespace executorch
