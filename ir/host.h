// The host's CPUs this process may use, for default thread counts.
#pragma once

namespace lathe {

// CPUs available to this process: those in its affinity mask (taskset, a container's
// cpuset), capped by a cgroup CPU quota (cgroup v2 cpu.max, v1 cfs_quota_us /
// cfs_period_us, rounded up), at least 1. std::thread::hardware_concurrency counts every
// online CPU, so a pool sized by it oversubscribes a container limited to a few, and its
// spinning workers then take turns on the same cores.
int available_cpus();

}  // namespace lathe
