// 2-D resampling of float32 NCHW tensors (16-bit floats widened): nearest and bilinear upsampling (.vec
// overloads), antialiased bilinear resizing, and sampling at grid positions (grid_sampler_2d).
#include <algorithm>
#include <cmath>

#include "kernels/portable/util/kernel_util.h"
#include "kernels/portable/util/widen.h"

namespace executorch {
namespace kernels {
namespace {

struct Resize {
  int64_t planes, in_h, in_w, out_h, out_w;
  double scale_h, scale_w;  // input pixels per output pixel, as torch derives them
};

// Reads output_size / scale_factors (exactly one is given) and resizes `out`.
bool plan_resize(KernelRuntimeContext& ctx, const Tensor& in, const EValue& size, const EValue& scales,
                 bool align_corners, const Tensor& out, Resize* r) {
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float, InvalidType,
                      false, "upsample: only float32");
  ET_KERNEL_CHECK_MSG(ctx, in.dim() == 4 && in.is_contiguous(), NotSupported, false,
                      "upsample: needs a contiguous 4-D input");
  r->planes = in.size(0) * in.size(1);
  r->in_h = in.size(2);
  r->in_w = in.size(3);
  const Span<const int64_t> sz = size.toIntList();
  const Span<const double> sc = scales.toDoubleList();
  if (size.isIntList()) {
    ET_KERNEL_CHECK_MSG(ctx, sz.size() == 2 && sz[0] > 0 && sz[1] > 0, InvalidArgument, false,
                        "upsample: output_size must be two positive sizes");
    r->out_h = sz[0];
    r->out_w = sz[1];
    r->scale_h = static_cast<double>(r->in_h) / r->out_h;
    r->scale_w = static_cast<double>(r->in_w) / r->out_w;
  } else {
    ET_KERNEL_CHECK_MSG(ctx,
                        scales.isDoubleList() && sc.size() == 2 && sc[0] > 0 && sc[1] > 0 &&
                            r->in_h * sc[0] < 2147483647.0 && r->in_w * sc[1] < 2147483647.0,
                        InvalidArgument, false, "upsample: give output_size or two positive scale_factors");
    r->out_h = static_cast<int64_t>(std::floor(r->in_h * sc[0]));
    r->out_w = static_cast<int64_t>(std::floor(r->in_w * sc[1]));
    r->scale_h = 1.0 / sc[0];
    r->scale_w = 1.0 / sc[1];
  }
  if (align_corners) {
    r->scale_h = r->out_h > 1 ? static_cast<double>(r->in_h - 1) / (r->out_h - 1) : 0.0;
    r->scale_w = r->out_w > 1 ? static_cast<double>(r->in_w - 1) / (r->out_w - 1) : 0.0;
  }
  const int64_t sizes[4] = {in.size(0), in.size(1), r->out_h, r->out_w};
  if (!resize_out(ctx, out, {sizes, 4})) return false;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, false, "upsample: output must be contiguous");
  return true;
}

// upsample_nearest2d.vec_out(input, output_size?, scale_factors?, *, out)
void upsample_nearest2d_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 4)) return call_widened(ctx, args, 4, 1, upsample_nearest2d_out);
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::None, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[3]->toTensor();
  Resize r;
  if (!plan_resize(ctx, in, *args[1], *args[2], false, out, &r)) return;
  const float* x = in.const_data_ptr<float>();
  float* y = out.mutable_data_ptr<float>();
  for (int64_t p = 0; p < r.planes; ++p)
    for (int64_t oh = 0; oh < r.out_h; ++oh) {
      const int64_t ih = std::min(static_cast<int64_t>(std::floor(oh * r.scale_h)), r.in_h - 1);
      for (int64_t ow = 0; ow < r.out_w; ++ow) {
        const int64_t iw = std::min(static_cast<int64_t>(std::floor(ow * r.scale_w)), r.in_w - 1);
        y[(p * r.out_h + oh) * r.out_w + ow] = x[(p * r.in_h + ih) * r.in_w + iw];
      }
    }
}

// Source coordinate of output `o` and the two taps with the weight of the second.
void taps(int64_t o, double scale, int64_t in, bool align_corners, int64_t* i0, int64_t* i1, float* w1) {
  double src = align_corners ? o * scale : scale * (o + 0.5) - 0.5;
  if (src < 0) src = 0;
  *i0 = std::min(static_cast<int64_t>(src), in - 1);
  *i1 = std::min(*i0 + 1, in - 1);
  *w1 = static_cast<float>(src - *i0);
}

