// NHWC float convolution and fully connected drivers: indirect GEMM (each output pixel's taps are
// row pointers into the input, padding taps point at a zero row) and a depthwise sweep, both
// over pre-packed weights, tiles handed out over the thread pool.
#include "kernels/cpu/conv_nhwc.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/gemm_split.h"
#include "kernels/cpu/nhwc_dw_driver.h"
#include "kernels/cpu/nhwc_gemm_rows.h"
#include "kernels/cpu/nhwc_ukernels.h"
#include "kernels/cpu/parallel.h"

namespace executorch {
namespace kernels {
namespace cpu {

bool ConvNhwc::valid() const {
  constexpr int64_t kMax = int64_t(1) << 24;
  const int64_t positive[] = {kernel_h,   kernel_w, stride_h,          stride_w,          dilation_h,
                              dilation_w, groups,   group_in_channels, group_out_channels};
  for (int64_t v : positive)
    if (v < 1 || v > kMax) return false;
  for (int64_t v : {pad_top, pad_left, pad_bottom, pad_right})
    if (v < 0 || v > kMax) return false;
  // Each output channel's reduction, and the whole weight tensor, stay far from int64 overflow.
  const int64_t reduction = kernel_h * kernel_w * group_in_channels;
  return kernel_h * kernel_w <= kMax && in_channels() <= kMax && out_channels() <= kMax && reduction <= kMax &&
         out_channels() * reduction <= (int64_t(1) << 40);
}

namespace {

using ukernel::F32DwTile;
using ukernel::F32GemmTile;
using ukernel::kMaxMR;
using ukernel::kTapChunk;

constexpr uint32_t kMagic = 0x32334e43;  // "CN32"
enum Kind : int32_t { kGemm = 1, kDepthwise = 2, kWinograd = 3 };

// At the start of every packed buffer; weights follow at kHeaderBytes, then the zero row.
struct Header {
  uint32_t magic;
  int32_t isa, kind, width;  // width: NR of the GEMM kernel, or the depthwise channel block
  int64_t groups, cg, ocg, ks;
  int64_t weight_floats, zero_floats;
};
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(Header) <= kHeaderBytes, "header fits its slot");

// Multiply-adds one task should hold at least, so handing it to a thread pays off (GEMM tasks
// grow with the product: gemm_split.h's task_macs_for).
constexpr int64_t kTaskMacs = int64_t(1) << 16;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Kernels {
  ukernel::F32Geometry geo;
  void (*gemm)(const F32GemmTile&);
  void (*dw)(const F32DwTile&);
  ukernel::F32GemmBlocksFn gemm_blocks;  // a tile over several blocks; null: gemm per block
  ukernel::F32WinoInFn wino_in;
  ukernel::F32WinoOutFn wino_out;
};

bool kernels_for(Isa isa, Kernels* k) {
  if (!float_isa_supported(isa)) return false;
  switch (isa) {
#ifdef ET_NHWC_X86
    case Isa::kAvx512:
      *k = {ukernel::kF32Avx512,         ukernel::f32_gemm_avx512,
            ukernel::f32_dw_avx512,      ukernel::f32_gemm_blocks_avx512,
            ukernel::f32_wino_in_avx512, ukernel::f32_wino_out_avx512};
      return true;
    case Isa::kAvx2:
      *k = {ukernel::kF32Avx2, ukernel::f32_gemm_avx2,    ukernel::f32_dw_avx2,
            nullptr,           ukernel::f32_wino_in_avx2, ukernel::f32_wino_out_avx2};
      return true;
#endif
    case Isa::kBaseline:
      *k = {ukernel::kF32Baseline,         ukernel::f32_gemm_baseline,    ukernel::f32_dw_baseline, nullptr,
            ukernel::f32_wino_in_baseline, ukernel::f32_wino_out_baseline};
      return true;
    default: return false;
  }
}

// Tile `t` (t.nr columns in all; w, init and c at its first block) over `blocks` consecutive
// NR-column blocks, block_floats apart: one multi-block call where the ISA has one and it pays
// (several blocks, or a one-row tile), else one call per block. The same bits either way.
void gemm_over_blocks(const Kernels& k, const F32GemmTile& t, int64_t NR, int64_t blocks, int64_t block_floats) {
  if (k.gemm_blocks != nullptr && (blocks > 1 || t.mr == 1)) {
    k.gemm_blocks(t, blocks, block_floats);
    return;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    F32GemmTile p = t;
    p.nr = std::min(NR, t.nr - b * NR);
    p.w = t.w + b * block_floats;
    p.init = t.init != nullptr ? t.init + b * block_floats : nullptr;
    p.c = t.c + b * NR;
    k.gemm(p);
  }
}

bool is_depthwise(const ConvNhwc& c) { return c.group_in_channels == 1 && c.group_out_channels == 1; }

// Element (oc, tap, i) of a weight tensor is weight[oc * os + tap * ts + i * is].
struct WeightView {
  const float* data;
  int64_t os, ts, is;
  float at(int64_t oc, int64_t tap, int64_t i) const { return data[oc * os + tap * ts + i * is]; }
};

// Winograd F(2x2, 3x3) (nhwc_winograd.h): the input channels one pass transforms, the output
// channels one task accumulates. A task keeps both on its stack: 16 positions x kMaxMR tiles x
// kWinoKc transformed inputs, and as many sums per output channel of its columns.
constexpr int64_t kWinoKc = 64, kWinoCols = 64;
constexpr int64_t kWinoPos = 16;

// Fills `h` for a geometry; false when it cannot be packed.
bool plan(int64_t groups, int64_t cg, int64_t ocg, int64_t ks, Kind kind, Isa isa, Header* h) {
  Kernels k;
  if (!kernels_for(isa, &k)) return false;
  h->magic = kMagic;
  h->isa = static_cast<int32_t>(isa);
  h->kind = kind;
  h->groups = groups;
  h->cg = cg;
  h->ocg = ocg;
  h->ks = ks;
  if (kind == kWinograd) {
    // A GEMM's packing with one group per grid position (a reduction of cg, no taps); the zero
    // row stands in for input pixels in the padding, one pass of channels long.
    h->width = k.geo.nr;
    if (h->width > kWinoCols) return false;  // a task's buffer holds one span of columns
    h->weight_floats = kWinoPos * ceil_div(ocg, h->width) * h->width * (1 + cg);
    h->zero_floats = kWinoKc;
    return true;
  }
  if (kind == kDepthwise) {
    h->width = k.geo.dw_cb;
    h->weight_floats = ceil_div(groups, h->width) * h->width * (ks + 1);
    h->zero_floats = groups;
  } else {
    h->width = k.geo.nr;
    h->weight_floats = groups * ceil_div(ocg, h->width) * h->width * (1 + ks * cg);
    h->zero_floats = ks * cg;  // a whole merged kernel row (see merge_rows) reads this many
  }
  return true;
}

size_t packed_bytes(const Header& h) {
  return kHeaderBytes + static_cast<size_t>(h.weight_floats + h.zero_floats) * sizeof(float);
}

void pack_winograd(const Header& h, WeightView w, const float* bias, void* packed);

void pack(const Header& h, WeightView w, const float* bias, void* packed) {
  std::memset(packed, 0, packed_bytes(h));
  std::memcpy(packed, &h, sizeof(h));
  float* dst = reinterpret_cast<float*>(static_cast<char*>(packed) + kHeaderBytes);
  const int64_t width = h.width;
  if (h.kind == kWinograd) {
    pack_winograd(h, w, bias, packed);
    return;
  }
  if (h.kind == kDepthwise) {
    for (int64_t c0 = 0; c0 < h.groups; c0 += width, dst += width * (h.ks + 1)) {
      const int64_t cn = std::min(width, h.groups - c0);
      for (int64_t c = 0; c < cn; ++c) {
        dst[c] = bias ? bias[c0 + c] : 0.f;
        for (int64_t t = 0; t < h.ks; ++t) dst[width * (t + 1) + c] = w.at(c0 + c, t, 0);
      }
    }
    return;
  }
  for (int64_t g = 0; g < h.groups; ++g) {
    for (int64_t j0 = 0; j0 < h.ocg; j0 += width, dst += width * (1 + h.ks * h.cg)) {
      const int64_t nr = std::min(width, h.ocg - j0);
      for (int64_t j = 0; j < nr; ++j) {
        const int64_t oc = g * h.ocg + j0 + j;
        dst[j] = bias ? bias[oc] : 0.f;
        for (int64_t t = 0; t < h.ks; ++t)
          for (int64_t i = 0; i < h.cg; ++i) dst[width * (1 + t * h.cg + i) + j] = w.at(oc, t, i);
      }
    }
  }
}

// U = G g G^T for every (output, input) channel pair, in double and rounded once, packed as a
// GEMM with grid position p as group p; the bias is the start of position 5's sums, which the
// output transform adds to all four outputs of a tile with weight 1 (A^T's column 1 is all ones).
void pack_winograd(const Header& h, WeightView w, const float* bias, void* packed) {
  const int64_t cg = h.cg, ocg = h.ocg;
  std::vector<float> u(static_cast<size_t>(kWinoPos * ocg * cg));
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  for (int64_t o = 0; o < ocg; ++o) {
    for (int64_t i = 0; i < cg; ++i) {
      double g[3][3], gg[4][3];
      for (int t = 0; t < 9; ++t) g[t / 3][t % 3] = w.at(o, t, i);
      for (int a = 0; a < 4; ++a)
        for (int j = 0; j < 3; ++j) gg[a][j] = G[a][0] * g[0][j] + G[a][1] * g[1][j] + G[a][2] * g[2][j];
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b)
          u[static_cast<size_t>(((a * 4 + b) * ocg + o) * cg + i)] =
              static_cast<float>(gg[a][0] * G[b][0] + gg[a][1] * G[b][1] + gg[a][2] * G[b][2]);
    }
  }
  Header gemm = h;
  gemm.kind = kGemm;
  gemm.groups = kWinoPos;
  gemm.ks = 1;
  pack(gemm, WeightView{u.data(), cg, 0, 1}, nullptr, packed);
  std::memcpy(packed, &h, sizeof(h));
  if (bias == nullptr) return;
  float* dst = reinterpret_cast<float*>(static_cast<char*>(packed) + kHeaderBytes);
  const int64_t blocks = ceil_div(ocg, h.width), block_floats = h.width * (1 + cg);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < std::min<int64_t>(h.width, ocg - b * h.width); ++j)
      dst[(5 * blocks + b) * block_floats + j] = bias[b * h.width + j];
}

// The header of a packed buffer, when it is one of ours.
const Header* header_of(const void* packed) {
  const Header* h = static_cast<const Header*>(packed);
  return packed != nullptr && h->magic == kMagic ? h : nullptr;
}

const float* weights_of(const void* packed) {
  return reinterpret_cast<const float*>(static_cast<const char*>(packed) + kHeaderBytes);
}

// Floats of the per-task stack buffer that holds merged kernel rows patched with zero padding.
constexpr int64_t kPatchFloats = 8192;

// Indirect GEMM over M output rows: rows(r0, mr, tap0, taps, g, a, patch) fills the row pointers
// of one tile (see nhwc_gemm_rows.h; patch has room for kTapChunk * kMaxMR runs of kc floats).
// Tasks are (group, span of MR-row tiles, span of NR-column blocks), split by gemm_split.h.
template <typename Rows>
void run_gemm(const Header& h, const Kernels& k, const float* w, int64_t m, float* out, int64_t out_stride,
              float out_min, float out_max, const Rows& rows) {
  const int64_t MR = k.geo.mr, NR = h.width;
  const int64_t blocks = ceil_div(h.ocg, NR), tiles = ceil_div(m, MR);
  const RowTiles row_tiles(m, tiles);
  const int64_t block_floats = NR * (1 + h.ks * h.cg);
  // A one-row tile (a classifier, a decode step) runs four column blocks at once: its tasks
  // take blocks in fours.
  const GemmSplit split(h.groups, m, h.ocg, tiles, blocks, MR * h.ks * h.cg * NR,
                        task_macs_for(m, h.groups * h.ocg * h.ks * h.cg, kTaskMacs), m == 1 ? 4 : 1,
                        h.groups * h.ocg * h.ks * h.cg * int64_t(sizeof(float)));
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // When a tile's column blocks are split over several tasks, each would build the same row
  // pointers: one set kept here is reused by whichever thread holds it next (on one thread, every
  // task), keyed by the tile it was built for. The pointers are the same whoever builds them.
  struct Built {
    std::atomic<bool> busy{false};
    int64_t g = -1, tile = -1, tap0 = -1;
    const float* a[kTapChunk * kMaxMR];
    float patch[kPatchFloats];
  };
  Built shared;
  parallel_for(0, split.tasks, 1, [&](int64_t t0, int64_t t1) {
    const float* own_a[kTapChunk * kMaxMR];
    float own_patch[kPatchFloats];
    // Column-block-major tasks change tile at every task: nothing to keep.
    const bool keep =
        split.block_tasks > 1 && !split.block_major && !shared.busy.exchange(true, std::memory_order_acquire);
    const float** a = keep ? shared.a : own_a;
    float* patch = keep ? shared.patch : own_patch;
    for (int64_t task = t0; task < t1; ++task) {
      const GemmSplit::Task st = split.at(task);
      const int64_t g = st.g, b0 = st.block0, b_end = st.block1;
      for (int64_t tile = st.tile0; tile < st.tile1; ++tile) {
        const int64_t r0 = row_tiles.begin(tile), mr = row_tiles.rows(tile);
        for (int64_t tap0 = 0; tap0 < h.ks; tap0 += kTapChunk) {
          const int64_t taps = std::min<int64_t>(kTapChunk, h.ks - tap0);
          const bool last = tap0 + taps == h.ks;
          if (!keep || shared.g != g || shared.tile != tile || shared.tap0 != tap0) {
            rows(r0, mr, tap0, taps, g, a, patch);
            if (keep) shared.g = g, shared.tile = tile, shared.tap0 = tap0;
          }
          // The tile over column blocks [b0, b_end).
          const float* blk = w + (g * blocks + b0) * block_floats;
          F32GemmTile p;
          p.mr = mr;
          p.nr = std::min(h.ocg, b_end * NR) - b0 * NR;
          p.kc = h.cg;
          p.ks = taps;
          p.a = a;
          p.w = blk + NR * (1 + tap0 * h.cg);
          p.init = tap0 == 0 ? blk : nullptr;
          p.c = out + r0 * out_stride + g * h.ocg + b0 * NR;
          p.c_stride = out_stride;
          p.min = last ? out_min : -kInf;
          p.max = last ? out_max : kInf;
          gemm_over_blocks(k, p, NR, b_end - b0, block_floats);
        }
      }
    }
    if (keep) shared.busy.store(false, std::memory_order_release);
  });
}

void run_depthwise(const Header& h, const Kernels& k, const float* w, const ConvNhwc& c, int64_t batch, int64_t in_h,
                   int64_t in_w, const float* in, float* out, float out_min, float out_max) {
  F32DwTile t{};
  t.channels = h.groups;
  t.ks = h.ks;
  t.w = w;
  t.out_stride = h.groups;
  t.min = out_min;
  t.max = out_max;
  const int64_t cb = h.width;
  ukernel::depthwise_rows(
      c, batch, in_h, in_w, h.groups, in, out, w + h.weight_floats, kTaskMacs, cb, t,
      [&](int64_t c0) { return w + c0 / cb * cb * (h.ks + 1); }, k.dw);
}

// The depthwise sweep keeps one output chunk's tap pointers on the stack; larger filters (rare)
// take the GEMM path, which chunks its taps.
bool depthwise_fits(const ConvNhwc& c) { return c.kernel_h * c.kernel_w <= ukernel::kDwPtrs; }

// Whether a GEMM convolution reads each kernel row as one run of kernel_w * in_channels values:
// worth it when few channels make per-tap loops short (stems), possible without groups or
// horizontal dilation, and only while one tile's patched rows fit the stack buffer (its slots
// are laid out for kMaxMR rows, whatever the ISA's tile height).
bool merge_rows(const ConvNhwc& c) {
  return c.groups == 1 && c.dilation_w == 1 && c.kernel_w > 1 && c.group_in_channels < 32 && c.kernel_h <= kTapChunk &&
         kMaxMR * c.kernel_h * c.kernel_w * c.group_in_channels <= kPatchFloats;
}

// Winograd F(2x2, 3x3) for a dense 3x3 convolution at stride 1: 2.25 times fewer multiply-adds
// than the direct GEMM, for transforms that cost a few percent once a pass has 16 or more
// channels. Up to 256 x 256 channels: the transformed weights are 16/9 of the direct ones, and
// beyond that (ResNet's last stage, 7x7 images) streaming them costs more than the products save.
bool winograd_fits(const ConvNhwc& c) {
  return c.kernel_h == 3 && c.kernel_w == 3 && c.stride_h == 1 && c.stride_w == 1 && c.dilation_h == 1 &&
         c.dilation_w == 1 && c.groups == 1 && c.group_in_channels >= 16 && c.group_out_channels >= 16 &&
         c.group_in_channels * c.group_out_channels <= 256 * 256;
}

Kind kind_for(const ConvNhwc& c) {
  if (is_depthwise(c) && depthwise_fits(c)) return kDepthwise;
  return winograd_fits(c) ? kWinograd : kGemm;
}

// Tasks are (span of output columns, group of up to MR 2x2 tiles), column-span major so a thread
// keeps one span's transformed weights in its cache over its tiles. Per task and pass of kWinoKc
// input channels: the tiles' patches are transformed, then each of the 16 grid positions is one
// GEMM tile (the tiles' transformed rows against that position's weights), summed into the
// task's buffer; after the last pass the output transform writes the 2x2 tiles, clamped. Every
// sum runs in an order fixed by the shape, so any thread count gives the same bits.
void run_winograd(const Header& h, const Kernels& k, const float* w, const ConvNhwc& c, int64_t batch, int64_t in_h,
                  int64_t in_w, const float* in, float* out, float out_min, float out_max) {
  const int64_t oh = c.out_h(in_h), ow = c.out_w(in_w);
  const int64_t th = ceil_div(oh, 2), tw = ceil_div(ow, 2), tiles = batch * th * tw;
  const int64_t MR = k.geo.mr, NR = h.width, cin = h.cg, cout = h.ocg;
  const int64_t blocks = ceil_div(cout, NR), block_floats = NR * (1 + cin);
  const int64_t span_blocks = std::max<int64_t>(1, kWinoCols / NR);
  const int64_t spans = ceil_div(blocks, span_blocks), groups = ceil_div(tiles, MR);
  const RowTiles tile_groups(tiles, groups);
  const float* zero = w + h.weight_floats;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  parallel_for(0, spans * groups, 1, [&](int64_t t0, int64_t t1) {
    alignas(64) float v[kWinoPos * kMaxMR * kWinoKc];
    alignas(64) float m[kWinoPos * kMaxMR * kWinoCols];
    const float* src[kMaxMR][kWinoPos];  // each tile's patch pixels, or null in the padding
    int64_t tile_n[kMaxMR], tile_y[kMaxMR], tile_x[kMaxMR];
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t span = task / groups, group = task % groups;
      const int64_t b0 = span * span_blocks, b1 = std::min(blocks, b0 + span_blocks);
      const int64_t col0 = b0 * NR, cols = std::min(cout, b1 * NR) - col0;
      const int64_t first = tile_groups.begin(group), mr = tile_groups.rows(group);
      for (int64_t i = 0; i < mr; ++i) {
        const int64_t t = first + i, r = t % (th * tw);
        tile_n[i] = t / (th * tw), tile_y[i] = r / tw * 2, tile_x[i] = r % tw * 2;
        for (int p = 0; p < kWinoPos; ++p) {
          const int64_t iy = tile_y[i] - c.pad_top + p / 4, ix = tile_x[i] - c.pad_left + p % 4;
          src[i][p] =
              iy >= 0 && iy < in_h && ix >= 0 && ix < in_w ? in + ((tile_n[i] * in_h + iy) * in_w + ix) * cin : nullptr;
        }
      }
      for (int64_t k0 = 0; k0 < cin; k0 += kWinoKc) {
        const int64_t kc = std::min(kWinoKc, cin - k0);
        for (int64_t i = 0; i < mr; ++i) {
          const float* at[kWinoPos];
          for (int p = 0; p < kWinoPos; ++p) at[p] = src[i][p] != nullptr ? src[i][p] + k0 : zero;
          k.wino_in(at, kc, v + i * kWinoKc, kMaxMR * kWinoKc);
        }
        for (int p = 0; p < kWinoPos; ++p) {
          const float* a[kMaxMR];
          for (int64_t i = 0; i < mr; ++i) a[i] = v + (p * kMaxMR + i) * kWinoKc;
          const float* blk = w + (p * blocks + b0) * block_floats;
          ukernel::F32GemmTile g;
          g.mr = mr;
          g.kc = kc;
          g.ks = 1;
          g.a = a;
          g.c_stride = kWinoCols;
          g.min = -kInf;
          g.max = kInf;
          g.nr = cols;
          g.w = blk + NR * (1 + k0);
          g.init = k0 == 0 ? blk : nullptr;
          g.c = m + p * kMaxMR * kWinoCols;
          gemm_over_blocks(k, g, NR, b1 - b0, block_floats);
        }
      }
      for (int64_t i = 0; i < mr; ++i) {
        float* dst[4];
        for (int q = 0; q < 4; ++q) {
          const int64_t oy = tile_y[i] + q / 2, ox = tile_x[i] + q % 2;
          dst[q] = oy < oh && ox < ow ? out + ((tile_n[i] * oh + oy) * ow + ox) * cout + col0 : nullptr;
        }
        k.wino_out(m + i * kWinoCols, kMaxMR * kWinoCols, cols, dst, out_min, out_max);
      }
    }
  });
}

}  // namespace

