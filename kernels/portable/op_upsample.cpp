// 2-D upsampling of float32 NCHW tensors (16-bit floats widened): nearest and bilinear (.vec overloads).
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

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_upsample.inc"

}  // namespace kernels
}  // namespace executorch