// upsample_bilinear2d.vec_out(input, output_size?, align_corners, scale_factors?, *, out)
void upsample_bilinear2d_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 5)) return call_widened(ctx, args, 5, 1, upsample_bilinear2d_out);
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Bool, Tag::None, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[4]->toTensor();
  const bool align = args[2]->toBool();
  Resize r;
  if (!plan_resize(ctx, in, *args[1], *args[3], align, out, &r)) return;
  const float* x = in.const_data_ptr<float>();
  float* y = out.mutable_data_ptr<float>();
  for (int64_t p = 0; p < r.planes; ++p) {
    const float* xp = x + p * r.in_h * r.in_w;
    for (int64_t oh = 0; oh < r.out_h; ++oh) {
      int64_t h0, h1;
      float lh;
      taps(oh, r.scale_h, r.in_h, align, &h0, &h1, &lh);
      for (int64_t ow = 0; ow < r.out_w; ++ow) {
        int64_t w0, w1;
        float lw;
        taps(ow, r.scale_w, r.in_w, align, &w0, &w1, &lw);
        const float top = xp[h0 * r.in_w + w0] * (1 - lw) + xp[h0 * r.in_w + w1] * lw;
        const float bottom = xp[h1 * r.in_w + w0] * (1 - lw) + xp[h1 * r.in_w + w1] * lw;
        y[(p * r.out_h + oh) * r.out_w + ow] = top * (1 - lh) + bottom * lh;
      }
    }
  }
}

// The taps of output `o` of an antialiased linear resize: a triangle filter widened by the scale
// when shrinking (so every input pixel contributes), over input [*first, *first + *count).
// Returns the weights' sum, by which each weight is divided.
struct AaTaps {
  double scale, support, inv;
  int64_t in;
  AaTaps(double s, int64_t n) : scale(s), support(s >= 1.0 ? s : 1.0), inv(s >= 1.0 ? 1.0 / s : 1.0), in(n) {}
  double center(int64_t o) const { return scale * (o + 0.5); }
  double weight(int64_t i, double c) const {
    const double t = std::fabs((i - c + 0.5) * inv);
    return t < 1.0 ? 1.0 - t : 0.0;
  }
  double range(int64_t o, int64_t* first, int64_t* count) const {
    const double c = center(o);
    *first = std::max(static_cast<int64_t>(c - support + 0.5), int64_t(0));
    *count = std::min(static_cast<int64_t>(c + support + 0.5), in) - *first;
    double total = 0;
    for (int64_t i = 0; i < *count; ++i) total += weight(*first + i, c);
    return total;
  }
};

// _upsample_bilinear2d_aa.out(self, output_size, align_corners, scales_h?, scales_w?, *, out)
void upsample_bilinear2d_aa_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 6)) return call_widened(ctx, args, 6, 1, upsample_bilinear2d_aa_out);
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Bool, Tag::None, Tag::None, Tag::Tensor}),
                  InvalidArgument);
  for (size_t k = 3; k < 5; ++k) ET_KERNEL_CHECK(ctx, args[k]->isNone() || args[k]->isDouble(), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[5]->toTensor();
  const bool align = args[2]->toBool();
  Resize r;
  if (!plan_resize(ctx, in, *args[1], *args[3], align, out, &r)) return;
  // Given scale factors set the source step (unless the corners are aligned), as torch takes them.
  if (!align && args[3]->isDouble() && args[3]->toDouble() > 0) r.scale_h = 1.0 / args[3]->toDouble();
  if (!align && args[4]->isDouble() && args[4]->toDouble() > 0) r.scale_w = 1.0 / args[4]->toDouble();
  const AaTaps th(r.scale_h, r.in_h), tw(r.scale_w, r.in_w);
  const float* x = in.const_data_ptr<float>();
  float* y = out.mutable_data_ptr<float>();
  for (int64_t oh = 0; oh < r.out_h; ++oh) {
    int64_t h0, hn;
    const double hsum = th.range(oh, &h0, &hn), hc = th.center(oh);
    for (int64_t ow = 0; ow < r.out_w; ++ow) {
      int64_t w0, wn;
      const double wsum = tw.range(ow, &w0, &wn), wc = tw.center(ow);
      const double norm = hsum * wsum > 0 ? 1.0 / (hsum * wsum) : 0.0;
      for (int64_t p = 0; p < r.planes; ++p) {
        const float* xp = x + p * r.in_h * r.in_w;
        double acc = 0;
        for (int64_t i = 0; i < hn; ++i) {
          double row = 0;
          for (int64_t j = 0; j < wn; ++j) row += tw.weight(w0 + j, wc) * xp[(h0 + i) * r.in_w + w0 + j];
          acc += th.weight(h0 + i, hc) * row;
        }
        y[(p * r.out_h + oh) * r.out_w + ow] = static_cast<float>(acc * norm);
      }
    }
  }
}

