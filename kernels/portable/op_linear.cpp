// Matrix products on float32, float16 and bfloat16 (float32 accumulation): mm, bmm, addmm, linear;
// and the pairwise p-norm distances between rows, cdist and pdist (float32, 16-bit floats widened).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/parallel.h"
#include "kernels/portable/util/copy.h"
#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/util/kernel_util.h"
#include "kernels/portable/util/widen.h"
#include "kernels/portable/load_passes.h"

namespace executorch {
namespace kernels {
namespace {

// Scratch for one m x n x k product: A widened to float32 when a few rows go through gemv (B
// read in place, never packed), else sgemm's packing buffers; null when temp memory is short
// (sgemm then runs unpacked).
float* gemm_workspace(KernelRuntimeContext& ctx, int64_t m, int64_t n, int64_t k, cpu::ConstMatrix b) {
  const size_t floats = cpu::gemv_supports(m, b) ? static_cast<size_t>(m * k) : cpu::sgemm_workspace_floats(m, n, k);
  auto mem = ctx.allocate_temp(floats * sizeof(float), 64);
  return mem.ok() ? static_cast<float*>(*mem) : nullptr;
}

// C (row-major, row stride n) = alpha * A @ B + beta * C. `gemv` is the choice gemm_workspace()
// made for the whole product: a row chunk of it takes the same path, so `ws` fits.
void product(bool gemv, int64_t m, int64_t n, int64_t k, float alpha, cpu::ConstMatrix a, cpu::ConstMatrix b,
             float beta, float* c, float* ws) {
  if (gemv && ws != nullptr) return cpu::gemv(m, n, k, alpha, a, b, beta, c, n, ws);
  cpu::sgemm(m, n, k, alpha, a, b, beta, nullptr, c, n, gemv ? nullptr : ws);
}

// The last two dims of `t` as a matrix (strides honour any dim order), batch `b` in.
cpu::ConstMatrix matrix_of(const Tensor& t, int64_t b) {
  const int64_t d = t.dim();
  const char* base = static_cast<const char*>(t.const_data_ptr()) +
                     (d == 3 ? b * t.stride(0) * static_cast<int64_t>(t.element_size()) : 0);
  return {base, t.stride(d - 2), t.stride(d - 1), elem_of(t.scalar_type())};
}

// Float32, or Half/BFloat16 (widened while packing, accumulated in float32), all one dtype.
bool same_float_type(const Tensor& a, const Tensor& b, const Tensor& c) {
  const ScalarType t = a.scalar_type();
  return (t == ScalarType::Float || is_half(t)) && b.scalar_type() == t && c.scalar_type() == t;
}

// Float32 rows a 16-bit output is computed into before narrowing, at most this many at once.
constexpr int64_t kChunkFloats = int64_t(1) << 20;
// Floats per chunk of the bias fill: enough that a chunk outweighs handing it out.
constexpr int64_t kFillGrain = int64_t(1) << 15;

// out[at : at + count] (16-bit elements of type `oe`) = c[0 : count], rounded to nearest even.
void narrow(const float* c, int64_t count, cpu::Elem oe, void* out, int64_t at) {
  cpu::parallel_for(0, count, int64_t(1) << 15, [&](int64_t lo, int64_t hi) {
    if (oe == cpu::Elem::kF16) {
      cpu::Half* o = static_cast<cpu::Half*>(out) + at;
      for (int64_t i = lo; i < hi; ++i) o[i] = cpu::to_half(c[i]);
    } else {
      cpu::BFloat16* o = static_cast<cpu::BFloat16*>(out) + at;
      for (int64_t i = lo; i < hi; ++i) o[i] = cpu::to_bfloat16(c[i]);
    }
  });
}

// out[m, n] (row-major) = alpha * A @ B + (beta != 0: out's current float contents, pre-scaled).
// A float32 `out` is written in place; a 16-bit one goes through float rows in temp memory,
// `init(row0, rows, c)` filling them first when beta is nonzero.
template <typename Init>
void gemm_into(KernelRuntimeContext& ctx, int64_t m, int64_t n, int64_t k, float alpha, cpu::ConstMatrix a,
               cpu::ConstMatrix b, bool accumulate, void* out, ScalarType ot, float* ws, Init init) {
  const bool gemv = cpu::gemv_supports(m, b);
  if (ot == ScalarType::Float) {
    float* o = static_cast<float*>(out);
    if (accumulate) init(0, m, o);
    product(gemv, m, n, k, alpha, a, b, accumulate ? 1.f : 0.f, o, ws);
    return;
  }
  const int64_t rows = n > 0 ? std::max<int64_t>(1, std::min<int64_t>(m, kChunkFloats / n)) : m;
  auto mem = ctx.allocate_temp(static_cast<size_t>(rows * n) * sizeof(float), 64);
  ET_KERNEL_CHECK_MSG(ctx, mem.ok(), MemoryAllocationFailed, ,
                      "matmul: no temp memory for %lld float32 rows of the 16-bit result",
                      static_cast<long long>(rows));
  float* c = static_cast<float*>(*mem);
  const cpu::Elem oe = elem_of(ot);
  for (int64_t r0 = 0; r0 < m; r0 += rows) {
    const int64_t mr = std::min(rows, m - r0);
    if (accumulate) init(r0, mr, c);
    cpu::ConstMatrix ar = a;
    ar.data =
        static_cast<const char*>(a.data) + r0 * a.row_stride * static_cast<int64_t>(a.elem == cpu::Elem::kF32 ? 4 : 2);
    product(gemv, mr, n, k, alpha, ar, b, accumulate ? 1.f : 0.f, c, ws);
    narrow(c, mr * n, oe, out, r0 * n);
  }
}

void no_init(int64_t, int64_t, float*) {}

// c[i, j] = beta * self[r0 + i, j] over `rows` rows of n floats, self of storage type T at
// element strides (rs, cs) (0 where broadcast). The dtype is fixed per call, not per element;
// a row broadcast over every row (a bias) is formed once and then copied, which keeps this
// pass over the output at memory speed.
template <typename T>
void fill_rows_of(const T* s, int64_t rs, int64_t cs, float beta, int64_t r0, int64_t rows, int64_t n, float* c) {
  const int64_t first = rs == 0 ? std::min<int64_t>(rows, 1) : rows;
  for (int64_t i = 0; i < first; ++i) {
    const T* si = s + (r0 + i) * rs;
    float* ci = c + i * n;
    if (cs == 1) {
      for (int64_t j = 0; j < n; ++j) ci[j] = beta * cpu::to_float(si[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) ci[j] = beta * cpu::to_float(si[j * cs]);
    }
  }
  if (first == rows) return;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cpu::parallel_for(1, rows, std::max<int64_t>(1, kFillGrain / std::max<int64_t>(n, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) std::memcpy(c + i * n, c, bytes);
  });
}

void fill_rows(const void* s, cpu::Elem se, int64_t rs, int64_t cs, float beta, int64_t r0, int64_t rows, int64_t n,
               float* c) {
  switch (se) {
    case cpu::Elem::kF16: return fill_rows_of(static_cast<const cpu::Half*>(s), rs, cs, beta, r0, rows, n, c);
    case cpu::Elem::kBF16: return fill_rows_of(static_cast<const cpu::BFloat16*>(s), rs, cs, beta, r0, rows, n, c);
    default: return fill_rows_of(static_cast<const float*>(s), rs, cs, beta, r0, rows, n, c);
  }
}

void mm_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor a = args[0]->toTensor(), b = args[1]->toTensor(), out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, same_float_type(a, b, out), InvalidType, ,
                      "mm: needs float32, float16 or bfloat16 tensors of one dtype");
  ET_KERNEL_CHECK_MSG(ctx, a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), InvalidArgument, ,
                      "mm: needs [m, k] x [k, n]");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const int64_t sizes[2] = {m, n};
  if (!resize_out(ctx, out, {sizes, 2})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "mm: output must be contiguous");
  float* ws = gemm_workspace(ctx, m, n, k, matrix_of(b, 0));
  gemm_into(ctx, m, n, k, 1.f, matrix_of(a, 0), matrix_of(b, 0), false, out.mutable_data_ptr(), out.scalar_type(), ws,
            no_init);
}

void bmm_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor a = args[0]->toTensor(), b = args[1]->toTensor(), out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, same_float_type(a, b, out), InvalidType, ,
                      "bmm: needs float32, float16 or bfloat16 tensors of one dtype");
  ET_KERNEL_CHECK_MSG(ctx, a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
                      InvalidArgument, , "bmm: needs [b, m, k] x [b, k, n]");
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  const int64_t sizes[3] = {batch, m, n};
  if (!resize_out(ctx, out, {sizes, 3})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "bmm: output must be contiguous");
  float* ws = gemm_workspace(ctx, m, n, k, matrix_of(b, 0));
  char* o = static_cast<char*>(out.mutable_data_ptr());
  const int64_t step = m * n * static_cast<int64_t>(out.element_size());
  for (int64_t i = 0; i < batch && ctx.failure_state() == Error::Ok; ++i)
    gemm_into(ctx, m, n, k, 1.f, matrix_of(a, i), matrix_of(b, i), false, o + i * step, out.scalar_type(), ws, no_init);
}

