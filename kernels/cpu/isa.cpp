// CPU feature checks for isa.h, read once from CPUID through the compiler's builtins.
#include "kernels/cpu/isa.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

#if defined(__GNUC__) && defined(__x86_64__)
bool avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}
bool avx512() {
  static const bool ok = avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return ok;
}
bool avx512_vnni() {
  static const bool ok = avx512() && __builtin_cpu_supports("avx512vnni");
  return ok;
}
#else
bool avx2_fma() { return false; }
bool avx512() { return false; }
bool avx512_vnni() { return false; }
#endif

}  // namespace

bool float_isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kBaseline: return true;
    case Isa::kAvx2: return avx2_fma();
    case Isa::kAvx512: return avx512();
  }
  return false;
}

bool int8_isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kBaseline: return true;
    case Isa::kAvx2: return avx2_fma();
    case Isa::kAvx512: return avx512_vnni();
  }
  return false;
}

Isa best_float_isa() {
  static const Isa best = avx512() ? Isa::kAvx512 : avx2_fma() ? Isa::kAvx2 : Isa::kBaseline;
  return best;
}

Isa best_int8_isa() {
  static const Isa best = avx512_vnni() ? Isa::kAvx512 : avx2_fma() ? Isa::kAvx2 : Isa::kBaseline;
  return best;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kBaseline: return "baseline";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
