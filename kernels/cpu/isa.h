// CPU feature levels the NHWC and quantized kernels are built for, chosen at run time.
#pragma once

namespace executorch {
namespace kernels {
namespace cpu {

// kAvx2 needs AVX2 + FMA; kAvx512 needs AVX-512 F/BW/DQ/VL, and for the int8 kernels also
// AVX-512 VNNI (vpdpbusd). kBaseline is plain C++ for the build's target ISA.
enum class Isa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// Whether this CPU (and build) can run the float / int8 kernels of `isa`.
bool float_isa_supported(Isa isa);
bool int8_isa_supported(Isa isa);

// The fastest supported level for float kernels and for int8 kernels.
Isa best_float_isa();
Isa best_int8_isa();

// "baseline", "avx2" or "avx512", for benchmarks and test messages.
const char* isa_name(Isa isa);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