// out = beta * self + alpha * (mat1 @ mat2), self broadcast to [m, n].
void addmm_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor, Tag::ListScalar, Tag::ListScalar, Tag::Tensor}),
                  InvalidArgument);
  const Tensor self = args[0]->toTensor(), a = args[1]->toTensor(), b = args[2]->toTensor();
  const Tensor out = args[5]->toTensor();
  const float beta = static_cast<float>(args[3]->toScalarDouble());
  const float alpha = static_cast<float>(args[4]->toScalarDouble());
  ET_KERNEL_CHECK_MSG(ctx, same_float_type(a, b, out) && self.scalar_type() == out.scalar_type(), InvalidType, ,
                      "addmm: needs float32, float16 or bfloat16 tensors of one dtype");
  ET_KERNEL_CHECK_MSG(ctx, a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), InvalidArgument, ,
                      "addmm: needs [m, k] x [k, n]");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  ET_KERNEL_CHECK_MSG(ctx,
                      self.dim() <= 2 && (self.dim() < 1 || self.size(-1) == n || self.size(-1) == 1) &&
                          (self.dim() < 2 || self.size(0) == m || self.size(0) == 1),
                      InvalidArgument, , "addmm: self does not broadcast to [m, n]");
  const int64_t sizes[2] = {m, n};
  if (!resize_out(ctx, out, {sizes, 2})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "addmm: output must be contiguous");
  // Strides of self over [m, n], zero along broadcast dims.
  const void* s = self.const_data_ptr();
  const cpu::Elem se = elem_of(self.scalar_type());
  const int64_t rs = self.dim() == 2 && self.size(0) == m && m > 1 ? self.stride(0) : 0;
  const int64_t cs = self.dim() >= 1 && self.size(-1) == n && n > 1 ? self.stride(-1) : 0;
  gemm_into(ctx, m, n, k, alpha, matrix_of(a, 0), matrix_of(b, 0), beta != 0.f, out.mutable_data_ptr(),
            out.scalar_type(), gemm_workspace(ctx, m, n, k, matrix_of(b, 0)),
            [&](int64_t r0, int64_t rows, float* c) { fill_rows(s, se, rs, cs, beta, r0, rows, n, c); });
}

