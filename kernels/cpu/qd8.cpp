// QD8 fully connected: per-row dynamic quantization of the float input, then an int8 GEMM whose
// per-group integer sums are scaled back to float in the micro-kernel (see quantized.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/gemm_split.h"
#include "kernels/cpu/nhwc_ukernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quantized.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

using ukernel::Qd8GemmTile;

constexpr uint32_t kMagic = 0x38444451;  // "QDD8"
constexpr size_t kHeaderBytes = 64;
constexpr int64_t kTaskMacs = int64_t(1) << 17;

struct Header {
  uint32_t magic;
  int32_t isa, nr, kr;
  int32_t nibbles;  // 1: 4-bit groups kept as nibbles (see ukernel::kQd8NibbleMaxGroup)
  int64_t n, k, group, block_bytes;
};
static_assert(sizeof(Header) <= kHeaderBytes, "header fits its slot");

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Kernels {
  ukernel::Qs8Geometry geo;
  void (*gemm)(const Qd8GemmTile&);
  void (*gemm_nibbles)(const Qd8GemmTile&);  // null where the ISA has no nibble layout
};

bool kernels_for(Isa isa, Kernels* k) {
  if (!int8_isa_supported(isa)) return false;
  switch (isa) {
#ifdef ET_NHWC_X86
    case Isa::kAvx512:
      *k = {ukernel::kQd8Avx512, ukernel::qd8_gemm_avx512, ukernel::qd8_gemm_nibbles_avx512};
      return true;
    case Isa::kAvx2: *k = {ukernel::kQd8Avx2, ukernel::qd8_gemm_avx2, nullptr}; return true;
#endif
    case Isa::kBaseline: *k = {ukernel::kQd8Baseline, ukernel::qd8_gemm_baseline, nullptr}; return true;
    default: return false;
  }
}

// Bytes of one group's weights for `gk` reduction steps.
int64_t group_weight_bytes(const Header& h, int64_t gk) {
  const int64_t bytes = ceil_div(gk, h.kr) * h.kr * h.nr;
  return h.nibbles ? bytes / 2 : bytes;
}

bool plan(int64_t n, int64_t k, int64_t group, Isa isa, Header* h) {
  Kernels kk;
  constexpr int64_t kMax = int64_t(1) << 24;
  if (n < 1 || k < 1 || n > kMax || k > kMax || group < 1 || group > k || k % group != 0 || !kernels_for(isa, &kk))
    return false;
  if (group != k && (group % 8 != 0)) return false;
  if (kk.geo.nr > 64) return false;
  std::memset(h, 0, sizeof(*h));
  h->magic = kMagic;
  h->isa = static_cast<int32_t>(isa);
  h->nr = kk.geo.nr;
  h->kr = kk.geo.kr;
  h->n = n;
  h->k = k;
  h->group = group;
  // Groupwise weights are always 4-bit (int8 ones have one group of k), so they may stay nibbles.
  h->nibbles = group != k && kk.gemm_nibbles != nullptr && kk.geo.kr == 4 && kk.geo.nr == 32 && group % 4 == 0 &&
               group <= ukernel::kQd8NibbleMaxGroup;
  const int64_t groups = k / group;
  h->block_bytes = groups * (group_weight_bytes(*h, group) + 4 * h->nr) + 8 * h->nr;
  return true;
}

size_t packed_bytes(const Header& h) { return kHeaderBytes + static_cast<size_t>(ceil_div(h.n, h.nr) * h.block_bytes); }

