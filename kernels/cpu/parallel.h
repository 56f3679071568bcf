// Work splitting for the heavy kernels: parallel_for over an index range, run on the thread pool.
#pragma once

#include <cstdint>

#include "kernels/cpu/threadpool.h"

namespace executorch {
namespace kernels {
namespace cpu {

// Calls fn(chunk_begin, chunk_end) over disjoint chunks that cover [begin, end), each at least
// `grain` long (except the last). Chunk boundaries depend only on (begin, end, grain) and never
// on the thread count, so a kernel that writes each output element from one chunk gives the same
// bits for any number of threads. Chunks run concurrently on the thread pool, in no set order;
// a parallel_for inside a chunk runs serially on that chunk's thread.
template <typename Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  if (end <= begin) { return; }
  if (grain < 1) { grain = 1; }
  const int64_t chunks = (end - begin - 1) / grain + 1;
  if (chunks == 1) {
    fn(begin, end);
    return;
  }
  struct Job {
    const Fn* fn;
    int64_t begin, end, grain;
  } job{&fn, begin, end, grain};
  ::executorch::extension::threadpool::get_threadpool()->run(
      [](void* ctx, int64_t i) {
        const Job& j = *static_cast<const Job*>(ctx);
        const int64_t lo = j.begin + i * j.grain;
        const int64_t hi = j.end - lo > j.grain ? lo + j.grain : j.end;
        (*j.fn)(lo, hi);
      },
      &job, chunks);
}

// Threads parallel_for may use (the pool's size, counting the caller).
inline int64_t parallel_threads() {
  return static_cast<int64_t>(::executorch::extension::threadpool::get_threadpool()->get_thread_count());
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
