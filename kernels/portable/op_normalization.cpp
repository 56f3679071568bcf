// Normalisation kernels on float32 (16-bit floats widened): eval-mode batch norm, layer norm,
// group norm, and batch norm with statistics from the batch (what instance norm lowers to).
#include <cmath>

#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/portable/util/kernel_util.h"
#include "kernels/portable/util/widen.h"

namespace executorch {
namespace kernels {
namespace {

bool is_float(const Tensor& t) { return t.scalar_type() == ScalarType::Float; }
bool opt_float(const std::optional<Tensor>& t, int64_t numel) {
  return !t || (is_float(*t) && t->numel() == numel && t->is_contiguous());
}

// y = x * scale[c] + shift[c] over [outer, C, inner], the one pass batch norm needs.
ET_MULTIVERSION void affine_per_channel(const float* x, float* y, int64_t outer, int64_t channels, int64_t inner,
                                        const float* scale, const float* shift) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const float a = scale[c], b = shift[c];
      const float* xi = x + (o * channels + c) * inner;
      float* yi = y + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) yi[i] = xi[i] * a + b;
    }
}

// Mean and 1/sqrt(var + eps) of n floats, two-pass for accuracy.
void moments(const float* x, int64_t n, double eps, float* mean, float* rstd) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mu = n > 0 ? sum / n : 0.0;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += (x[i] - mu) * (x[i] - mu);
  *mean = static_cast<float>(mu);
  *rstd = static_cast<float>(1.0 / std::sqrt((n > 0 ? sq / n : 0.0) + eps));
}

// Shared checks of the three [input, weight?, bias?] normalisation kernels.
bool check_io(KernelRuntimeContext& ctx, const Tensor& in, const Tensor& out, const char* op) {
  if (!is_float(in) || !is_float(out)) {
    ET_LOG(Error, "%s: only float32 is supported", op);
    ctx.fail(Error::InvalidType);
    return false;
  }
  if (!in.is_contiguous()) {
    ET_LOG(Error, "%s: input must be contiguous", op);
    ctx.fail(Error::NotSupported);
    return false;
  }
  return resize_out(ctx, out, in);
}

void batch_norm_no_training_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 10)) return call_widened(ctx, args, 10, 3, batch_norm_no_training_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::None, Tag::None, Tag::Tensor, Tag::Tensor, Tag::Double, Tag::Double,
                                 Tag::Tensor, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), mean = args[3]->toTensor(), var = args[4]->toTensor();
  const auto weight = args[1]->toOptionalTensor(), bias = args[2]->toOptionalTensor();
  const double eps = args[6]->toDouble();
  const Tensor out = args[7]->toTensor();
  if (!check_io(ctx, in, out, "batch_norm")) return;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() >= 2, InvalidArgument, , "batch_norm: input needs a channel dim");
  const int64_t c = in.size(1);
  ET_KERNEL_CHECK_MSG(ctx, opt_float(weight, c) && opt_float(bias, c) && opt_float(mean, c) && opt_float(var, c),
                      InvalidArgument, , "batch_norm: statistics must be float32 of size C");
  // The saved statistics are empty in eval mode.
  const int64_t empty[1] = {0};
  for (int k = 8; k < 10; ++k) {
    const Tensor t = args[k]->toTensor();
    if (t.dim() == 1 && !resize_out(ctx, t, {empty, 1})) return;
  }
  // Folding the statistics into one scale and shift per channel makes the pass a single FMA;
  // channel counts are small, so stack arrays of a bounded size hold them in chunks.
  constexpr int64_t kChunk = 256;
  float scale[kChunk], shift[kChunk];
  const int64_t outer = in.size(0), inner = c > 0 ? in.numel() / (outer * c > 0 ? outer * c : 1) : 0;
  const float* m = mean.const_data_ptr<float>();
  const float* v = var.const_data_ptr<float>();
  const float* w = weight ? weight->const_data_ptr<float>() : nullptr;
  const float* b = bias ? bias->const_data_ptr<float>() : nullptr;
  for (int64_t c0 = 0; c0 < c; c0 += kChunk) {
    const int64_t cn = c - c0 < kChunk ? c - c0 : kChunk;
    for (int64_t i = 0; i < cn; ++i) {
      const float inv = static_cast<float>(1.0 / std::sqrt(static_cast<double>(v[c0 + i]) + eps));
      scale[i] = inv * (w ? w[c0 + i] : 1.f);
      shift[i] = (b ? b[c0 + i] : 0.f) - m[c0 + i] * scale[i];
    }
    for (int64_t o = 0; o < outer; ++o)
      affine_per_channel(in.const_data_ptr<float>() + (o * c + c0) * inner,
                         out.mutable_data_ptr<float>() + (o * c + c0) * inner, 1, cn, inner, scale, shift);
  }
}

