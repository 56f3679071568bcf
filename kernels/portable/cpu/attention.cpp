// Fused float32 attention: blocked scores, online softmax and the weighted sum of values.
#include "kernels/portable/cpu/attention.h"

#include <cmath>

#include "kernels/portable/cpu/parallel.h"
#include "kernels/portable/cpu/vectorize.h"
#include "kernels/portable/cpu/vmath.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

// Keys per block: their scores stay in registers/L1 between the softmax and the value pass.
constexpr int64_t kKeyBlock = 64;
// Partial sums per lane let the dot products vectorise with a fixed summation order.
constexpr int64_t kLanes = 8;

ET_ALWAYS_INLINE float dot(const float* a, const float* b, int64_t n) {
  float s[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) s[j] += a[d + j] * b[d + j];
  float t = 0;
  for (int64_t j = 0; j < kLanes; ++j) t += s[j];
  for (; d < n; ++d) t += a[d] * b[d];
  return t;
}

// One query row against the keys [0, visible): acc (dim floats) and scores (kKeyBlock floats)
// are scratch.
ET_MULTIVERSION void attend_row(const AttentionShape& a, const float* qi, const float* kb, const float* vb,
                                const float* mask_row, int64_t visible, float* oi, float* acc, float* scores) {
  const int64_t dim = a.dim, ks = a.k_strides[2], vs = a.v_strides[2];
  for (int64_t d = 0; d < dim; ++d) acc[d] = 0.f;
  float mx = -INFINITY, sum = 0.f;
  for (int64_t j0 = 0; j0 < visible; j0 += kKeyBlock) {
    const int64_t n = visible - j0 < kKeyBlock ? visible - j0 : kKeyBlock;
    float bmax = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      float s = dot(qi, kb + (j0 + j) * ks, dim) * a.scale;
      if (mask_row) s += mask_row[j0 + j];
      scores[j] = s;
      bmax = s > bmax ? s : bmax;
    }
    if (bmax == -INFINITY) continue;  // nothing visible in this block
    const float next = bmax > mx ? bmax : mx;
    // Rescale what earlier blocks accumulated to the new running max.
    const float carry = mx == -INFINITY ? 0.f : vexp(mx - next);
    if (carry != 1.f) {
      sum *= carry;
      for (int64_t d = 0; d < dim; ++d) acc[d] *= carry;
    }
    mx = next;
    for (int64_t j = 0; j < n; ++j) scores[j] = vexp(scores[j] - mx);
    for (int64_t j = 0; j < n; ++j) {
      const float p = scores[j];
      sum += p;
      const float* vj = vb + (j0 + j) * vs;
      for (int64_t d = 0; d < dim; ++d) acc[d] += p * vj[d];
    }
  }
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  for (int64_t d = 0; d < dim; ++d) oi[d] = acc[d] * inv;
}

int64_t per_head_scratch(const AttentionShape& a) { return a.dim + kKeyBlock; }

}  // namespace

size_t attention_scratch_floats(const AttentionShape& a) {
  return static_cast<size_t>(a.batch * a.heads * per_head_scratch(a));
}

void attention(const AttentionShape& a, const float* q, const float* k, const float* v, float* out,
               float* scratch) {
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0) return;
  const int64_t groups = a.heads / a.kv_heads;
  parallel_for(0, a.batch * a.heads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / a.heads, h = bh % a.heads, g = h / groups;
      float* acc = scratch + bh * per_head_scratch(a);
      float* scores = acc + a.dim;
      const float* qb = q + b * a.q_strides[0] + h * a.q_strides[1];
      const float* kb = k + b * a.k_strides[0] + g * a.k_strides[1];
      const float* vb = v + b * a.v_strides[0] + g * a.v_strides[1];
      float* ob = out + b * a.out_strides[0] + h * a.out_strides[1];
      for (int64_t i = 0; i < a.q_len; ++i) {
        int64_t visible = a.kv_len;
        if (a.causal) {
          const int64_t last = i + a.causal_offset + 1;
          visible = last < 0 ? 0 : (last < a.kv_len ? last : a.kv_len);
        }
        attend_row(a, qb + i * a.q_strides[2], kb, vb, a.mask ? a.mask + i * a.mask_row_stride : nullptr,
                   visible, ob + i * a.out_strides[2], acc, scores);
      }
    }
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
