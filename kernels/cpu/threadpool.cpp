// Fork-join pool on raw pthreads (no std::thread, so the library binds only long-standing
// glibc symbol versions): each thread owns a range of a task's chunks and steals from the others'
// when it runs out; workers spin for a while after a task, then sleep on a condition variable.
#include "kernels/cpu/threadpool.h"

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

// Polls of the generation a worker makes before sleeping (about 0.5 ms of `pause` on current
// x86): long enough to span the gap between two kernels of a model run, and between two runs
// back to back, without a futex wake (tens of microseconds on a VM); short enough that an idle
// pool stops burning a shared core almost at once.
constexpr int kSpinPolls = 20000;
// Polls the caller makes for the workers' last chunks before sleeping.
constexpr int kWaitPolls = 20000;

// Chunk ranges: one word per thread, (tag << 48 | begin << 24 | end). Each thread takes chunks
// from the front of its own range, then steals from the back of the others': two threads work
// on contiguous halves of a kernel (neighbouring tiles share input rows and weights) and touch a
// shared cache line only when one runs out. The tag (the task's generation) keeps a worker that
// wakes late from claiming a chunk of a newer task against an older one.
constexpr int kIndexBits = 24;
constexpr uint64_t kIndexMask = (uint64_t(1) << kIndexBits) - 1;
constexpr int64_t kMaxPoolChunks = int64_t(kIndexMask);

struct alignas(64) Slot {
  std::atomic<uint64_t> range{0};
};

inline uint64_t pack_range(uint64_t tag, uint64_t lo, uint64_t hi) {
  return tag << (2 * kIndexBits) | lo << kIndexBits | hi;
}
inline uint32_t tag_of(uint64_t w) { return static_cast<uint32_t>(w >> (2 * kIndexBits)); }
inline int64_t lo_of(uint64_t w) { return static_cast<int64_t>(w >> kIndexBits & kIndexMask); }
inline int64_t hi_of(uint64_t w) { return static_cast<int64_t>(w & kIndexMask); }
inline uint32_t tag_for(uint64_t generation) { return static_cast<uint32_t>(generation & 0xffff); }

pthread_mutex_t g_run_mu = PTHREAD_MUTEX_INITIALIZER;  // held by the caller of a parallel task
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  // guards sleeping and waking
pthread_cond_t g_work_cv = PTHREAD_COND_INITIALIZER;
pthread_cond_t g_done_cv = PTHREAD_COND_INITIALIZER;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

std::atomic<uint32_t> g_size{1};  // requested threads, counting the caller
uint32_t g_started = 0;  // workers running in this process
pthread_t g_workers[kMaxThreads];
std::atomic<bool> g_stop{false};

Slot g_slots[kMaxThreads];  // slot 0 is the caller's, slot i the i-th worker's
alignas(64) std::atomic<uint64_t> g_generation{0};
std::atomic<uint32_t> g_sleepers{0};  // workers asleep (or going to sleep) on g_work_cv
alignas(64) std::atomic<int64_t> g_done{0};  // pool chunks finished in the current task
std::atomic<bool> g_caller_asleep{false};
// The current task, written before its ranges (a claim acquires the range word, so whoever
// claims a chunk sees these): pool chunk i runs indices [i * stride, min(count, (i + 1) * stride)).
alignas(64) TaskFn g_fn = nullptr;
void* g_ctx = nullptr;
int64_t g_count = 0, g_stride = 1, g_chunks = 0;
std::atomic<uint32_t> g_threads{1};  // slots in use by the current task

thread_local bool t_in_task = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Claims one chunk of the task tagged `tag` from slot `s`: from the front of its range when
// `front`, else from the back. -1 when the range is empty or belongs to another task.
int64_t claim(Slot& s, uint32_t tag, bool front) {
  uint64_t w = s.range.load(std::memory_order_acquire);
  for (;;) {
    const int64_t lo = lo_of(w), hi = hi_of(w);
    if (tag_of(w) != tag || lo >= hi) return -1;
    const uint64_t next = front ? pack_range(tag, lo + 1, hi) : pack_range(tag, lo, hi - 1);
    if (s.range.compare_exchange_weak(w, next, std::memory_order_acq_rel, std::memory_order_acquire))
      return front ? lo : hi - 1;
  }
}

void run_chunk(int64_t chunk) {
  const int64_t lo = chunk * g_stride;
  const int64_t hi = g_count - lo > g_stride ? lo + g_stride : g_count;
  for (int64_t i = lo; i < hi; ++i) g_fn(g_ctx, i);
}

