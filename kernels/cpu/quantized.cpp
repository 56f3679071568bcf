// QS8 convolution, fully connected and add drivers: the same indirect GEMM and depthwise sweeps
// as conv_nhwc.cpp, over int8 weights packed with their corrected bias and requantization scale.
#include "kernels/cpu/quantized.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/gemm_split.h"
#include "kernels/cpu/nhwc_dw_driver.h"
#include "kernels/cpu/nhwc_gemm_rows.h"
#include "kernels/cpu/nhwc_ukernels.h"
#include "kernels/cpu/parallel.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

using ukernel::kMaxMR;
using ukernel::Qs8DwTile;
using ukernel::Qs8GemmTile;

constexpr uint32_t kMagic = 0x38534351;  // "QCS8"
enum Kind : int32_t { kGemm = 1, kDepthwise = 2 };
constexpr int64_t kMaxTaps = 256;
using ukernel::kDwPtrs;
constexpr int64_t kTaskMacs = int64_t(1) << 17;

struct Header {
  uint32_t magic;
  int32_t isa, kind, width, kr, input_offset, out_zero_point;
  int64_t groups, cg, ocg, ks, merged_kw;
  int64_t block_bytes, blocks_per_group, weight_bytes, zero_bytes;
};
constexpr size_t kHeaderBytes = 128;
static_assert(sizeof(Header) <= kHeaderBytes, "header fits its slot");

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Kernels {
  ukernel::Qs8Geometry geo;
  int32_t input_offset;
  void (*gemm)(const Qs8GemmTile&);
  void (*dw)(const Qs8DwTile&);
  void (*add)(int64_t, const int8_t*, const int8_t*, int8_t*, const ukernel::Qs8AddParams&);
};

bool kernels_for(Isa isa, Kernels* k) {
  if (!int8_isa_supported(isa)) return false;
  switch (isa) {
#ifdef ET_NHWC_X86
    case Isa::kAvx512:
      *k = {ukernel::kQs8Avx512, ukernel::kQs8Avx512InputOffset, ukernel::qs8_gemm_avx512, ukernel::qs8_dw_avx512,
            ukernel::qs8_add_avx512};
      return true;
    case Isa::kAvx2:
      *k = {ukernel::kQs8Avx2, 0, ukernel::qs8_gemm_avx2, ukernel::qs8_dw_avx2, ukernel::qs8_add_avx2};
      return true;
#endif
    case Isa::kBaseline:
      *k = {ukernel::kQs8Baseline, 0, ukernel::qs8_gemm_baseline, ukernel::qs8_dw_baseline, ukernel::qs8_add_baseline};
      return true;
    default: return false;
  }
}

// Element (oc, tap, i) of a weight tensor is data[oc * os + tap * ts + i * is].
struct WeightView {
  const int8_t* data;
  int64_t os, ts, is;
  int32_t at(int64_t oc, int64_t tap, int64_t i) const { return data[oc * os + tap * ts + i * is]; }
};

bool plan(int64_t groups, int64_t cg, int64_t ocg, int64_t ks, bool depthwise, Isa isa, Header* h) {
  Kernels k;
  if (!kernels_for(isa, &k)) return false;
  std::memset(h, 0, sizeof(*h));
  h->magic = kMagic;
  h->isa = static_cast<int32_t>(isa);
  h->kind = depthwise ? kDepthwise : kGemm;
  h->groups = groups;
  h->cg = cg;
  h->ocg = ocg;
  h->ks = ks;
  h->merged_kw = 1;
  if (depthwise) {
    if (ks > kDwPtrs) return false;
    h->width = k.geo.dw_cb;
    h->kr = 1;
    h->block_bytes = int64_t(4) * h->width * (ks + 2);
    h->blocks_per_group = 0;
    h->weight_bytes = ceil_div(groups, h->width) * h->block_bytes;
    h->zero_bytes = groups;
  } else {
    if (ks > kMaxTaps) return false;
    h->width = k.geo.nr;
    h->kr = k.geo.kr;
    h->input_offset = k.input_offset;
    const int64_t kcp = ceil_div(cg, h->kr) * h->kr;
    h->block_bytes = int64_t(8) * h->width + ks * kcp * h->width;
    h->blocks_per_group = ceil_div(ocg, h->width);
    h->weight_bytes = groups * h->blocks_per_group * h->block_bytes;
    h->zero_bytes = cg;
  }
  return true;
}

size_t packed_bytes(const Header& h) { return kHeaderBytes + static_cast<size_t>(h.weight_bytes + h.zero_bytes); }

