#include "ir/host.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>

namespace lathe {

namespace {
// The quota of a cgroup CPU limit in CPUs (0: none found). Reads the process's own
// cgroup where it is mounted at the usual place; anything unreadable counts as no limit.
double cgroup_cpu_quota() {
  std::string line;
  if (std::ifstream f("/sys/fs/cgroup/cpu.max"); f && std::getline(f, line)) {  // v2: "quota period" or "max period"
    const size_t sp = line.find(' ');
    if (sp != std::string::npos && line.compare(0, sp, "max") != 0) {
      try {
        const double quota = std::stod(line.substr(0, sp)), period = std::stod(line.substr(sp + 1));
        if (quota > 0 && period > 0) return quota / period;
      } catch (...) {
      }
    }
    return 0;
  }
  std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");  // v1
  double quota = 0, period = 0;
  if (q >> quota && p >> period && quota > 0 && period > 0) return quota / period;
  return 0;
}
}  // namespace

int available_cpus() {
  int n = int(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (const double quota = cgroup_cpu_quota(); quota > 0) n = std::min(n, int(std::ceil(quota)));
  return std::max(1, n);
}

}  // namespace lathe