// out[..., n] = input[..., k] @ weight[n, k]^T + bias[n]: the weight is read transposed in place.
void linear_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), w = args[1]->toTensor(), out = args[3]->toTensor();
  const auto bias = args[2]->toOptionalTensor();
  ET_KERNEL_CHECK_MSG(ctx, same_float_type(in, w, out) && (!bias || bias->scalar_type() == out.scalar_type()),
                      InvalidType, , "linear: needs float32, float16 or bfloat16 tensors of one dtype");
  ET_KERNEL_CHECK_MSG(ctx, in.dim() >= 1 && w.dim() == 2 && in.size(-1) == w.size(1), InvalidArgument, ,
                      "linear: needs input [..., k] and weight [n, k]");
  const int64_t k = w.size(1), n = w.size(0);
  ET_KERNEL_CHECK_MSG(ctx, !bias || (bias->dim() == 1 && (bias->size(0) == n || bias->size(0) == 1)), InvalidArgument, ,
                      "linear: bias must be [n] (or [1])");
  ET_KERNEL_CHECK_MSG(ctx, in.dim() <= 2 || in.is_contiguous(), NotSupported, ,
                      "linear: an input with more than 2 dims must be contiguous");
  int64_t sizes[kMaxDim];
  for (int64_t d = 0; d + 1 < in.dim(); ++d) sizes[d] = in.size(d);
  sizes[in.dim() - 1] = n;
  if (!resize_out(ctx, out, {sizes, static_cast<size_t>(in.dim())})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "linear: output must be contiguous");
  const int64_t m = n > 0 ? out.numel() / n : 0;
  const cpu::ConstMatrix a{in.const_data_ptr(), in.dim() == 2 ? in.stride(0) : k, in.stride(-1),
                           elem_of(in.scalar_type())};
  const cpu::ConstMatrix b{w.const_data_ptr(), w.stride(1), w.stride(0), elem_of(w.scalar_type())};
  const void* s = bias ? bias->const_data_ptr() : nullptr;
  const cpu::Elem se = elem_of(out.scalar_type());
  const int64_t cs = bias && bias->size(0) == n && n > 1 ? bias->stride(0) : 0;
  gemm_into(ctx, m, n, k, 1.f, a, b, bias.has_value(), out.mutable_data_ptr(), out.scalar_type(),
            gemm_workspace(ctx, m, n, k, b),
            [&](int64_t r0, int64_t rows, float* c) { fill_rows(s, se, 0, cs, 1.f, r0, rows, n, c); });
}