// native_layer_norm.out(input, normalized_shape, weight?, bias?, eps, *, out, mean, rstd)
void layer_norm_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 8)) return call_widened(ctx, args, 8, 3, layer_norm_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::None, Tag::None, Tag::Double, Tag::Tensor, Tag::Tensor,
                                 Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[5]->toTensor();
  const Span<const int64_t> norm = args[1]->toIntList();
  const auto weight = args[2]->toOptionalTensor(), bias = args[3]->toOptionalTensor();
  const double eps = args[4]->toDouble();
  if (!check_io(ctx, in, out, "layer_norm")) return;
  const int64_t nd = static_cast<int64_t>(norm.size());
  ET_KERNEL_CHECK_MSG(ctx, nd >= 1 && nd <= in.dim(), InvalidArgument, ,
                      "layer_norm: normalized_shape longer than the input");
  int64_t inner = 1;
  for (int64_t i = 0; i < nd; ++i) {
    ET_KERNEL_CHECK_MSG(ctx, in.size(in.dim() - nd + i) == norm[i], InvalidArgument, ,
                        "layer_norm: normalized_shape does not match the input's trailing dims");
    inner *= norm[i];
  }
  ET_KERNEL_CHECK_MSG(ctx, opt_float(weight, inner) && opt_float(bias, inner), InvalidArgument, ,
                      "layer_norm: weight/bias must be float32 of the normalized shape");
  const int64_t outer = inner > 0 ? in.numel() / inner : 0;
  // mean and rstd keep the leading dims and have size 1 in the normalized ones.
  int64_t stat_sizes[kMaxDim];
  for (int64_t i = 0; i < in.dim(); ++i) stat_sizes[i] = i < in.dim() - nd ? in.size(i) : 1;
  const Tensor mean_out = args[6]->toTensor(), rstd_out = args[7]->toTensor();
  const bool want_stats =
      is_float(mean_out) && is_float(rstd_out) && mean_out.dim() == in.dim() && rstd_out.dim() == in.dim();
  if (want_stats && (!resize_out(ctx, mean_out, {stat_sizes, static_cast<size_t>(in.dim())}) ||
                     !resize_out(ctx, rstd_out, {stat_sizes, static_cast<size_t>(in.dim())})))
    return;
  const float* w = weight ? weight->const_data_ptr<float>() : nullptr;
  const float* b = bias ? bias->const_data_ptr<float>() : nullptr;
  cpu::layer_norm(in.const_data_ptr<float>(), out.mutable_data_ptr<float>(), outer, inner, w, b, eps,
                  want_stats ? mean_out.mutable_data_ptr<float>() : nullptr,
                  want_stats ? rstd_out.mutable_data_ptr<float>() : nullptr);
}

