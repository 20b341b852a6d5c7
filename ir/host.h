// The host's CPUs this process may use, for default thread counts.
#pragma once

#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace lathe {

// CPUs available to this process: those in its affinity mask (taskset, a container's
// cpuset), capped by the tightest CPU quota on its cgroup and the cgroup's ancestors
// (v2 cpu.max, v1 cfs_quota_us / cfs_period_us, rounded up), at least 1. std::thread::hardware_concurrency counts every
// online CPU, so a pool sized by it oversubscribes a container limited to a few, and its
// spinning workers then take turns on the same cores.
int available_cpus();

// The parts of available_cpus, for tests: the tightest CPU quota (in CPUs; 0 = none) on
// the cgroup that `proc_self_cgroup` (the text of /proc/self/cgroup) names and on its
// ancestors, under `sys_root` (/sys/fs/cgroup: v2 there or in unified/, v1 in cpu/ or
// cpu,cpuacct/); and `cpus` capped by a quota, at least 1.
double cgroup_cpu_quota(const std::string& proc_self_cgroup, const std::string& sys_root);
int cpus_under_quota(int cpus, double quota);

// Starts up to `n` threads, thread i running fn(i), into `pool`; returns how many
// started. A thread the system cannot create ends the loop instead of throwing past
// the joinable ones already started (std::terminate: exit 134 at --threads 1024 under a
// memory limit); callers whose work is shared from a counter go on with those started.
template <class F>
int start_threads(std::vector<std::thread>& pool, int n, F fn, int first = 0) {
  for (int i = first; i < first + n; ++i) {
    try {
      pool.emplace_back(fn, i);
    } catch (const std::system_error&) {
      break;
    }
  }
  return int(pool.size());
}

}  // namespace lathe