bool scales_ok(const Qs8ConvQuant& q, int64_t out_channels) {
  if (q.weight_scales == nullptr || !(q.in_scale > 0.f) || !std::isfinite(q.in_scale) || !(q.out_scale > 0.f) ||
      !std::isfinite(q.out_scale) || q.in_zero_point < -128 || q.in_zero_point > 127 || q.out_zero_point < -128 ||
      q.out_zero_point > 127)
    return false;
  for (int64_t oc = 0; oc < out_channels; ++oc) {
    const float s = q.in_scale * q.weight_scales[oc] / q.out_scale;
    if (!(s > 0.f) || !std::isfinite(s)) return false;
  }
  return true;
}

void store_i32(char* p, int32_t v) { std::memcpy(p, &v, 4); }
void store_f32(char* p, float v) { std::memcpy(p, &v, 4); }

void pack(const Header& h, WeightView w, const int32_t* bias, const Qs8ConvQuant& q, void* packed) {
  std::memset(packed, 0, packed_bytes(h));
  Header stored = h;
  stored.out_zero_point = q.out_zero_point;
  std::memcpy(packed, &stored, sizeof(stored));
  char* dst = static_cast<char*>(packed) + kHeaderBytes;
  std::memset(dst + h.weight_bytes, static_cast<int8_t>(q.in_zero_point), h.zero_bytes);
  const int64_t width = h.width;
  const bool simd = h.isa != static_cast<int32_t>(Isa::kBaseline);
  if (h.kind == kDepthwise) {
    for (int64_t c0 = 0; c0 < h.groups; c0 += width, dst += h.block_bytes) {
      for (int64_t c = 0; c < std::min(width, h.groups - c0); ++c) {
        int64_t sum = 0;
        for (int64_t t = 0; t < h.ks; ++t) {
          const int32_t v = w.at(c0 + c, t, 0);
          sum += v;
          store_i32(dst + 4 * (width * (t + 2) + c), simd ? static_cast<int32_t>(static_cast<uint16_t>(v)) : v);
        }
        const int64_t b = (bias ? bias[c0 + c] : 0) - int64_t(q.in_zero_point) * sum;
        store_i32(dst + 4 * c, static_cast<int32_t>(b));
        store_f32(dst + 4 * (width + c), q.in_scale * q.weight_scales[c0 + c] / q.out_scale);
      }
    }
    return;
  }
  const int64_t kr = h.kr, steps = ceil_div(h.cg, kr);
  for (int64_t g = 0; g < h.groups; ++g) {
    for (int64_t j0 = 0; j0 < h.ocg; j0 += width, dst += h.block_bytes) {
      int8_t* wd = reinterpret_cast<int8_t*>(dst + 8 * width);
      for (int64_t j = 0; j < std::min(width, h.ocg - j0); ++j) {
        const int64_t oc = g * h.ocg + j0 + j;
        int64_t sum = 0;
        for (int64_t t = 0; t < h.ks; ++t)
          for (int64_t i = 0; i < h.cg; ++i) {
            const int32_t v = w.at(oc, t, i);
            sum += v;
            const int64_t s = i / kr, r = i % kr;
            // AVX2 pairs channels (j, j + 4) in one vector: j's slot order is 0,2,4,6,1,3,5,7.
            const int64_t slot = h.isa == static_cast<int32_t>(Isa::kAvx2) ? (j % 4) * 2 + j / 4 : j;
            wd[((t * steps + s) * width + slot) * kr + r] = static_cast<int8_t>(v);
          }
        const int64_t b = (bias ? bias[oc] : 0) - (int64_t(q.in_zero_point) + h.input_offset) * sum;
        store_i32(dst + 4 * j, static_cast<int32_t>(b));
        store_f32(dst + 4 * (width + j), q.in_scale * q.weight_scales[oc] / q.out_scale);
      }
    }
  }
}

const Header* header_of(const void* packed) {
  const Header* h = static_cast<const Header*>(packed);
  return packed != nullptr && h->magic == kMagic ? h : nullptr;
}

const char* weights_of(const void* packed) { return static_cast<const char*>(packed) + kHeaderBytes; }

ukernel::Qs8Requant requant(int8_t out_min, int8_t out_max, int32_t zp) {
  return {static_cast<float>(out_min - zp), static_cast<float>(out_max - zp), zp};
}

// Bytes of the per-task stack buffer that holds merged kernel rows patched with padding.
constexpr int64_t kPatchBytes = 8192;

