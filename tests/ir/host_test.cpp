// available_cpus' cgroup part on a fake /sys/fs/cgroup tree: the tightest quota on the
// process's cgroup and its ancestors, v2 (also under unified/) and v1, and the cap.
#include "ir/host.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace lathe {
namespace {

namespace fs = std::filesystem;

struct FakeSys {
  fs::path root;
  FakeSys() : root(fs::temp_directory_path() / ("lathe-cgroup-test-" + std::to_string(::getpid()))) {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~FakeSys() { fs::remove_all(root); }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
};

TEST(Host, CgroupV2TakesTheTightestQuotaUpTheTree) {
  FakeSys s;
  s.write("cgroup.controllers", "cpu memory\n");
  s.write("a/cpu.max", "150000 100000\n");  // 1.5 CPUs on the parent
  s.write("a/b/cpu.max", "max 100000\n");   // none on the process's own
  s.write("cpu.max", "400000 100000\n");    // 4 at the root
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/a/b\n", s.root.string()), 1.5);
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/\n", s.root.string()), 4.0);  // a container's own namespace
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/other\n", s.root.string()), 4.0);
}

TEST(Host, CgroupV2UnderUnifiedAndV1) {
  FakeSys s;
  s.write("unified/cgroup.controllers", "cpu\n");
  s.write("unified/x/cpu.max", "250000 100000\n");
  s.write("cpu,cpuacct/y/cpu.cfs_quota_us", "-1\n");
  s.write("cpu,cpuacct/y/cpu.cfs_period_us", "100000\n");
  s.write("cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
  s.write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/x\n", s.root.string()), 2.5);
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("4:cpu,cpuacct:/y\n", s.root.string()), 3.0);
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("4:cpu,cpuacct:/y\n0::/x\n", s.root.string()), 2.5);
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("4:cpuacct:/y\n", s.root.string()), 0.0) << "cpuacct is not cpu";
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("", s.root.string()), 0.0);
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("garbage\n0:x\n", s.root.string()), 0.0);
}

TEST(Host, QuotaCapsTheCpuCount) {
  EXPECT_EQ(cpus_under_quota(16, 0), 16);
  EXPECT_EQ(cpus_under_quota(16, 1.5), 2);
  EXPECT_EQ(cpus_under_quota(16, 0.2), 1);
  EXPECT_EQ(cpus_under_quota(16, 3e9), 16) << "a quota beyond an int is no limit, not 1 thread";
  EXPECT_EQ(cpus_under_quota(0, 0), 1);
  EXPECT_GE(available_cpus(), 1);
}

}  // namespace
}  // namespace lathe
