// Fused scaled dot-product attention on float32: q.k^T, softmax and .v in one pass per query row.
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {

// Query [batch, heads, q_len, dim] against keys/values [batch, kv_heads, kv_len, dim]; heads is a
// multiple of kv_heads (grouped-query attention: head h reads kv head h / (heads / kv_heads)).
// Each *_strides holds element strides for batch, head and position; the last dim is contiguous.
struct AttentionShape {
  int64_t batch, heads, kv_heads, q_len, kv_len, dim;
  int64_t q_strides[3], k_strides[3], v_strides[3], out_strides[3];
  float scale;
  // Causal: query i sees keys j <= i + causal_offset (the offset is a KV cache's start position).
  bool causal;
  int64_t causal_offset;
  // Additive float mask, or null: element (i, j) at mask[i * mask_row_stride + j].
  const float* mask;
  int64_t mask_row_stride;
};

// Floats of scratch attention() needs.
size_t attention_scratch_floats(const AttentionShape& a);

// out = softmax(q k^T * scale + mask) v, keys taken in blocks with a running max and sum (online
// softmax; output rows hold the running sums), so no row of scores is held whole. A query that
// sees no key, or only -inf scores, gets zeros. `out` must not overlap q, k or v. Work splits over batch * heads with parallel_for; each (batch, head) is
// computed whole by one chunk with its own slice of `scratch`.
void attention(const AttentionShape& a, const float* q, const float* k, const float* v, float* out, float* scratch);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