// As in conv_nhwc.cpp: with few input channels a kernel row's taps are one contiguous run of
// kernel_w * in_channels bytes, packed as one reduction (padded once to the kernel's step); the
// patch slots are laid out for kMaxMR rows whatever the ISA's tile height.
bool merge_rows(const ConvNhwc& c) {
  return c.groups == 1 && c.dilation_w == 1 && c.kernel_w > 1 && c.group_in_channels < 32 &&
         kMaxMR * c.kernel_h * (c.kernel_w * c.group_in_channels + 8) <= kPatchBytes;
}

// The kernel-row count to merge for `c` on `isa` (1: none).
int64_t merged_kw(const ConvNhwc& c, Isa isa) {
  Kernels k;
  return kernels_for(isa, &k) && merge_rows(c) ? c.kernel_w : 1;
}

// Indirect GEMM over M output rows: rows(r0, mr, 0, ks, g, a, patch) fills the row pointers of
// one tile (see nhwc_gemm_rows.h). Tasks are (group, span of MR-row tiles, span of NR-column
// blocks).
template <typename Rows>
void run_gemm(const Header& h, const Kernels& k, const char* w, int64_t m, int8_t* out, int64_t out_stride,
              const ukernel::Qs8Requant& rq, const Rows& rows) {
  const int64_t MR = k.geo.mr, NR = h.width;
  const int64_t blocks = h.blocks_per_group, tiles = ceil_div(m, MR);
  const RowTiles row_tiles(m, tiles);
  const GemmSplit split(h.groups, m, h.ocg, tiles, blocks, MR * h.ks * h.cg * NR,
                        task_macs_for(m, h.groups * h.ocg * h.ks * h.cg, kTaskMacs), 1, h.groups * h.ocg * h.ks * h.cg);
  parallel_for(0, split.tasks, 1, [&](int64_t t0, int64_t t1) {
    const int8_t* a[kMaxTaps * kMaxMR];
    int8_t patch[kPatchBytes];
    for (int64_t task = t0; task < t1; ++task) {
      const GemmSplit::Task st = split.at(task);
      const int64_t g = st.g, b_end = st.block1;
      for (int64_t tile = st.tile0; tile < st.tile1; ++tile) {
        const int64_t r0 = row_tiles.begin(tile), mr = row_tiles.rows(tile);
        rows(r0, mr, 0, h.ks, g, a, patch);
        for (int64_t b = st.block0; b < b_end; ++b) {
          Qs8GemmTile p;
          p.mr = mr;
          p.nr = std::min(NR, h.ocg - b * NR);
          p.kc = h.cg;
          p.ks = h.ks;
          p.a = a;
          p.w = w + (g * blocks + b) * h.block_bytes;
          p.c = out + r0 * out_stride + g * h.ocg + b * NR;
          p.c_stride = out_stride;
          p.rq = rq;
          k.gemm(p);
        }
      }
    }
  });
}

void run_depthwise(const Header& h, const Kernels& k, const char* w, const ConvNhwc& c, int64_t batch, int64_t in_h,
                   int64_t in_w, const int8_t* in, int8_t* out, const ukernel::Qs8Requant& rq) {
  Qs8DwTile t{};
  t.channels = h.groups;
  t.ks = h.ks;
  t.w = w;
  t.out_stride = h.groups;
  t.rq = rq;
  const int64_t cb = h.width;
  ukernel::depthwise_rows(
      c, batch, in_h, in_w, h.groups, in, out, reinterpret_cast<const int8_t*>(w + h.weight_bytes), kTaskMacs, cb, t,
      [&](int64_t c0) { return w + c0 / cb * h.block_bytes; }, k.dw);
}

bool is_depthwise(const ConvNhwc& c) { return c.group_in_channels == 1 && c.group_out_channels == 1; }

}  // namespace

size_t conv2d_nhwc_qs8_packed_bytes(const ConvNhwc& c, Isa isa) {
  Header h;
  if (!c.valid()) return 0;
  const int64_t mk = is_depthwise(c) ? 1 : merged_kw(c, isa);
  if (!plan(c.groups, c.group_in_channels * mk, c.group_out_channels, c.kernel_h * c.kernel_w / mk, is_depthwise(c),
            isa, &h))
    return 0;
  return packed_bytes(h);
}

