#include "ir/host.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace lathe {

namespace {
// A limit file's "quota period" (cgroup v2 cpu.max; "max" = none), or v1's two files, in
// CPUs; 0 = no limit or unreadable.
double read_v2_limit(const std::string& dir) {
  std::ifstream f(dir + "/cpu.max");
  std::string quota, period;
  if (!(f >> quota >> period) || quota == "max") return 0;
  const double q = std::strtod(quota.c_str(), nullptr), p = std::strtod(period.c_str(), nullptr);
  return q > 0 && p > 0 ? q / p : 0;
}
double read_v1_limit(const std::string& dir) {
  std::ifstream q(dir + "/cpu.cfs_quota_us"), p(dir + "/cpu.cfs_period_us");
  double quota = 0, period = 0;
  return q >> quota && p >> period && quota > 0 && period > 0 ? quota / period : 0;
}

// The tightest CPU quota on this process's cgroup and its ancestors, in CPUs (0: none
// found). The cgroup comes from /proc/self/cgroup (v2: the "0::PATH" line; v1: the line
// whose controllers include cpu), under the usual mount points; inside a container with
// its own cgroup namespace the path is "/", the container's own limit.
}  // namespace

double cgroup_cpu_quota(const std::string& proc_self_cgroup, const std::string& sys_root) {
  std::istringstream f(proc_self_cgroup);
  std::string line, v1_path, v2_path;
  bool v1 = false, v2 = false;
  while (std::getline(f, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      v2 = true, v2_path = path;
      continue;
    }
    for (size_t s = 0; s <= controllers.size();) {
      const size_t e = std::min(controllers.find(',', s), controllers.size());
      if (controllers.compare(s, e - s, "cpu") == 0) v1 = true, v1_path = path;
      s = e + 1;
    }
  }
  double tightest = 0;
  auto walk = [&](const std::string& root, const std::string& path, double (*read)(const std::string&)) {
    for (std::filesystem::path p = path.empty() ? "/" : path;; p = p.parent_path()) {
      const double q = read(root + p.string());
      if (q > 0 && (tightest == 0 || q < tightest)) tightest = q;
      if (p == p.parent_path()) break;  // "/"
    }
  };
  std::error_code ec;
  if (v1)
    for (const std::string& root : {sys_root + "/cpu", sys_root + "/cpu,cpuacct"})
      if (std::filesystem::is_directory(root, ec)) {
        walk(root, v1_path, read_v1_limit);
        break;
      }
  if (v2)
    for (const std::string& root : {sys_root, sys_root + "/unified"})
      if (std::filesystem::exists(root + "/cgroup.controllers", ec)) {
        walk(root, v2_path, read_v2_limit);
        break;
      }
  return tightest;
}

int cpus_under_quota(int cpus, double quota) {
  // Compared in floating point: a quota of "practically unlimited" exceeds an int.
  if (quota > 0 && quota < double(cpus)) cpus = int(std::ceil(quota));
  return std::max(1, cpus);
}

int available_cpus() {
  int n = int(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  std::ifstream f("/proc/self/cgroup");
  std::stringstream text;
  text << f.rdbuf();
  return cpus_under_quota(n, cgroup_cpu_quota(text.str(), "/sys/fs/cgroup"));
}

}  // namespace lathe