// The p-norm of the difference of two rows of m floats: p = 0 counts the differing elements,
// p = inf takes the largest difference; 1 and 2 have their own loops (the common cases).
struct PNorm {
  double p;
  float operator()(const float* a, const float* b, int64_t m) const {
    if (p == 2.0) {
      float acc = 0;
      for (int64_t k = 0; k < m; ++k) acc += (a[k] - b[k]) * (a[k] - b[k]);
      return std::sqrt(acc);
    }
    if (p == 1.0) {
      float acc = 0;
      for (int64_t k = 0; k < m; ++k) acc += std::fabs(a[k] - b[k]);
      return acc;
    }
    if (p == 0.0) {
      float acc = 0;
      for (int64_t k = 0; k < m; ++k) acc += a[k] != b[k];
      return acc;
    }
    if (std::isinf(p)) {
      float acc = 0;
      for (int64_t k = 0; k < m; ++k) acc = std::max(acc, std::fabs(a[k] - b[k]));
      return acc;
    }
    double acc = 0;
    for (int64_t k = 0; k < m; ++k) acc += std::pow(std::fabs(static_cast<double>(a[k]) - b[k]), p);
    return static_cast<float>(std::pow(acc, 1.0 / p));
  }
};

// _cdist_forward.out(x1, x2, p, compute_mode?, *, out): out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p,
// the batch dims broadcast.
void cdist_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 5)) return call_widened(ctx, args, 5, 1, cdist_out);
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Double, Tag::None, Tag::Tensor}), InvalidArgument);
  const Tensor a = args[0]->toTensor(), b = args[1]->toTensor(), out = args[4]->toTensor();
  const double p = args[2]->toDouble();
  ET_KERNEL_CHECK_MSG(ctx, p >= 0, InvalidArgument, , "cdist: p = %g must be non-negative", p);
  ET_KERNEL_CHECK_MSG(ctx,
                      a.scalar_type() == ScalarType::Float && b.scalar_type() == ScalarType::Float &&
                          out.scalar_type() == ScalarType::Float,
                      InvalidType, , "cdist: only float32");
  ET_KERNEL_CHECK_MSG(ctx, a.dim() >= 2 && b.dim() >= 2 && a.size(-1) == b.size(-1), InvalidArgument, ,
                      "cdist: inputs need rank 2 or more and the same row length");
  ET_KERNEL_CHECK_MSG(ctx, a.is_contiguous() && b.is_contiguous(), NotSupported, , "cdist: inputs must be contiguous");
  // Batch dims: broadcast as for elementwise ops; each input's batch stride is 0 where it has size 1.
  const size_t na = static_cast<size_t>(a.dim()) - 2, nb = static_cast<size_t>(b.dim()) - 2;
  const size_t nbat = std::max(na, nb);
  int64_t sizes[kMaxDim], sa[kMaxDim], sb[kMaxDim];
  const int64_t rows = a.size(-2), cols = b.size(-2), m = a.size(-1);
  for (size_t d = 0; d < nbat; ++d) {
    const int64_t da = d + na >= nbat ? a.size(d + na - nbat) : 1, db = d + nb >= nbat ? b.size(d + nb - nbat) : 1;
    ET_KERNEL_CHECK_MSG(ctx, da == db || da == 1 || db == 1, InvalidArgument, , "cdist: batch dims do not broadcast");
    sizes[d] = da == 1 ? db : da;
    sa[d] = da == 1 ? 0 : a.stride(d + na - nbat);
    sb[d] = db == 1 ? 0 : b.stride(d + nb - nbat);
  }
  sizes[nbat] = rows;
  sizes[nbat + 1] = cols;
  if (!resize_out(ctx, out, {sizes, nbat + 2})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "cdist: the output must be contiguous");
  int64_t batches = 1;
  for (size_t d = 0; d < nbat; ++d) batches *= sizes[d];
  const PNorm norm{p};
  float* y = out.mutable_data_ptr<float>();
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t rest = bi, oa = 0, ob = 0;
    for (size_t d = nbat; d > 0; --d) {
      const int64_t i = rest % sizes[d - 1];
      rest /= sizes[d - 1];
      oa += i * sa[d - 1];
      ob += i * sb[d - 1];
    }
    const float* x1 = a.const_data_ptr<float>() + oa;
    const float* x2 = b.const_data_ptr<float>() + ob;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) y[(bi * rows + i) * cols + j] = norm(x1 + i * m, x2 + j * m, m);
  }
}

