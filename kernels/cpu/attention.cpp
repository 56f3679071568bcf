// Fused float32 attention: blocked scores, online softmax and the weighted sum of values.
#include "kernels/cpu/attention.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/cpu/vmath.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

// Keys per block: the block's keys are transposed once into scratch, so every query row's scores
// for it are a unit-stride multiply-add over keys (no horizontal sums), reused by all rows.
constexpr int64_t kKeyBlock = 64;

int64_t per_head_scratch(const AttentionShape& a) { return a.dim * kKeyBlock + kKeyBlock + 2 * a.q_len; }

int64_t visible_keys(const AttentionShape& a, int64_t i) {
  if (!a.causal) return a.kv_len;
  const int64_t last = i + a.causal_offset + 1;
  return last < 0 ? 0 : (last < a.kv_len ? last : a.kv_len);
}

// One (batch, head): output rows double as the running accumulators of the online softmax.
ET_MULTIVERSION void attend_head(const AttentionShape& a, const float* qb, const float* kb, const float* vb, float* ob,
                                 float* scratch) {
  const int64_t dim = a.dim, ks = a.k_strides[2], vs = a.v_strides[2];
  const int64_t qs = a.q_strides[2], os = a.out_strides[2];
  float* kt = scratch;
  float* scores = kt + dim * kKeyBlock;
  float* mx = scores + kKeyBlock;
  float* sum = mx + a.q_len;
  for (int64_t i = 0; i < a.q_len; ++i) {
    mx[i] = -INFINITY;
    sum[i] = 0.f;
    for (int64_t d = 0; d < dim; ++d) ob[i * os + d] = 0.f;
  }
  for (int64_t j0 = 0; j0 < a.kv_len; j0 += kKeyBlock) {
    const int64_t n = a.kv_len - j0 < kKeyBlock ? a.kv_len - j0 : kKeyBlock;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t d = 0; d < dim; ++d) kt[d * kKeyBlock + j] = kb[(j0 + j) * ks + d];
    for (int64_t i = 0; i < a.q_len; ++i) {
      const int64_t nv = visible_keys(a, i) - j0 < n ? visible_keys(a, i) - j0 : n;
      if (nv <= 0) continue;
      const float* qi = qb + i * qs;
      // Four dims per pass over the scores: a quarter of the loads and stores of `scores`.
      for (int64_t j = 0; j < nv; ++j) scores[j] = 0.f;
      int64_t d = 0;
      for (; d + 4 <= dim; d += 4) {
        const float q0 = qi[d], q1 = qi[d + 1], q2 = qi[d + 2], q3 = qi[d + 3];
        const float* k0 = kt + d * kKeyBlock;
        const float *k1 = k0 + kKeyBlock, *k2 = k1 + kKeyBlock, *k3 = k2 + kKeyBlock;
        for (int64_t j = 0; j < nv; ++j) scores[j] += q0 * k0[j] + q1 * k1[j] + q2 * k2[j] + q3 * k3[j];
      }
      for (; d < dim; ++d) {
        const float qd = qi[d];
        const float* kd = kt + d * kKeyBlock;
        for (int64_t j = 0; j < nv; ++j) scores[j] += qd * kd[j];
      }
      const float* mask_row = a.mask ? a.mask + i * a.mask_row_stride + j0 : nullptr;
      float bmax = -INFINITY;
      for (int64_t j = 0; j < nv; ++j) {
        float sc = scores[j] * a.scale;
        if (mask_row) sc += mask_row[j];
        scores[j] = sc;
        bmax = sc > bmax ? sc : bmax;
      }
      if (bmax == -INFINITY) continue;  // every visible key of this block masked out
      float* acc = ob + i * os;
      const float next = bmax > mx[i] ? bmax : mx[i];
      // Rescale what earlier blocks accumulated to the new running max.
      const float carry = mx[i] == -INFINITY ? 0.f : vexp(mx[i] - next);
      if (carry != 1.f) {
        sum[i] *= carry;
        for (int64_t d = 0; d < dim; ++d) acc[d] *= carry;
      }
      mx[i] = next;
      float block_sum = 0.f;
      for (int64_t j = 0; j < nv; ++j) {
        scores[j] = vexp(scores[j] - next);
        block_sum += scores[j];
      }
      sum[i] += block_sum;
      // Four keys per pass over the accumulator row, for the same reason.
      int64_t j = 0;
      for (; j + 4 <= nv; j += 4) {
        const float p0 = scores[j], p1 = scores[j + 1], p2 = scores[j + 2], p3 = scores[j + 3];
        const float* v0 = vb + (j0 + j) * vs;
        const float *v1 = v0 + vs, *v2 = v1 + vs, *v3 = v2 + vs;
        for (int64_t e = 0; e < dim; ++e) acc[e] += p0 * v0[e] + p1 * v1[e] + p2 * v2[e] + p3 * v3[e];
      }
      for (; j < nv; ++j) {
        const float p = scores[j];
        const float* vj = vb + (j0 + j) * vs;
        for (int64_t e = 0; e < dim; ++e) acc[e] += p * vj[e];
      }
    }
  }
  for (int64_t i = 0; i < a.q_len; ++i) {
    const float inv = sum[i] > 0.f ? 1.f / sum[i] : 0.f;
    for (int64_t d = 0; d < dim; ++d) ob[i * os + d] *= inv;
  }
}

}  // namespace

size_t attention_scratch_floats(const AttentionShape& a) {
  return static_cast<size_t>(a.batch * a.heads * per_head_scratch(a));
}

void attention(const AttentionShape& a, const float* q, const float* k, const float* v, float* out, float* scratch) {
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0) return;
  const int64_t groups = a.heads / a.kv_heads;
  parallel_for(0, a.batch * a.heads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / a.heads, h = bh % a.heads, g = h / groups;
      attend_head(a, q + b * a.q_strides[0] + h * a.q_strides[1], k + b * a.k_strides[0] + g * a.k_strides[1],
                  v + b * a.v_strides[0] + g * a.v_strides[1], out + b * a.out_strides[0] + h * a.out_strides[1],
                  scratch + bh * per_head_scratch(a));
    }
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