// Runs chunks of the task tagged `tag`, its own slot's first, then the others', until none is
// left to claim; then counts them done in one step.
void drain(uint32_t self, uint32_t tag) {
  int64_t done = 0;
  for (int64_t c; (c = claim(g_slots[self], tag, true)) >= 0; ++done) run_chunk(c);
  const uint32_t threads = g_threads.load(std::memory_order_acquire);
  for (uint32_t k = 1; k < threads; ++k) {
    Slot& victim = g_slots[(self + k) % threads];
    for (int64_t c; (c = claim(victim, tag, false)) >= 0; ++done) run_chunk(c);
  }
  if (done == 0) return;
  // A claimed chunk keeps its task open (the caller waits for it), so g_chunks is this task's.
  const int64_t chunks = g_chunks;
  if (g_done.fetch_add(done, std::memory_order_seq_cst) + done == chunks &&
      g_caller_asleep.load(std::memory_order_seq_cst)) {
    pthread_mutex_lock(&g_mu);
    pthread_cond_signal(&g_done_cv);
    pthread_mutex_unlock(&g_mu);
  }
}

struct WorkerStart {
  uint32_t self;
  uint64_t generation;
};
WorkerStart g_worker_start[kMaxThreads];

// Starts with the generation current when the worker was created: a thread may first run after
// the next task is published, and must still take part in it.
void* worker_main(void* arg) {
  const WorkerStart start = *static_cast<const WorkerStart*>(arg);
  t_in_task = true;  // anything a worker runs is inside a task: nested parallel_for is serial
  uint64_t seen = start.generation;
  for (;;) {
    uint64_t gen = g_generation.load(std::memory_order_acquire);
    for (int i = 0; i < kSpinPolls && gen == seen; ++i) {
      cpu_relax();
      gen = g_generation.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      pthread_mutex_lock(&g_mu);
      g_sleepers.fetch_add(1, std::memory_order_seq_cst);
      while (g_generation.load(std::memory_order_seq_cst) == seen && !g_stop) pthread_cond_wait(&g_work_cv, &g_mu);
      g_sleepers.fetch_sub(1, std::memory_order_relaxed);
      pthread_mutex_unlock(&g_mu);
      gen = g_generation.load(std::memory_order_acquire);
    }
    seen = gen;
    if (g_stop.load(std::memory_order_acquire)) return nullptr;
    drain(start.self, tag_for(gen));
  }
}

// Starts workers up to g_size - 1 (fewer if the system refuses threads). Caller holds g_run_mu.
void start_workers() {
  g_stop = false;
  while (g_started + 1 < g_size) {
    WorkerStart* start = &g_worker_start[g_started + 1];
    *start = {g_started + 1, g_generation.load()};
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
  g_sleepers = 0;
  g_caller_asleep = false;
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
  if (errno != 0 || end == v || *end != '\0' || n < 1 || n > static_cast<long>(kMaxThreads)) return false;
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
  if (count == 1 || t_in_task || pthread_mutex_trylock(&g_run_mu) != 0) {
    for (int64_t i = 0; i < count; ++i) fn(ctx, i);
    return;
  }
  if (g_started + 1 < g_size) start_workers();  // after a fork
  if (g_started == 0) {
    pthread_mutex_unlock(&g_run_mu);
    for (int64_t i = 0; i < count; ++i) fn(ctx, i);
    return;
  }
  // Publish the task, then give each thread an equal share of its chunks (a range word written
  // with release is what a claim acquires), then bump the generation. The last task's ranges
  // are all empty, so a worker still in its drain claims nothing of this one before the retag.
  const uint64_t gen = g_generation.load(std::memory_order_relaxed) + 1;
  const uint32_t tag = tag_for(gen);
  const uint32_t threads = g_started + 1;
  const int64_t stride = count <= kMaxPoolChunks ? 1 : (count - 1) / kMaxPoolChunks + 1;
  const int64_t chunks = (count - 1) / stride + 1;
  g_fn = fn;
  g_ctx = ctx;
  g_count = count;
  g_stride = stride;
  g_chunks = chunks;
  g_done.store(0, std::memory_order_relaxed);
  g_threads.store(threads, std::memory_order_relaxed);
  for (uint32_t i = 0; i < threads; ++i) {
    const uint64_t lo = static_cast<uint64_t>(chunks * i / threads);
    const uint64_t hi = static_cast<uint64_t>(chunks * (i + 1) / threads);
    g_slots[i].range.store(pack_range(tag, lo, hi), std::memory_order_release);
  }
  g_generation.store(gen, std::memory_order_seq_cst);
  if (g_sleepers.load(std::memory_order_seq_cst) != 0) {
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_work_cv);
    pthread_mutex_unlock(&g_mu);
  }
  t_in_task = true;
  drain(0, tag);
  t_in_task = false;
  for (int i = 0; i < kWaitPolls && g_done.load(std::memory_order_acquire) != chunks; ++i) cpu_relax();
  if (g_done.load(std::memory_order_acquire) != chunks) {
    pthread_mutex_lock(&g_mu);
    g_caller_asleep.store(true, std::memory_order_seq_cst);
    while (g_done.load(std::memory_order_seq_cst) != chunks) pthread_cond_wait(&g_done_cv, &g_mu);
    g_caller_asleep.store(false, std::memory_order_relaxed);
    pthread_mutex_unlock(&g_mu);
  }
  pthread_mutex_unlock(&g_run_mu);
}

}  // namespace threadpool
}  // namespace extension
}  // namespace executorch
