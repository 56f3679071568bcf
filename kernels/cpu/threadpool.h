// The kernels' thread pool: raw pthreads, sized once, shared by every parallel_for.
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch {
namespace extension {
namespace threadpool {

// The environment variable that sizes the pool when it is first used (a positive integer).
constexpr const char* kNumThreadsEnv = "EXECUTORCH_NUM_THREADS";
// Upper bound on the pool size, so a typo cannot start thousands of threads.
constexpr uint32_t kMaxThreads = 256;

// A task run over indices [0, count): fn(ctx, i) for every i, in any order, on any thread.
using TaskFn = void (*)(void* ctx, int64_t index);

class ThreadPool {
 public:
  // Threads that run a task, counting the calling thread (so 1 means no worker threads).
  size_t get_thread_count() const;

  // Stops the workers and starts `num_threads - 1` new ones (num_threads in 1..kMaxThreads;
  // false, pool unchanged, otherwise). Waits for a running task; do not call from inside one.
  bool _unsafe_reset_threadpool(uint32_t num_threads);

  // Runs fn over [0, count) with the workers and the caller, returning when every index is
  // done. Runs serially on the caller when the pool has one thread, when called from inside a
  // task (nested parallelism), or when another caller's task holds the pool: never blocks on a
  // busy pool, so a kernel called from a worker cannot deadlock.
  void run(TaskFn fn, void* ctx, int64_t count);

  ThreadPool() = default;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
};

// The process-wide pool, created on first use with the size from kNumThreadsEnv or, when that
// is unset, the number of CPUs this process may run on (sched_getaffinity).
ThreadPool* get_threadpool();

// The size kNumThreadsEnv asks for: true with *out set when unset (*out = 0: use the default)
// or a valid count; false when it is set to anything but an integer in 1..kMaxThreads.
bool num_threads_from_env(uint32_t* out);

// CPUs this process may run on (at least 1).
uint32_t available_cpus();

}  // namespace threadpool
}  // namespace extension
}  // namespace executorch