// Packs weights given by value(n, k) and scale(n, group).
template <typename Value, typename Scale>
void pack(const Header& h, const Value& value, const Scale& scale, const float* bias, void* packed) {
  std::memset(packed, 0, packed_bytes(h));
  std::memcpy(packed, &h, sizeof(h));
  char* blk = static_cast<char*>(packed) + kHeaderBytes;
  const int64_t nr = h.nr, kr = h.kr, groups = h.k / h.group;
  const bool avx2 = h.isa == static_cast<int32_t>(Isa::kAvx2);
  for (int64_t j0 = 0; j0 < h.n; j0 += nr, blk += h.block_bytes) {
    const int64_t cols = std::min(nr, h.n - j0);
    char* g_base = blk;
    double zsum[64] = {};  // nr <= 32 on every ISA
    for (int64_t g = 0; g < groups; ++g) {
      int8_t* w = reinterpret_cast<int8_t*>(g_base);
      char* tail = g_base + group_weight_bytes(h, h.group);
      for (int64_t j = 0; j < cols; ++j) {
        int32_t sum = 0;
        const int64_t slot = avx2 ? (j % 4) * 2 + j / 4 : j;
        for (int64_t kk = 0; kk < h.group; ++kk) {
          const int32_t v = value(j0 + j, g * h.group + kk);
          sum += v;
          if (h.nibbles) {
            // Column j and j + nr / 2 share bytes: low and high nibble.
            const int64_t half = nr / 2, at = ((kk / kr) * half + j % half) * kr + kk % kr;
            reinterpret_cast<uint8_t*>(w)[at] |= static_cast<uint8_t>((v & 0xf) << (j / half * 4));
          } else {
            w[((kk / kr) * nr + slot) * kr + kk % kr] = static_cast<int8_t>(v);
          }
        }
        const float s = scale(j0 + j, g);
        std::memcpy(tail + 4 * j, &s, 4);
        zsum[j] += double(sum) * s;
      }
      g_base = tail + 4 * nr;
    }
    for (int64_t j = 0; j < cols; ++j) {
      const float b = bias ? bias[j0 + j] : 0.f, z = static_cast<float>(zsum[j]);
      std::memcpy(g_base + 4 * j, &b, 4);
      std::memcpy(g_base + 4 * (nr + j), &z, 4);
    }
  }
}

float bf16_to_float(uint16_t v) {
  const uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool scale_ok(float s) { return s > 0.f && std::isfinite(s); }

}  // namespace

void quantize_row_qd8(const float* x, int64_t k, int8_t* q, float* scale, int32_t* zero_point) {
#ifdef ET_NHWC_X86
  static const bool avx512 = float_isa_supported(Isa::kAvx512);
#else
  constexpr bool avx512 = false;
#endif
  float lo = 0.f, hi = 0.f;
  if (avx512) {
#ifdef ET_NHWC_X86
    ukernel::qd8_row_range_avx512(x, k, &lo, &hi);
#endif
  } else {
    for (int64_t i = 0; i < k; ++i) {
      lo = x[i] < lo ? x[i] : lo;
      hi = x[i] > hi ? x[i] : hi;
    }
  }
  if (!(hi > lo)) {
    std::memset(q, 0, static_cast<size_t>(k));
    *scale = 1.f;
    *zero_point = 0;
    return;
  }
  const float inv = 255.f / (hi - lo);
  *scale = (hi - lo) / 255.f;
  const float zpf = std::nearbyint(-128.f - lo * inv);
  const int32_t zp = static_cast<int32_t>(std::min(127.f, std::max(-128.f, zpf)));
  *zero_point = zp;
#ifdef ET_NHWC_X86
  if (avx512) return ukernel::qd8_row_quantize_avx512(x, k, inv, zp, q);
#endif
  for (int64_t i = 0; i < k; ++i) {
    const float v = std::nearbyint(x[i] * inv) + static_cast<float>(zp);
    q[i] = static_cast<int8_t>(std::min(127.f, std::max(-128.f, v)));
  }
}

size_t fully_connected_qd8_packed_bytes(int64_t n, int64_t k, int64_t group_size, Isa isa) {
  Header h;
  return plan(n, k, group_size, isa, &h) ? packed_bytes(h) : 0;
}

bool fully_connected_qd8_pack_qc8w(int64_t n, int64_t k, const int8_t* weight, const float* weight_scales,
                                   const float* bias, Isa isa, void* packed) {
  Header h;
  if (weight == nullptr || weight_scales == nullptr || packed == nullptr || !plan(n, k, k, isa, &h)) return false;
  for (int64_t j = 0; j < n; ++j)
    if (!scale_ok(weight_scales[j])) return false;
  pack(
      h, [&](int64_t j, int64_t i) { return int32_t(weight[j * k + i]); },
      [&](int64_t j, int64_t) { return weight_scales[j]; }, bias, packed);
  return true;
}