bool conv2d_nhwc_qs8_pack(const ConvNhwc& c, ConvWeights layout, const int8_t* weight, const int32_t* bias,
                          const Qs8ConvQuant& q, Isa isa, void* packed) {
  Header h;
  if (!c.valid() || weight == nullptr || packed == nullptr || !scales_ok(q, c.out_channels())) return false;
  if (layout == ConvWeights::kHwo && c.group_in_channels != 1) return false;
  const int64_t ks = c.kernel_h * c.kernel_w, cg = c.group_in_channels;
  const int64_t mk = is_depthwise(c) ? 1 : merged_kw(c, isa);
  if (!plan(c.groups, cg * mk, c.group_out_channels, ks / mk, is_depthwise(c), isa, &h)) return false;
  h.merged_kw = mk;
  WeightView view =
      layout == ConvWeights::kOhwi ? WeightView{weight, ks * cg, cg, 1} : WeightView{weight, 1, c.out_channels(), 0};
  if (mk > 1) {
    // Tap (kh, kw) channel i becomes reduction index kw * cg + i of kernel row kh.
    view.is = cg == 1 ? view.ts : view.is;
    view.ts *= mk;
  }
  pack(h, view, bias, q, packed);
  return true;
}

bool conv2d_nhwc_qs8(const ConvNhwc& c, const void* packed, int64_t batch, int64_t in_h, int64_t in_w, const int8_t* in,
                     int8_t* out, int8_t out_min, int8_t out_max) {
  const Header* h = header_of(packed);
  Kernels k;
  if (h == nullptr || !c.valid() || !kernels_for(static_cast<Isa>(h->isa), &k)) return false;
  const int64_t ks = c.kernel_h * c.kernel_w, mk = h->merged_kw;
  if (h->groups != c.groups || h->cg != c.group_in_channels * mk || h->ocg != c.group_out_channels ||
      h->ks * mk != ks || out_min > out_max || (mk != 1 && mk != c.kernel_w))
    return false;
  const int64_t oh = c.out_h(in_h), ow = c.out_w(in_w);
  if (batch <= 0 || oh <= 0 || ow <= 0) return false;
  const char* w = weights_of(packed);
  const ukernel::Qs8Requant rq = requant(out_min, out_max, h->out_zero_point);
  if (h->kind == kDepthwise) {
    run_depthwise(*h, k, w, c, batch, in_h, in_w, in, out, rq);
    return true;
  }
  const int8_t* zero = reinterpret_cast<const int8_t*>(w + h->weight_bytes);
  const int64_t m = batch * oh * ow;
  if (c.pointwise()) {
    run_gemm(*h, k, w, m, out, c.out_channels(), rq,
             ukernel::MatrixRows<int8_t>{in, c.in_channels(), c.group_in_channels});
    return true;
  }
  run_gemm(*h, k, w, m, out, c.out_channels(), rq, ukernel::ConvRows<int8_t>(c, in_h, in_w, in, zero, mk > 1, zero[0]));
  return true;
}

bool conv2d_nhwc_qs8_dw_pw(const ConvNhwc& dw, const void* dw_packed, int8_t dw_min, int8_t dw_max, const ConvNhwc& pw,
                           const void* pw_packed, int64_t batch, int64_t in_h, int64_t in_w, const int8_t* in,
                           int8_t* mid, int8_t* out, int8_t out_min, int8_t out_max) {
  const Header* hd = header_of(dw_packed);
  const Header* hp = header_of(pw_packed);
  Kernels kd, kp;
  if (hd == nullptr || hp == nullptr || hd->kind != kDepthwise || hp->kind != kGemm || !dw.valid() || !pw.valid() ||
      !pw.pointwise() || pw.groups != 1 || !is_depthwise(dw) || hd->groups != dw.groups ||
      hd->ks != dw.kernel_h * dw.kernel_w || hp->groups != 1 || hp->ks != 1 || hp->merged_kw != 1 ||
      hp->cg != dw.out_channels() || hp->cg != pw.group_in_channels || hp->ocg != pw.group_out_channels ||
      dw_min > dw_max || out_min > out_max || !kernels_for(static_cast<Isa>(hd->isa), &kd) ||
      !kernels_for(static_cast<Isa>(hp->isa), &kp))
    return false;
  const int64_t oh = dw.out_h(in_h), ow = dw.out_w(in_w), ch = hd->groups, cout = hp->ocg;
  if (batch <= 0 || oh <= 0 || ow <= 0 || ch > kDwPwMaxChannels) return false;
  if (batch * oh < kDwPwMinRows && mid != nullptr) {
    return conv2d_nhwc_qs8(dw, dw_packed, batch, in_h, in_w, in, mid, dw_min, dw_max) &&
           conv2d_nhwc_qs8(pw, pw_packed, batch, oh, ow, mid, out, out_min, out_max);
  }
  const char* wd = weights_of(dw_packed);
  const char* wp = weights_of(pw_packed);
  const int64_t NR = hp->width, blocks = hp->blocks_per_group;
  Qs8DwTile dt{};
  dt.ks = hd->ks;
  dt.w = wd;
  dt.rq = requant(dw_min, dw_max, hd->out_zero_point);
  const ukernel::Qs8Requant rq = requant(out_min, out_max, hp->out_zero_point);
  ukernel::depthwise_then_rows(dw, batch, in_h, in_w, ch, in, reinterpret_cast<const int8_t*>(wd + hd->weight_bytes),
                               dt, kd.dw, kp.geo.mr, [&](const int8_t* const* a, int64_t mr, int64_t pixel) {
                                 for (int64_t b = 0; b < blocks; ++b) {
                                   Qs8GemmTile p;
                                   p.mr = mr;
                                   p.nr = std::min(NR, cout - b * NR);
                                   p.kc = ch;
                                   p.ks = 1;
                                   p.a = a;
                                   p.w = wp + b * hp->block_bytes;
                                   p.c = out + pixel * cout + b * NR;
                                   p.c_stride = cout;
                                   p.rq = rq;
                                   kp.gemm(p);
                                 }
                               });
  return true;
}