size_t conv2d_nhwc_f32_packed_bytes(const ConvNhwc& c, Isa isa) {
  Header h;
  if (!c.valid()) return 0;
  if (!plan(c.groups, c.group_in_channels, c.group_out_channels, c.kernel_h * c.kernel_w, kind_for(c), isa, &h))
    return 0;
  return packed_bytes(h);
}

bool conv2d_nhwc_f32_pack(const ConvNhwc& c, ConvWeights layout, const float* weight, const float* bias, Isa isa,
                          void* packed) {
  Header h;
  if (!c.valid() || weight == nullptr || packed == nullptr) return false;
  if (layout == ConvWeights::kHwo && c.group_in_channels != 1) return false;
  const int64_t ks = c.kernel_h * c.kernel_w;
  if (!plan(c.groups, c.group_in_channels, c.group_out_channels, ks, kind_for(c), isa, &h)) return false;
  const WeightView view = layout == ConvWeights::kOhwi
                              ? WeightView{weight, ks * c.group_in_channels, c.group_in_channels, 1}
                              : WeightView{weight, 1, c.out_channels(), 0};
  pack(h, view, bias, packed);
  return true;
}

bool conv2d_nhwc_f32(const ConvNhwc& c, const void* packed, int64_t batch, int64_t in_h, int64_t in_w, const float* in,
                     float* out, float out_min, float out_max) {
  const Header* h = header_of(packed);
  Kernels k;
  if (h == nullptr || !c.valid() || !kernels_for(static_cast<Isa>(h->isa), &k)) return false;
  const int64_t ks = c.kernel_h * c.kernel_w;
  if (h->groups != c.groups || h->cg != c.group_in_channels || h->ocg != c.group_out_channels || h->ks != ks)
    return false;
  const int64_t oh = c.out_h(in_h), ow = c.out_w(in_w);
  if (batch <= 0 || oh <= 0 || ow <= 0) return false;
  const float* w = weights_of(packed);
  if (h->kind == kDepthwise) {
    run_depthwise(*h, k, w, c, batch, in_h, in_w, in, out, out_min, out_max);
    return true;
  }
  if (h->kind == kWinograd) {
    if (!winograd_fits(c)) return false;
    run_winograd(*h, k, w, c, batch, in_h, in_w, in, out, out_min, out_max);
    return true;
  }
  const float* zero = w + h->weight_floats;
  const int64_t m = batch * oh * ow;
  if (merge_rows(c)) {
    // Few input channels: a kernel row's taps are adjacent pixels, i.e. one contiguous run of
    // kernel_w * cin floats, and the packed weights of those taps are already in that order.
    Header merged = *h;
    merged.ks = c.kernel_h;
    merged.cg = c.kernel_w * c.group_in_channels;
    run_gemm(merged, k, w, m, out, c.out_channels(), out_min, out_max,
             ukernel::ConvRows<float>(c, in_h, in_w, in, zero, true, 0.f));
    return true;
  }
  if (c.pointwise()) {
    run_gemm(*h, k, w, m, out, c.out_channels(), out_min, out_max,
             ukernel::MatrixRows<float>{in, c.in_channels(), c.group_in_channels});
    return true;
  }
  run_gemm(*h, k, w, m, out, c.out_channels(), out_min, out_max,
           ukernel::ConvRows<float>(c, in_h, in_w, in, zero, false, 0.f));
  return true;
}

