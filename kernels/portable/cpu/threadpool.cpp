// Fork-join pool on raw pthreads (no std::thread, so the library binds only long-standing
// glibc symbol versions): workers spin briefly after a task, then sleep on a condition variable.
#include "kernels/portable/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace executorch {
namespace extension {
namespace threadpool {
namespace {

// Polls of the task counter a worker makes before sleeping: long enough to catch the next
// kernel of a model run without a futex wake, short enough not to burn a shared core.
constexpr int kSpinPolls = 4000;

pthread_mutex_t g_run_mu = PTHREAD_MUTEX_INITIALIZER;  // held by the caller of a parallel task
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;      // guards sleeping and waking
pthread_cond_t g_work_cv = PTHREAD_COND_INITIALIZER;
pthread_cond_t g_done_cv = PTHREAD_COND_INITIALIZER;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

std::atomic<uint32_t> g_size{1};  // requested threads, counting the caller
uint32_t g_started = 0;  // workers running in this process
pthread_t g_workers[kMaxThreads];
std::atomic<bool> g_stop{false};

// The current task, published before the generation bump. Chunks are claimed from g_claim,
// which holds (generation tag << 32 | next index): a worker that wakes late cannot claim a chunk
// of a newer task under an older tag, and the caller waits only for claimed chunks, never for a
// worker the scheduler has not run yet.
std::atomic<uint64_t> g_generation{0};
std::atomic<uint64_t> g_claim{0};
std::atomic<int64_t> g_count{0};
std::atomic<int64_t> g_done{0};
TaskFn g_fn = nullptr;
void* g_ctx = nullptr;

thread_local bool t_in_task = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Runs chunks of the task tagged `tag` until none is left to claim.
void drain(uint32_t tag) {
  uint64_t cur = g_claim.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(cur >> 32) != tag) return;
    const int64_t index = static_cast<uint32_t>(cur);
    if (index >= g_count.load(std::memory_order_acquire)) return;
    if (!g_claim.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    // A claimed chunk keeps its task alive (the caller waits for it), so fn and ctx are its own.
    g_fn(g_ctx, index);
    if (g_done.fetch_add(1, std::memory_order_acq_rel) + 1 == g_count.load(std::memory_order_relaxed)) {
      pthread_mutex_lock(&g_mu);
      pthread_cond_signal(&g_done_cv);
      pthread_mutex_unlock(&g_mu);
    }
    cur = g_claim.load(std::memory_order_acquire);
  }
}

// The generation current when the worker was created: a thread may first run after the
// next task is published, and must still take part in it.
void* worker_main(void* start_generation) {
  t_in_task = true;  // anything a worker runs is inside a task: nested parallel_for is serial
  uint64_t seen = reinterpret_cast<uintptr_t>(start_generation);
  for (;;) {
    uint64_t gen = g_generation.load(std::memory_order_acquire);
    for (int i = 0; i < kSpinPolls && gen == seen; ++i) {
      cpu_relax();
      gen = g_generation.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      pthread_mutex_lock(&g_mu);
      while (g_generation.load(std::memory_order_acquire) == seen && !g_stop)
        pthread_cond_wait(&g_work_cv, &g_mu);
      pthread_mutex_unlock(&g_mu);
      gen = g_generation.load(std::memory_order_acquire);
    }
    seen = gen;
    if (g_stop.load(std::memory_order_acquire)) return nullptr;
    drain(static_cast<uint32_t>(gen));
  }
}

// Starts workers up to g_size - 1 (fewer if the system refuses threads). Caller holds g_run_mu.
void start_workers() {
  g_stop = false;
  while (g_started + 1 < g_size) {
    void* start = reinterpret_cast<void*>(static_cast<uintptr_t>(g_generation.load()));
    if (pthread_create(&g_workers[g_started], nullptr, worker_main, start) != 0) {
      g_size.store(g_started + 1, std::memory_order_relaxed);
      break;
    }
    ++g_started;
  }
}

// Caller holds g_run_mu.
void stop_workers() {
  pthread_mutex_lock(&g_mu);
  g_stop = true;
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  pthread_cond_broadcast(&g_work_cv);
  pthread_mutex_unlock(&g_mu);
  for (uint32_t i = 0; i < g_started; ++i) pthread_join(g_workers[i], nullptr);
  g_started = 0;
}

// A forked child has none of the parent's workers, and a lock the parent held stays held:
// start from fresh locks and let the next task start the workers again.
void after_fork_in_child() {
  pthread_mutex_init(&g_run_mu, nullptr);
  pthread_mutex_init(&g_mu, nullptr);
  pthread_cond_init(&g_work_cv, nullptr);
  pthread_cond_init(&g_done_cv, nullptr);
  g_started = 0;
  g_stop = false;
  t_in_task = false;
}

void init_once() {
  uint32_t n = 0;
  if (!num_threads_from_env(&n)) {
    std::fprintf(stderr,
                 "executorch: %s='%s' is not an integer in 1..%u; using %u threads (the CPUs "
                 "available); set it to a thread count or unset it\n",
                 kNumThreadsEnv, std::getenv(kNumThreadsEnv), kMaxThreads, available_cpus());
    n = 0;
  }
  g_size = n == 0 ? available_cpus() : n;
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  pthread_mutex_lock(&g_run_mu);
  start_workers();
  pthread_mutex_unlock(&g_run_mu);
}

}  // namespace

uint32_t available_cpus() {
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n > static_cast<int>(kMaxThreads) ? kMaxThreads : static_cast<uint32_t>(n);
  }
#endif
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > static_cast<long>(kMaxThreads) ? kMaxThreads : static_cast<uint32_t>(n);
}