// A grid coordinate in [-1, 1] as a pixel position in a dim of `size`, with the padding mode
// applied: 0 zeros (left as is: taps outside read zero), 1 border (clamped), 2 reflection
// (mirrored about the edges, or the outer pixel borders when not align_corners, then clamped).
double grid_position(double g, int64_t size, bool align, int64_t padding) {
  double x = align ? (g + 1) / 2 * (size - 1) : ((g + 1) * size - 1) / 2;
  if (padding == 2) {
    const double lo = align ? 0.0 : -0.5, span = align ? size - 1.0 : static_cast<double>(size);
    if (span <= 0) return 0;
    const double d = std::fabs(x - lo);
    const double extra = std::fmod(d, span);
    const int64_t flips = static_cast<int64_t>(std::floor(d / span));
    x = flips % 2 == 0 ? lo + extra : lo + span - extra;
  }
  if (padding != 0) x = std::min(std::max(x, 0.0), static_cast<double>(size - 1));
  return x;
}

// grid_sampler_2d.out(input, grid, interpolation_mode, padding_mode, align_corners, *, out):
// out[n, c, i, j] samples input[n, c] at grid[n, i, j] = (x, y) in [-1, 1]; bilinear (0) or
// nearest (1) interpolation.
void grid_sampler_2d_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 6)) return call_widened(ctx, args, 6, 1, grid_sampler_2d_out);
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Int, Tag::Int, Tag::Bool, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), grid = args[1]->toTensor(), out = args[5]->toTensor();
  const int64_t mode = args[2]->toInt(), padding = args[3]->toInt();
  const bool align = args[4]->toBool();
  ET_KERNEL_CHECK_MSG(ctx, mode == 0 || mode == 1, NotSupported, ,
                      "grid_sampler_2d: interpolation mode %lld is not supported (0 bilinear, 1 nearest)",
                      static_cast<long long>(mode));
  ET_KERNEL_CHECK_MSG(ctx, padding >= 0 && padding <= 2, InvalidArgument, ,
                      "grid_sampler_2d: padding mode %lld is not 0 (zeros), 1 (border) or 2 (reflection)",
                      static_cast<long long>(padding));
  ET_KERNEL_CHECK_MSG(ctx,
                      in.scalar_type() == ScalarType::Float && grid.scalar_type() == ScalarType::Float &&
                          out.scalar_type() == ScalarType::Float,
                      InvalidType, , "grid_sampler_2d: only float32");
  ET_KERNEL_CHECK_MSG(ctx,
                      in.dim() == 4 && grid.dim() == 4 && grid.size(0) == in.size(0) && grid.size(3) == 2 &&
                          in.is_contiguous() && grid.is_contiguous(),
                      InvalidArgument, ,
                      "grid_sampler_2d: needs a contiguous [N, C, H, W] input and [N, H', W', 2] grid");
  const int64_t n = in.size(0), c = in.size(1), h = in.size(2), w = in.size(3);
  const int64_t gh = grid.size(1), gw = grid.size(2);
  const int64_t sizes[4] = {n, c, gh, gw};
  if (!resize_out(ctx, out, {sizes, 4})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "grid_sampler_2d: the output must be contiguous");
  const float* x = in.const_data_ptr<float>();
  const float* g = grid.const_data_ptr<float>();
  float* y = out.mutable_data_ptr<float>();
  const auto at = [&](const float* plane, int64_t iy, int64_t ix) -> float {
    return iy >= 0 && iy < h && ix >= 0 && ix < w ? plane[iy * w + ix] : 0.f;
  };
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < gh; ++i)
      for (int64_t j = 0; j < gw; ++j) {
        const float* gp = g + ((b * gh + i) * gw + j) * 2;
        const double px = grid_position(gp[0], w, align, padding), py = grid_position(gp[1], h, align, padding);
        float* yo = y + b * c * gh * gw + i * gw + j;
        // A coordinate too far out for int64 samples nothing (zeros) or was clamped (other modes).
        if (!(std::fabs(px) < 1e15 && std::fabs(py) < 1e15)) {
          for (int64_t ch = 0; ch < c; ++ch) yo[ch * gh * gw] = 0.f;
          continue;
        }
        if (mode == 1) {
          const int64_t ix = static_cast<int64_t>(std::nearbyint(px)), iy = static_cast<int64_t>(std::nearbyint(py));
          for (int64_t ch = 0; ch < c; ++ch) yo[ch * gh * gw] = at(x + (b * c + ch) * h * w, iy, ix);
          continue;
        }
        const int64_t x0 = static_cast<int64_t>(std::floor(px)), y0 = static_cast<int64_t>(std::floor(py));
        const float fx = static_cast<float>(px - x0), fy = static_cast<float>(py - y0);
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* plane = x + (b * c + ch) * h * w;
          yo[ch * gh * gw] = at(plane, y0, x0) * (1 - fx) * (1 - fy) + at(plane, y0, x0 + 1) * fx * (1 - fy) +
                             at(plane, y0 + 1, x0) * (1 - fx) * fy + at(plane, y0 + 1, x0 + 1) * fx * fy;
        }
      }
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_upsample.inc"

}  // namespace kernels
}  // namespace executorch
