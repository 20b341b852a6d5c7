// A fixed pool of worker threads for kernel loops. parallel_for splits [0, n) into
// chunks that the caller and the workers take from an atomic counter. Workers spin
// between jobs for up to kSpin (decode issues hundreds of short loops per token, and
// the host samples between tokens) and then sleep.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace lathe {

class ThreadPool {
 public:
  using Body = void (*)(void* closure, long begin, long end, int thread);

  explicit ThreadPool(int threads);  // threads >= 1, the caller included
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }
  void parallel_for(long n, long grain, Body body, void* closure);
  // C-compatible entry for LatheCtx::parallel_for (pool = this).
  static void run(void* pool, long n, long grain, Body body, void* closure);

 private:
  static constexpr std::chrono::microseconds kSpin{2000};
  // More threads than the CPUs this process may use: a spinning thread holds a CPU a
  // descheduled worker needs (decode ran 1,000x slower at 4 threads on 2 CPUs), so
  // workers sleep between jobs and the caller yields while it waits.
  bool oversubscribed_ = false;
  void worker(int index);
  void relax() const;
  void work(int thread);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<long> generation_{0};
  std::atomic<long> next_{0};
  std::atomic<int> busy_{0};
  std::atomic<bool> stop_{false};
  long n_ = 0, chunk_ = 1;
  Body body_ = nullptr;
  void* closure_ = nullptr;
};

}  // namespace lathe
