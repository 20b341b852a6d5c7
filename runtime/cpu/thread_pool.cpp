#include "runtime/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

#include "ir/assert.h"
#include "ir/host.h"

namespace lathe {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  oversubscribed_ = threads > available_cpus();
  for (int i = 1; i < std::max(1, threads); ++i) {
    try {
      workers_.emplace_back([this, i] { worker(i); });
    } catch (const std::system_error& e) {
      // The workers started so far are stopped and joined (destroying them joinable
      // called std::terminate: exit 134 at --threads 1024 under a memory limit).
      const size_t started = workers_.size();
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        generation_.fetch_add(1);
      }
      wake_.notify_all();
      for (std::thread& t : workers_) t.join();
      workers_.clear();
      throw Error("could not start worker thread " + std::to_string(started + 2) + " of " + std::to_string(threads) +
                  " (" + e.what() + "); give fewer --threads");
    }
  }
}

void ThreadPool::relax() const {
  if (oversubscribed_)
    std::this_thread::yield();
  else
    cpu_relax();
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::work(int thread) {
  for (;;) {
    long begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) break;
    body_(closure_, begin, std::min(n_, begin + chunk_), thread);
  }
}

void ThreadPool::worker(int index) {
  long seen = 0;
  for (;;) {
    // Spin for a while: the next loop usually follows within microseconds, and the
    // next decode step's first loop follows the host's work between steps (copying and
    // sampling the logits: about 0.6 ms at batch 8 and a 32k vocabulary). Waking a
    // sleeping thread costs tens of microseconds on a virtual machine, so the spin is
    // timed (a PAUSE takes 10-150 cycles depending on the CPU), not counted.
    long gen = generation_.load(std::memory_order_acquire);
    if (gen == seen && !oversubscribed_) {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      for (int spin = 1; gen == seen; ++spin) {
        cpu_relax();
        gen = generation_.load(std::memory_order_acquire);
        if (spin % 64 == 0 && std::chrono::steady_clock::now() > until) break;
      }
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      gen = generation_.load();
    }
    seen = gen;
    if (stop_) return;
    work(index);
    busy_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(long n, long grain, Body body, void* closure) {
  if (n <= 0) return;
  long per = (n + threads() * 4 - 1) / (threads() * 4);
  long chunk = std::max(std::max(1L, grain), per);
  if (workers_.empty() || n <= chunk) {
    body(closure, 0, n, 0);
    return;
  }
  n_ = n;
  chunk_ = chunk;
  body_ = body;
  closure_ = closure;
  next_.store(0, std::memory_order_relaxed);
  busy_.store(int(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  work(0);
  while (busy_.load(std::memory_order_acquire) != 0) relax();
}

void ThreadPool::run(void* pool, long n, long grain, Body body, void* closure) {
  static_cast<ThreadPool*>(pool)->parallel_for(n, grain, body, closure);
}

}  // namespace lathe