size_t fully_connected_qs8_packed_bytes(int64_t n, int64_t k, Isa isa) {
  ConvNhwc c;
  c.group_in_channels = k;
  c.group_out_channels = n;
  Header h;
  if (!c.valid() || !plan(1, k, n, 1, false, isa, &h)) return 0;
  return packed_bytes(h);
}

bool fully_connected_qs8_pack(int64_t n, int64_t k, const int8_t* weight, bool weight_k_major, const int32_t* bias,
                              const Qs8ConvQuant& q, Isa isa, void* packed) {
  ConvNhwc c;
  c.group_in_channels = k;
  c.group_out_channels = n;
  Header h;
  if (!c.valid() || weight == nullptr || packed == nullptr || !scales_ok(q, n) || !plan(1, k, n, 1, false, isa, &h))
    return false;
  pack(h, weight_k_major ? WeightView{weight, 1, 0, n} : WeightView{weight, k, 0, 1}, bias, q, packed);
  return true;
}

bool fully_connected_qs8(const void* packed, int64_t m, const int8_t* in, int64_t in_stride, int8_t* out,
                         int64_t out_stride, int8_t out_min, int8_t out_max) {
  const Header* h = header_of(packed);
  Kernels k;
  if (h == nullptr || h->kind != kGemm || h->groups != 1 || h->ks != 1 || m < 0 || out_min > out_max ||
      !kernels_for(static_cast<Isa>(h->isa), &k))
    return false;
  run_gemm(*h, k, weights_of(packed), m, out, out_stride, requant(out_min, out_max, h->out_zero_point),
           ukernel::MatrixRows<int8_t>{in, in_stride, 0});
  return true;
}

bool add_qs8(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddQuant& q, int8_t out_min,
             int8_t out_max, Isa isa) {
  Kernels k;
  if (n < 0 || out_min > out_max || !kernels_for(isa, &k)) return false;
  for (int32_t zp : {q.a_zero_point, q.b_zero_point, q.out_zero_point})
    if (zp < -128 || zp > 127) return false;
  const float sa = q.a_scale / q.out_scale, sb = q.b_scale / q.out_scale;
  if (!(sa > 0.f) || !(sb > 0.f) || !std::isfinite(sa) || !std::isfinite(sb)) return false;
  const float top = std::max(sa, sb);
  if (top >= float(1 << 20)) return false;
  // XNNPACK's choice: 20 bits below the larger ratio's leading bit, multipliers rounded half to
  // even (so a multiplier can reach 2^21 exactly).
  int exponent = 0;
  std::frexp(top, &exponent);
  const int32_t shift = std::max(1, std::min(30, 21 - exponent));
  ukernel::Qs8AddParams p;
  p.a_zero_point = q.a_zero_point;
  p.b_zero_point = q.b_zero_point;
  p.a_mul = static_cast<int32_t>(std::nearbyint(std::ldexp(double(sa), shift)));
  p.b_mul = static_cast<int32_t>(std::nearbyint(std::ldexp(double(sb), shift)));
  p.shift = shift;
  p.out_zero_point = q.out_zero_point;
  p.out_min = out_min;
  p.out_max = out_max;
  // Fixed chunks so any thread count cuts the same way (each element is independent anyway);
  // small enough that a 28x28x32 residual add splits in several.
  constexpr int64_t kChunk = int64_t(1) << 13;
  parallel_for(0, n, kChunk, [&](int64_t i0, int64_t i1) { k.add(i1 - i0, a + i0, b + i0, out + i0, p); });
  return true;
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
