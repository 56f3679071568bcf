// The thread pool and the kernels on it: coverage, nesting, concurrent callers, resizing, and
// results bit-identical for 1, 2 and 3 threads.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/threadpool.h"
#include "test/cpp/kernels/check.h"

using executorch::extension::threadpool::get_threadpool;
using executorch::kernels::cpu::Conv2dShape;
using executorch::kernels::cpu::ConstMatrix;
using executorch::kernels::cpu::GemmPath;
using executorch::kernels::cpu::parallel_for;

namespace {

const uint32_t kThreadCounts[] = {1, 2, 3};

// Every index in [begin, end) visited exactly once, chunks as the contract says.
bool covers_once(int64_t begin, int64_t end, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(end > begin ? end - begin : 0));
  std::atomic<bool> chunks_ok{true};
  const int64_t step = grain < 1 ? 1 : grain;  // the contract treats grain < 1 as 1
  parallel_for(begin, end, grain, [&](int64_t lo, int64_t hi) {
    if ((lo - begin) % step != 0 || (hi - lo != step && hi != end)) chunks_ok = false;
    for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i - begin)].fetch_add(1);
  });
  for (auto& h : hits)
    if (h.load() != 1) return false;
  return chunks_ok.load();
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

// C from sgemm forced onto `path` (empty when this CPU lacks it).
std::vector<float> gemm_once(GemmPath path, int64_t m, int64_t n, int64_t k, bool ta, float beta, bool with_workspace) {
  auto a = ktest::random_floats(m * k, 11);
  auto b = ktest::random_floats(k * n, 12);
  auto bias = ktest::random_floats(m, 13);
  std::vector<float> c = ktest::random_floats(m * n, 14);
  ConstMatrix am = ta ? ConstMatrix{a.data(), 1, m} : ConstMatrix{a.data(), k, 1};
  std::vector<float> ws(executorch::kernels::cpu::sgemm_workspace_floats(m, n, k));
  if (!with_workspace) {
    executorch::kernels::cpu::sgemm(m, n, k, 1.f, am, {b.data(), n, 1}, beta, bias.data(), c.data(), n, nullptr);
    return c;
  }
  if (!executorch::kernels::cpu::sgemm_on_path(path, m, n, k, 1.f, am, {b.data(), n, 1}, beta, bias.data(), c.data(), n,
                                               ws.data()))
    return {};
  return c;
}

std::vector<float> conv_once(const Conv2dShape& s) {
  auto in = ktest::random_floats(s.batch * s.in_channels * s.in_h * s.in_w, 21);
  auto w = ktest::random_floats(s.out_channels * (s.in_channels / s.groups) * s.kernel_h * s.kernel_w, 22);
  auto bias = ktest::random_floats(s.out_channels, 23);
  std::vector<float> out(s.batch * s.out_channels * s.out_h() * s.out_w());
  std::vector<float> ws(executorch::kernels::cpu::conv2d_workspace_floats(s));
  executorch::kernels::cpu::conv2d(s, in.data(), w.data(), bias.data(), out.data(), ws.data());
  return out;
}

void* call_parallel_for(void* ok) {
  *static_cast<bool*>(ok) = covers_once(0, 5000, 7);
  return nullptr;
}

}  // namespace

KTEST(threadpool_parallel_for_covers_each_index_once) {
  for (uint32_t t : kThreadCounts) {
    CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
    CHECK(get_threadpool()->get_thread_count() == t);
    CHECK(covers_once(0, 1, 1));
    CHECK(covers_once(3, 3, 4));
    CHECK(covers_once(-5, 1000, 7));
    CHECK(covers_once(0, 100000, 1));
    CHECK(covers_once(0, 10, 0));  // grain < 1 counts as 1
  }
}