bool conv2d_nhwc_f32_dw_pw(const ConvNhwc& dw, const void* dw_packed, float dw_min, float dw_max, const ConvNhwc& pw,
                           const void* pw_packed, int64_t batch, int64_t in_h, int64_t in_w, const float* in,
                           float* mid, float* out, float out_min, float out_max) {
  const Header* hd = header_of(dw_packed);
  const Header* hp = header_of(pw_packed);
  Kernels kd, kp;
  if (hd == nullptr || hp == nullptr || hd->kind != kDepthwise || hp->kind != kGemm || !dw.valid() || !pw.valid() ||
      !pw.pointwise() || pw.groups != 1 || hd->groups != dw.groups || hd->ks != dw.kernel_h * dw.kernel_w ||
      !is_depthwise(dw) || hp->groups != 1 || hp->ks != 1 || hp->cg != dw.out_channels() ||
      hp->cg != pw.group_in_channels || hp->ocg != pw.group_out_channels ||
      !kernels_for(static_cast<Isa>(hd->isa), &kd) || !kernels_for(static_cast<Isa>(hp->isa), &kp))
    return false;
  const int64_t oh = dw.out_h(in_h), ow = dw.out_w(in_w), ch = hd->groups, cout = hp->ocg;
  if (batch <= 0 || oh <= 0 || ow <= 0 || ch > kDwPwMaxChannels) return false;
  if (batch * oh < kDwPwMinRows && mid != nullptr) {
    return conv2d_nhwc_f32(dw, dw_packed, batch, in_h, in_w, in, mid, dw_min, dw_max) &&
           conv2d_nhwc_f32(pw, pw_packed, batch, oh, ow, mid, out, out_min, out_max);
  }
  const float* wd = weights_of(dw_packed);
  const float* wp = weights_of(pw_packed);
  const int64_t NR = hp->width, blocks = ceil_div(cout, NR), block_floats = NR * (1 + ch);
  F32DwTile dt{};
  dt.w = wd;
  dt.ks = hd->ks;
  dt.min = dw_min;
  dt.max = dw_max;
  // Each row tile of depthwise output through the pointwise GEMM, over every column block.
  ukernel::depthwise_then_rows(dw, batch, in_h, in_w, ch, in, wd + hd->weight_floats, dt, kd.dw, kp.geo.mr,
                               [&](const float* const* a, int64_t mr, int64_t pixel) {
                                 F32GemmTile g;
                                 g.mr = mr;
                                 g.kc = ch;
                                 g.ks = 1;
                                 g.a = a;
                                 g.c_stride = cout;
                                 g.min = out_min;
                                 g.max = out_max;
                                 g.nr = cout;
                                 g.w = wp + NR;
                                 g.init = wp;
                                 g.c = out + pixel * cout;
                                 gemm_over_blocks(kp, g, NR, blocks, block_floats);
                               });
  return true;
}

