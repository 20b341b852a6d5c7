// LATHE_PERF_MAP=1 (runtime/cpu/jit_llvm.cpp): the JIT lists each loaded object's
// functions in /tmp/perf-PID.map. The row of a kernel's entry starts at the address the
// JIT returns for it and carries the kernel's name; a weak (template) function is listed
// once even when two objects define it; every row has a positive size.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "runtime/cpu/jit.h"

namespace lathe {
namespace {

const char* kSource = R"(
template <int N> __attribute__((noinline)) int twice(int x) { return N * x; }
extern "C" int perf_map_entry_%d(int x) { return twice<2>(x) + %d; }
)";

std::string source(int i) {
  char buf[512];
  std::snprintf(buf, sizeof buf, kSource, i, i);
  return buf;
}

TEST(PerfMap, ListsKernelEntriesAtTheirAddresses) {
  if (!CpuJit::available()) GTEST_SKIP() << "built without the CPU JIT";
  const std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
  ::setenv("LATHE_PERF_MAP", "1", 1);
  std::vector<void*> entries;
  {
    CpuJit jit(JitOptions{"", false});
    for (int i = 0; i < 2; ++i)
      entries.push_back(jit.get(source(i), "perf_map_entry_" + std::to_string(i), "kernel" + std::to_string(i)));
    EXPECT_EQ(reinterpret_cast<int (*)(int)>(entries[1])(5), 11);
  }
  ::unsetenv("LATHE_PERF_MAP");
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no " << path;
  std::vector<std::string> names;
  std::vector<unsigned long long> starts;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string start, size, name;
    ls >> start >> size;
    std::getline(ls, name);
    ASSERT_GT(std::stoull(size, nullptr, 16), 0u) << line;
    starts.push_back(std::stoull(start, nullptr, 16));
    names.push_back(name.substr(1));
  }
  std::remove(path.c_str());
  for (int i = 0; i < 2; ++i) {
    const std::string want = "perf_map_entry_" + std::to_string(i) + " [kernel" + std::to_string(i) + "]";
    bool found = false;
    for (size_t r = 0; r < names.size(); ++r)
      if (names[r] == want) {
        found = true;
        EXPECT_EQ(starts[r], reinterpret_cast<unsigned long long>(entries[size_t(i)])) << want;
      }
    EXPECT_TRUE(found) << want;
  }
  int twice = 0;
  for (const std::string& n : names) twice += n == "int twice<2>(int)";
  EXPECT_EQ(twice, 1) << "a weak function listed once, however many objects define it";
}

}  // namespace
}  // namespace lathe