// native_group_norm.out(input, weight?, bias?, N, C, HxW, group, eps, *, out, mean, rstd)
void group_norm_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 11)) return call_widened(ctx, args, 11, 3, group_norm_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::None, Tag::None, Tag::Int, Tag::Int, Tag::Int, Tag::Int, Tag::Double,
                                 Tag::Tensor, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[8]->toTensor();
  const auto weight = args[1]->toOptionalTensor(), bias = args[2]->toOptionalTensor();
  const int64_t n = args[3]->toInt(), c = args[4]->toInt(), hw = args[5]->toInt();
  const int64_t groups = args[6]->toInt();
  const double eps = args[7]->toDouble();
  if (!check_io(ctx, in, out, "group_norm")) return;
  // N, C, HxW and group come from the program: each a dim (below 2^31), their product checked.
  int64_t nc = 0, nchw = 0;
  ET_KERNEL_CHECK_MSG(ctx,
                      n >= 0 && n <= INT32_MAX && c >= 0 && c <= INT32_MAX && hw >= 0 && hw <= INT32_MAX &&
                          groups > 0 && groups <= (c > 0 ? c : 1) && c % groups == 0 && !mul_overflows(n, c, &nc) &&
                          !mul_overflows(nc, hw, &nchw) && in.numel() == nchw,
                      InvalidArgument, , "group_norm: N, C, HxW, group do not match the input");
  ET_KERNEL_CHECK_MSG(ctx, opt_float(weight, c) && opt_float(bias, c), InvalidArgument, ,
                      "group_norm: weight/bias must be float32 of size C");
  const int64_t stat_sizes[2] = {n, groups};
  const Tensor mean_out = args[9]->toTensor(), rstd_out = args[10]->toTensor();
  const bool want_stats = is_float(mean_out) && is_float(rstd_out) && mean_out.dim() == 2 && rstd_out.dim() == 2;
  if (want_stats && (!resize_out(ctx, mean_out, {stat_sizes, 2}) || !resize_out(ctx, rstd_out, {stat_sizes, 2})))
    return;
  const int64_t cg = c / groups, span = cg * hw;
  const float* w = weight ? weight->const_data_ptr<float>() : nullptr;
  const float* b = bias ? bias->const_data_ptr<float>() : nullptr;
  for (int64_t i = 0; i < n * groups; ++i) {
    const float* x = in.const_data_ptr<float>() + i * span;
    float* y = out.mutable_data_ptr<float>() + i * span;
    float mu, rstd;
    moments(x, span, eps, &mu, &rstd);
    for (int64_t j = 0; j < cg; ++j) {
      const int64_t ch = (i % groups) * cg + j;
      const float a = rstd * (w ? w[ch] : 1.f), sh = (b ? b[ch] : 0.f) - mu * a;
      for (int64_t k = 0; k < hw; ++k) y[j * hw + k] = x[j * hw + k] * a + sh;
    }
    if (want_stats) {
      mean_out.mutable_data_ptr<float>()[i] = mu;
      rstd_out.mutable_data_ptr<float>()[i] = rstd;
    }
  }
}

// Batch norm of a checked float32 input with statistics from the batch (over every dim but the
// channel dim), saved to mean_out/rstd_out when they are 1-D float32; running_mean/var, when
// given, move toward the batch's mean and unbiased variance by `momentum`.
void batch_norm_batch_stats(KernelRuntimeContext& ctx, const Tensor& in, const std::optional<Tensor>& weight,
                            const std::optional<Tensor>& bias, double eps, const Tensor& out, const Tensor& mean_out,
                            const Tensor& rstd_out, const Tensor* running_mean, const Tensor* running_var,
                            double momentum) {
  const int64_t outer = in.size(0), c = in.size(1);
  const int64_t inner = outer * c > 0 ? in.numel() / (outer * c) : 0;
  const int64_t stat_sizes[1] = {c};
  const bool want_stats = is_float(mean_out) && is_float(rstd_out) && mean_out.dim() == 1 && rstd_out.dim() == 1;
  if (want_stats && (!resize_out(ctx, mean_out, {stat_sizes, 1}) || !resize_out(ctx, rstd_out, {stat_sizes, 1})))
    return;
  const float* x = in.const_data_ptr<float>();
  float* y = out.mutable_data_ptr<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) sum += x[(o * c + ch) * inner + i];
    const double count = static_cast<double>(outer * inner);
    const double mu = count > 0 ? sum / count : 0.0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const double d = x[(o * c + ch) * inner + i] - mu;
        sq += d * d;
      }
    const double rstd = 1.0 / std::sqrt((count > 0 ? sq / count : 0.0) + eps);
    const float a = static_cast<float>(rstd) * (weight ? weight->const_data_ptr<float>()[ch] : 1.f);
    const float sh = (bias ? bias->const_data_ptr<float>()[ch] : 0.f) - static_cast<float>(mu) * a;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) y[(o * c + ch) * inner + i] = x[(o * c + ch) * inner + i] * a + sh;
    if (want_stats) {
      mean_out.mutable_data_ptr<float>()[ch] = static_cast<float>(mu);
      rstd_out.mutable_data_ptr<float>()[ch] = static_cast<float>(rstd);
    }
    if (running_mean && running_var) {
      float* rm = running_mean->mutable_data_ptr<float>();
      float* rv = running_var->mutable_data_ptr<float>();
      const double unbiased = count > 1 ? sq / (count - 1) : sq / count;
      rm[ch] = static_cast<float>((1.0 - momentum) * rm[ch] + momentum * mu);
      rv[ch] = static_cast<float>((1.0 - momentum) * rv[ch] + momentum * unbiased);
    }
  }
}

