// Build-time helpers for the hot loops: multiversioning and forced inlining, where supported.
#pragma once

#include <cstddef>  // defines __GLIBC__ on glibc systems, which the ifunc check below needs

// ET_MULTIVERSION builds a function for AVX-512, AVX2+FMA (x86-64-v3) and the baseline ISA and
// picks one at load. It needs ifunc (GCC on x86-64 ELF with glibc); elsewhere the baseline build
// runs. The middle clone names an ISA level, which the loader checks by CPU features: an
// "arch=<cpu>" clone is picked only on that CPU model, so AMD and later Intel parts ran baseline.
#if defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && defined(__x86_64__) && defined(__GLIBC__)
#define ET_MULTIVERSION __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define ET_MULTIVERSION
#endif

#if defined(__GNUC__)
#define ET_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ET_ALWAYS_INLINE inline
#endif