// _pdist_forward.out(self, p, *, out): the p-norm distance of every pair of rows i < j of an
// [n, m] input, in row-major order of (i, j).
void pdist_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 3)) return call_widened(ctx, args, 3, 1, pdist_out);
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Double, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  const double p = args[1]->toDouble();
  ET_KERNEL_CHECK_MSG(ctx, p >= 0, InvalidArgument, , "pdist: p = %g must be non-negative", p);
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float, InvalidType,
                      , "pdist: only float32");
  ET_KERNEL_CHECK_MSG(ctx, in.dim() == 2 && in.is_contiguous(), InvalidArgument, ,
                      "pdist: needs a contiguous 2-D input");
  const int64_t n = in.size(0), m = in.size(1);
  const int64_t pairs = n > 1 ? n * (n - 1) / 2 : 0;
  if (!resize_out(ctx, out, {&pairs, 1})) return;
  const PNorm norm{p};
  const float* x = in.const_data_ptr<float>();
  float* y = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) *y++ = norm(x + i * m, x + j * m, m);
}

}  // namespace

// Load pass: linear layers export as permute_copy(weight, [1, 0]) feeding mm/addmm, which would
// copy every weight on every run. Where the weight is a constant (from the file, or dequantized at
// load) and the copy is read only as the product's right operand, the copy's tensor becomes the
// weight itself with transposed strides (the product kernels honour any dim order) and its
// instruction goes.
size_t read_weight_transposes_in_place(runtime::MethodRewriter& m) {
  constexpr size_t kMaxUses = 16;
  const runtime::OpFunction permute = runtime::get_op_function("aten::permute_copy", "out");
  size_t elided = 0;
  for (size_t pc = 0; permute != nullptr && pc < m.num_steps(); ++pc) {
    if (m.kernel(pc) != permute) continue;
    const Args a = m.args(pc);
    if (a.size() < 3 || !a[0]->isTensor() || !a[2]->isTensor() || !a[1]->isIntList() || !m.is_constant(a[0]) ||
        !m.is_constant(a[1]) || m.is_constant(a[2]))
      continue;
    const Span<const int64_t> d = a[1]->toIntList();
    runtime::TensorImpl* w = a[0]->toTensor().unsafeGetTensorImpl();
    runtime::TensorImpl* t = a[2]->toTensor().unsafeGetTensorImpl();
    if (m.aliased(a[2]) || d.size() != 2 || d[0] != 1 || d[1] != 0 || w == t || w->data() == nullptr ||
        t->data() == nullptr || w->dim() != 2 || t->dim() != 2 || w->scalar_type() != t->scalar_type() ||
        w->dim_order()[0] != 0 || t->dim_order()[0] != 0 || t->sizes()[0] != w->sizes()[1] ||
        t->sizes()[1] != w->sizes()[0])
      continue;
    size_t pcs[kMaxUses];
    const size_t n = m.uses(a[2], pcs, kMaxUses);
    bool ok = n <= kMaxUses;
    for (size_t u = 0; ok && u < n; ++u) {
      if (pcs[u] == pc) continue;
      const Args r = m.args(pcs[u]);
      const runtime::OpFunction op = m.kernel(pcs[u]);
      // Only as the right operand: mm(self, mat2, out) or addmm(self, mat1, mat2, ..., out).
      for (size_t j = 0; ok && j < r.size(); ++j)
        ok = r[j] != a[2] || (op == mm_out && j == 1) || (op == addmm_out && j == 2);
      ok = ok && (op == mm_out || op == addmm_out);
    }
    if (!ok) continue;
    // The Method allocated these arrays; the transpose of [n, k] is k-major.
    const_cast<runtime::DimOrderType*>(t->dim_order().data())[0] = 1;
    const_cast<runtime::DimOrderType*>(t->dim_order().data())[1] = 0;
    const_cast<runtime::StridesType*>(t->strides().data())[0] = 1;
    const_cast<runtime::StridesType*>(t->strides().data())[1] = w->sizes()[1];
    m.make_constant(a[2], w->data(), w->capacity_bytes());
    m.remove(pc);
    ++elided;
  }
  if (elided > 0) ET_LOG(Info, "load passes: %zu weight transposes read in place", elided);
  return elided;
}

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_linear.inc"

}  // namespace kernels
}  // namespace executorch