// _native_batch_norm_legit.no_stats_out(input, weight?, bias?, training, momentum, eps,
// *, out, save_mean, save_invstd): statistics over every dim but the channel dim.
void batch_norm_no_stats_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 9)) return call_widened(ctx, args, 9, 3, batch_norm_no_stats_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::None, Tag::None, Tag::Bool, Tag::Double, Tag::Double, Tag::Tensor,
                                 Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[6]->toTensor();
  const auto weight = args[1]->toOptionalTensor(), bias = args[2]->toOptionalTensor();
  if (!check_io(ctx, in, out, "batch_norm")) return;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() >= 2, InvalidArgument, , "batch_norm: input needs a channel dim");
  const int64_t c = in.size(1);
  ET_KERNEL_CHECK_MSG(ctx, opt_float(weight, c) && opt_float(bias, c), InvalidArgument, ,
                      "batch_norm: weight/bias must be float32 of size C");
  batch_norm_batch_stats(ctx, in, weight, bias, args[5]->toDouble(), out, args[7]->toTensor(), args[8]->toTensor(),
                         nullptr, nullptr, 0.0);
}

// _native_batch_norm_legit.out(input, weight?, bias?, running_mean, running_var, training, momentum,
// eps, *, out, save_mean, save_invstd): in training, the batch's statistics, which also update the
// running ones; otherwise the running statistics, and empty saved ones.
void batch_norm_legit_out(KernelRuntimeContext& ctx, Args args) {
  // The widened copies would take the running statistics' update with them.
  ET_KERNEL_CHECK_MSG(ctx,
                      args_count_ok(args, 11) && !(args[3]->isTensor() && is_half(args[3]->toTensor().scalar_type())) &&
                          !(args[4]->isTensor() && is_half(args[4]->toTensor().scalar_type())),
                      InvalidType, , "batch_norm: running statistics must be float32");
  if (has_half_tensor(args, 11)) return call_widened(ctx, args, 11, 3, batch_norm_legit_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::None, Tag::None, Tag::Tensor, Tag::Tensor, Tag::Bool, Tag::Double,
                                 Tag::Double, Tag::Tensor, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), rm = args[3]->toTensor(), rv = args[4]->toTensor(), out = args[8]->toTensor();
  const auto weight = args[1]->toOptionalTensor(), bias = args[2]->toOptionalTensor();
  const double momentum = args[6]->toDouble(), eps = args[7]->toDouble();
  if (!check_io(ctx, in, out, "batch_norm")) return;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() >= 2, InvalidArgument, , "batch_norm: input needs a channel dim");
  const int64_t c = in.size(1);
  ET_KERNEL_CHECK_MSG(ctx, opt_float(weight, c) && opt_float(bias, c) && opt_float(rm, c) && opt_float(rv, c),
                      InvalidArgument, , "batch_norm: weight, bias and running statistics must be float32 of size C");
  const Tensor save_mean = args[9]->toTensor(), save_invstd = args[10]->toTensor();
  if (args[5]->toBool()) {
    batch_norm_batch_stats(ctx, in, weight, bias, eps, out, save_mean, save_invstd, &rm, &rv, momentum);
    return;
  }
  const int64_t empty[1] = {0};
  if ((save_mean.dim() == 1 && !resize_out(ctx, save_mean, {empty, 1})) ||
      (save_invstd.dim() == 1 && !resize_out(ctx, save_invstd, {empty, 1})))
    return;
  const int64_t outer = in.size(0), inner = outer * c > 0 ? in.numel() / (outer * c) : 0;
  for (int64_t ch = 0; ch < c; ++ch) {
    const float inv = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rv.const_data_ptr<float>()[ch]) + eps));
    const float scale = inv * (weight ? weight->const_data_ptr<float>()[ch] : 1.f);
    const float shift = (bias ? bias->const_data_ptr<float>()[ch] : 0.f) - rm.const_data_ptr<float>()[ch] * scale;
    for (int64_t o = 0; o < outer; ++o)
      affine_per_channel(in.const_data_ptr<float>() + (o * c + ch) * inner,
                         out.mutable_data_ptr<float>() + (o * c + ch) * inner, 1, 1, inner, &scale, &shift);
  }
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_normalization.inc"

}  // namespace kernels
}  // namespace executorch
