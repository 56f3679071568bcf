// ET_MULTIVERSION: builds a hot loop for AVX-512, AVX2 and the baseline ISA, chosen at load.
#pragma once

// Multiversioning needs ifunc support (GCC/Clang on ELF x86); elsewhere the baseline build runs.
#if defined(__GNUC__) && defined(__ELF__) && defined(__x86_64__) && !defined(__clang__)
#define ET_MULTIVERSION __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define ET_MULTIVERSION
#endif
