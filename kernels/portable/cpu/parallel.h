// Work splitting for the heavy kernels: parallel_for over an index range.
#pragma once

#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {

// Calls fn(chunk_begin, chunk_end) over disjoint chunks that cover [begin, end), each at least
// `grain` long (except the last). Chunk boundaries depend only on (begin, end, grain) and never
// on the thread count, so a kernel that writes each output element from one chunk gives the same
// bits for any number of threads. This build runs the chunks in order on the calling thread; the
// thread pool replaces the body, not the contract.
template <typename Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  if (end <= begin) {
    return;
  }
  if (grain < 1) {
    grain = 1;
  }
  for (int64_t lo = begin; lo < end; lo += grain) {
    const int64_t hi = end - lo > grain ? lo + grain : end;
    fn(lo, hi);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
