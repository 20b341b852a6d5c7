// ThreadPool: every index is run exactly once, by the caller and the workers, whether
// the workers are spinning or asleep when a loop starts.
#include "runtime/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <thread>
#include <vector>

namespace lathe {
namespace {

struct Hits {
  std::vector<std::atomic<int>> count;
  std::atomic<int> threads_mask{0};
  bool wait_for_worker = false;  // the caller's chunks wait (up to 10 s) until a worker ran one
  explicit Hits(long n) : count(size_t(n)) {}
};

void count_body(void* closure, long begin, long end, int thread) {
  auto* h = static_cast<Hits*>(closure);
  for (long i = begin; i < end; ++i) h->count[size_t(i)].fetch_add(1);
  h->threads_mask.fetch_or(1 << thread);
  if (h->wait_for_worker && thread == 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((h->threads_mask.load() & ~1) == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void expect_each_once(ThreadPool& pool, long n, long grain) {
  Hits h(n);
  pool.parallel_for(n, grain, count_body, &h);
  for (long i = 0; i < n; ++i) ASSERT_EQ(h.count[size_t(i)].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPool, RunsEveryIndexOnceAtAnySizeAndGrain) {
  ThreadPool pool(3);
  for (long n : {1L, 2L, 3L, 7L, 64L, 1000L})
    for (long grain : {1L, 4L, 100L}) expect_each_once(pool, n, grain);
}

TEST(ThreadPool, WorkersTakeChunksAndWakeFromSleep) {
  ThreadPool pool(2);
  for (int round = 0; round < 3; ++round) {
    Hits h(64);
    h.wait_for_worker = true;  // the caller holds its first chunk until the worker ran one
    pool.parallel_for(64, 1, count_body, &h);
    for (long i = 0; i < 64; ++i) ASSERT_EQ(h.count[size_t(i)].load(), 1);
    // The worker must have taken a chunk; the caller usually does too, but on a loaded
    // host the worker can run all 64 before the caller takes its first (seen under ctest -j2).
    EXPECT_TRUE(h.threads_mask.load() & 2) << "round " << round << ": the worker took no chunk within 10 s";
    // Past the spin: the worker sleeps, and the next loop must wake it.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(ThreadPool, OneThreadRunsOnTheCaller) {
  ThreadPool pool(1);
  Hits h(10);
  pool.parallel_for(10, 1, count_body, &h);
  EXPECT_EQ(h.threads_mask.load(), 1);
  for (long i = 0; i < 10; ++i) EXPECT_EQ(h.count[size_t(i)].load(), 1);
}

TEST(ThreadPool, DestroysWithWorkersAsleep) {
  auto pool = std::make_unique<ThreadPool>(4);
  expect_each_once(*pool, 100, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pool.reset();  // must return (joins sleeping workers); a hang fails at ctest's timeout
}

}  // namespace
}  // namespace lathe