bool fully_connected_qd8_pack_qb4w(int64_t n, int64_t k, int64_t group_size, const uint8_t* weight,
                                   int32_t nibble_zero_point, const void* scales, bool scales_bf16, const float* bias,
                                   Isa isa, void* packed) {
  Header h;
  if (weight == nullptr || scales == nullptr || packed == nullptr || k % 2 != 0 ||
      (nibble_zero_point != 0 && nibble_zero_point != 8) || !plan(n, k, group_size, isa, &h))
    return false;
  const int64_t groups = k / group_size;
  auto scale = [&](int64_t j, int64_t g) {
    return scales_bf16 ? bf16_to_float(static_cast<const uint16_t*>(scales)[j * groups + g])
                       : static_cast<const float*>(scales)[j * groups + g];
  };
  for (int64_t j = 0; j < n; ++j)
    for (int64_t g = 0; g < groups; ++g)
      if (!scale_ok(scale(j, g))) return false;
  pack(
      h,
      [&](int64_t j, int64_t i) {
        const uint8_t byte = weight[j * (k / 2) + i / 2];
        const int32_t v = i % 2 == 0 ? byte & 0xf : byte >> 4;
        return nibble_zero_point == 8 ? v - 8 : (v ^ 8) - 8;
      },
      scale, bias, packed);
  return true;
}

size_t fully_connected_qd8_scratch_bytes(int64_t m, int64_t k) {
  if (m < 0 || k < 0) return 0;
  return static_cast<size_t>(m * (k + 8) + 64);
}

bool fully_connected_qd8(const void* packed, int64_t m, const float* in, int64_t in_stride, float* out,
                         int64_t out_stride, float out_min, float out_max, void* scratch) {
  const Header* h = static_cast<const Header*>(packed);
  Kernels k;
  if (packed == nullptr || h->magic != kMagic || m < 0 || scratch == nullptr ||
      !kernels_for(static_cast<Isa>(h->isa), &k) || (h->nibbles && k.gemm_nibbles == nullptr))
    return false;
  void (*gemm)(const Qd8GemmTile&) = h->nibbles ? k.gemm_nibbles : k.gemm;
  if (m == 0) return true;
  // Scratch: m float scales, m int32 zero points, then the m quantized rows of k bytes.
  char* base = static_cast<char*>(scratch);
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  float* scales = reinterpret_cast<float*>(base);
  int32_t* zps = reinterpret_cast<int32_t*>(scales + m);
  int8_t* rows = reinterpret_cast<int8_t*>(zps + m);
  const int64_t kk = h->k;
  parallel_for(0, m, std::max<int64_t>(1, 16384 / kk), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) quantize_row_qd8(in + r * in_stride, kk, rows + r * kk, scales + r, zps + r);
  });
  const int64_t MR = k.geo.mr, NR = h->nr;
  const int64_t blocks = ceil_div(h->n, NR), tiles = ceil_div(m, MR);
  const GemmSplit split(1, m, h->n, tiles, blocks, MR * kk * NR, kTaskMacs, 1, h->n * kk);
  const char* w = static_cast<const char*>(packed) + kHeaderBytes;
  parallel_for(0, split.tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const GemmSplit::Task st = split.at(task);
      for (int64_t tile = st.tile0; tile < st.tile1; ++tile) {
        // Full MR-row tiles then the rest (the float epilogue's rounding may depend on the
        // tile height off x86, so the rows' tiles stay where they were).
        const int64_t r0 = tile * MR, mr = std::min(MR, m - r0);
        const int8_t* a[ukernel::kMaxMR];
        for (int64_t i = 0; i < mr; ++i) a[i] = rows + (r0 + i) * kk;
        for (int64_t b = st.block0; b < st.block1; ++b) {
          Qd8GemmTile p;
          p.mr = mr;
          p.nr = std::min(NR, h->n - b * NR);
          p.kc = kk;
          p.group = h->group;
          p.a = a;
          p.a_scale = scales + r0;
          p.a_zero_point = zps + r0;
          p.w = w + b * h->block_bytes;
          p.c = out + r0 * out_stride + b * NR;
          p.c_stride = out_stride;
          p.min = out_min;
          p.max = out_max;
          gemm(p);
        }
      }
    }
  });
  return true;
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