bool num_threads_from_env(uint32_t* out) {
  *out = 0;
  const char* v = std::getenv(kNumThreadsEnv);
  if (v == nullptr || *v == '\0') return true;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 1 || n > static_cast<long>(kMaxThreads))
    return false;
  *out = static_cast<uint32_t>(n);
  return true;
}

ThreadPool* get_threadpool() {
  static ThreadPool pool;
  pthread_once(&g_once, init_once);
  return &pool;
}

size_t ThreadPool::get_thread_count() const { return g_size.load(std::memory_order_relaxed); }

bool ThreadPool::_unsafe_reset_threadpool(uint32_t num_threads) {
  if (num_threads < 1 || num_threads > kMaxThreads) return false;
  pthread_mutex_lock(&g_run_mu);
  stop_workers();
  g_size = num_threads;
  start_workers();
  pthread_mutex_unlock(&g_run_mu);
  return true;
}

void ThreadPool::run(TaskFn fn, void* ctx, int64_t count) {
  if (count <= 0) return;
  // Chunk indices share a 64-bit word with the task's tag: more than 2^31 chunks run serially.
  if (count == 1 || count > (int64_t(1) << 31) || t_in_task || pthread_mutex_trylock(&g_run_mu) != 0) {
    for (int64_t i = 0; i < count; ++i) fn(ctx, i);
    return;
  }
  if (g_started + 1 < g_size) start_workers();  // after a fork
  if (g_started == 0) {
    pthread_mutex_unlock(&g_run_mu);
    for (int64_t i = 0; i < count; ++i) fn(ctx, i);
    return;
  }
  // Retag the claim word first (with no chunk left) so a late worker of the last task cannot
  // claim against this task's count, then publish the task, then open its chunks.
  const uint64_t gen = g_generation.load(std::memory_order_relaxed) + 1;
  const uint64_t tag = (gen & 0xffffffffu) << 32;
  g_claim.store(tag | 0xffffffffu, std::memory_order_release);
  g_fn = fn;
  g_ctx = ctx;
  g_count.store(count, std::memory_order_relaxed);
  g_done.store(0, std::memory_order_relaxed);
  g_claim.store(tag, std::memory_order_release);
  pthread_mutex_lock(&g_mu);
  g_generation.store(gen, std::memory_order_release);
  pthread_cond_broadcast(&g_work_cv);
  pthread_mutex_unlock(&g_mu);
  t_in_task = true;
  drain(static_cast<uint32_t>(gen));
  t_in_task = false;
  for (int i = 0; i < kSpinPolls && g_done.load(std::memory_order_acquire) != count; ++i) cpu_relax();
  if (g_done.load(std::memory_order_acquire) != count) {
    pthread_mutex_lock(&g_mu);
    while (g_done.load(std::memory_order_acquire) != count) pthread_cond_wait(&g_done_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
  }
  pthread_mutex_unlock(&g_run_mu);
}

}  // namespace threadpool
}  // namespace extension
}  // namespace executorch