size_t fully_connected_f32_packed_bytes(int64_t n, int64_t k, Isa isa) {
  ConvNhwc c;
  c.group_in_channels = k;
  c.group_out_channels = n;
  Header h;
  if (!c.valid() || !plan(1, k, n, 1, kGemm, isa, &h)) return 0;
  return packed_bytes(h);
}

bool fully_connected_f32_pack(int64_t n, int64_t k, const float* weight, bool weight_k_major, const float* bias,
                              Isa isa, void* packed) {
  ConvNhwc c;
  c.group_in_channels = k;
  c.group_out_channels = n;
  Header h;
  if (!c.valid() || weight == nullptr || packed == nullptr || !plan(1, k, n, 1, kGemm, isa, &h)) return false;
  pack(h, weight_k_major ? WeightView{weight, 1, 0, n} : WeightView{weight, k, 0, 1}, bias, packed);
  return true;
}

bool fully_connected_f32(const void* packed, int64_t m, const float* in, int64_t in_stride, float* out,
                         int64_t out_stride, float out_min, float out_max) {
  const Header* h = header_of(packed);
  Kernels k;
  if (h == nullptr || h->kind != kGemm || h->groups != 1 || h->ks != 1 || !kernels_for(static_cast<Isa>(h->isa), &k) ||
      m < 0)
    return false;
  run_gemm(*h, k, weights_of(packed), m, out, out_stride, out_min, out_max,
           ukernel::MatrixRows<float>{in, in_stride, 0});
  return true;
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