KTEST(threadpool_more_chunks_than_a_range_word_holds_each_run_once) {
  // Past 2^24 chunks the pool hands them out in groups; every index still runs exactly once,
  // as its own chunk. Disjoint indices, so plain bytes are enough to count the visits.
  const int64_t n = (int64_t(1) << 24) + 3;
  std::vector<uint8_t> hits(static_cast<size_t>(n), 0);
  std::atomic<bool> chunks_ok{true};
  for (uint32_t t : {2u, 3u}) {
    CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
    std::fill(hits.begin(), hits.end(), 0);
    parallel_for(0, n, 1, [&](int64_t lo, int64_t hi) {
      if (hi != lo + 1) chunks_ok = false;
      ++hits[static_cast<size_t>(lo)];
    });
    CHECK(chunks_ok.load());
    CHECK(std::all_of(hits.begin(), hits.end(), [](uint8_t h) { return h == 1; }));
  }
}

KTEST(threadpool_nested_parallel_for_runs_and_covers) {
  CHECK(get_threadpool()->_unsafe_reset_threadpool(3));
  std::atomic<int> inner_ok{0};
  parallel_for(0, 12, 1, [&](int64_t, int64_t) {
    if (covers_once(0, 257, 3)) inner_ok.fetch_add(1);
  });
  CHECK(inner_ok.load() == 12);
}

KTEST(threadpool_concurrent_callers_both_finish) {
  CHECK(get_threadpool()->_unsafe_reset_threadpool(2));
  bool ok[4] = {false, false, false, false};
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) CHECK(pthread_create(&threads[i], nullptr, call_parallel_for, &ok[i]) == 0);
  for (int i = 0; i < 4; ++i) pthread_join(threads[i], nullptr);
  for (bool b : ok) CHECK(b);
}

KTEST(threadpool_refuses_bad_sizes) {
  CHECK(get_threadpool()->_unsafe_reset_threadpool(2));
  CHECK(!get_threadpool()->_unsafe_reset_threadpool(0));
  CHECK(!get_threadpool()->_unsafe_reset_threadpool(executorch::extension::threadpool::kMaxThreads + 1));
  CHECK(get_threadpool()->get_thread_count() == 2);
}

KTEST(gemm_same_bits_for_any_thread_count) {
  struct Case {
    int64_t m, n, k;
    bool ta;
    float beta;
  };
  // Odd sizes past every blocking edge: several KC blocks, > NC columns, > MP rows, one row.
  const Case cases[] = {{197, 389, 301, false, 0.f}, {67, 2111, 45, true, 0.5f}, {512, 49, 600, false, 1.f},
                        {1601, 53, 29, false, 1.f},  {1, 3001, 257, false, 0.f}, {5, 700, 513, true, 0.f}};
  for (GemmPath path : {GemmPath::kUnpacked, GemmPath::kBaseline, GemmPath::kAvx2, GemmPath::kAvx512, GemmPath::kNeon})
    for (const Case& c : cases) {
      std::vector<float> first;
      for (uint32_t t : kThreadCounts) {
        CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
        auto got = gemm_once(path, c.m, c.n, c.k, c.ta, c.beta, true);
        if (t == 1) first = got;
        CHECK(same_bits(got, first));
      }
    }
  std::vector<float> first;
  for (uint32_t t : kThreadCounts) {  // the no-scratch default path
    CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
    auto got = gemm_once(GemmPath::kUnpacked, 33, 1500, 200, false, 0.f, false);
    if (t == 1) first = got;
    CHECK(same_bits(got, first));
  }
}

KTEST(conv_same_bits_for_any_thread_count) {
  // {batch, C, H, W, OC, KH, KW, stride h/w, pad h/w, dilation h/w, groups}
  const Conv2dShape shapes[] = {
      {2, 37, 29, 31, 53, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // im2col + gemm
      {1, 48, 17, 19, 96, 1, 1, 1, 1, 0, 0, 1, 1, 1},  // pointwise: one gemm
      {1, 24, 23, 21, 36, 5, 3, 1, 2, 2, 1, 2, 1, 3},  // grouped, dilated
      {1, 3, 65, 67, 17, 7, 7, 2, 2, 3, 3, 1, 1, 1},  // few input channels, big kernel
  };
  for (const Conv2dShape& s : shapes) {
    std::vector<float> first;
    for (uint32_t t : kThreadCounts) {
      CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
      auto got = conv_once(s);
      if (t == 1) first = got;
      CHECK(same_bits(got, first));
    }
  }
}
