// CpuJit::prefetch (runtime/cpu/jit_llvm.cpp): a cold plan's kernels compile on several
// threads at once, and get() then loads them without compiling again. Sources that are
// loaded, in the disk cache or given twice are compiled once at most; one that does not
// compile is left to get(), which throws with the compiler's message; one thread
// compiles nothing ahead.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>
#include <unistd.h>

#include "ir/assert.h"
#include "runtime/cpu/jit.h"

namespace lathe {
namespace {

std::string source(int i) {
  return "extern \"C\" int prefetch_entry_" + std::to_string(i) + "(int x) { return x * " + std::to_string(i + 2) +
         " + " + std::to_string(i) + "; }\n";
}
std::string symbol(int i) { return "prefetch_entry_" + std::to_string(i); }
int call(void* fn, int x) { return reinterpret_cast<int (*)(int)>(fn)(x); }

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "lathe-prefetch-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

TEST(JitPrefetch, CompilesSideBySideThenGetLoads) {
  if (!CpuJit::available()) GTEST_SKIP() << "built without the CPU JIT";
  TempDir dir;
  std::vector<JitSource> srcs;
  for (int i = 0; i < 3; ++i) srcs.push_back({source(i), "k" + std::to_string(i)});
  srcs.push_back(srcs[1]);  // the same source twice (a kernel per layer)
  {
    CpuJit jit(JitOptions{dir.path.string(), true});
    jit.prefetch(srcs, 2);
    EXPECT_EQ(jit.stats().compiled, 3);
    EXPECT_GT(jit.stats().compile_s, 0);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(call(jit.get(source(i), symbol(i), "k"), 10), 10 * (i + 2) + i);
    EXPECT_EQ(jit.stats().compiled, 3);  // nothing compiled twice
    EXPECT_EQ(jit.stats().disk_hits, 0);
    jit.prefetch(srcs, 2);  // all loaded now
    EXPECT_EQ(jit.stats().compiled, 3);
  }
  // get() wrote the prefetched objects to the disk cache: a new JIT compiles nothing.
  CpuJit again(JitOptions{dir.path.string(), true});
  again.prefetch(srcs, 2);
  EXPECT_EQ(again.stats().compiled, 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(call(again.get(source(i), symbol(i), "k"), 1), (i + 2) + i);
  EXPECT_EQ(again.stats().disk_hits, 3);
  EXPECT_EQ(again.stats().compiled, 0);
}

// An object prefetched here is what get() loads, even when another process wrote the
// kernel to the disk cache in between (not a disk hit, not kept in memory unused).
TEST(JitPrefetch, GetTakesThePrefetchedObjectBeforeTheDiskCache) {
  if (!CpuJit::available()) GTEST_SKIP() << "built without the CPU JIT";
  TempDir dir;
  std::vector<JitSource> srcs;
  for (int i = 20; i < 23; ++i) srcs.push_back({source(i), "k"});
  CpuJit a(JitOptions{dir.path.string(), true});
  a.prefetch(srcs, 2);
  ASSERT_EQ(a.stats().compiled, 3);
  {
    CpuJit b(JitOptions{dir.path.string(), true});  // writes all three to the disk cache
    for (int i = 20; i < 23; ++i) EXPECT_EQ(call(b.get(source(i), symbol(i), "k"), 2), 2 * (i + 2) + i);
    EXPECT_EQ(b.stats().compiled, 3);
  }
  for (int i = 20; i < 23; ++i) EXPECT_EQ(call(a.get(source(i), symbol(i), "k"), 3), 3 * (i + 2) + i);
  EXPECT_EQ(a.stats().disk_hits, 0);
  EXPECT_EQ(a.stats().compiled, 3);
}

TEST(JitPrefetch, ABadSourceIsLeftToGet) {
  if (!CpuJit::available()) GTEST_SKIP() << "built without the CPU JIT";
  CpuJit jit(JitOptions{"", false});
  const std::string bad = "extern \"C\" int prefetch_bad(int x) { return x + undeclared_name; }\n";
  jit.prefetch({{bad, "bad"}, {source(7), "good"}}, 2);
  EXPECT_EQ(jit.stats().compiled, 1);
  EXPECT_EQ(call(jit.get(source(7), symbol(7), "good"), 3), 3 * 9 + 7);
  try {
    jit.get(bad, "prefetch_bad", "bad");
    FAIL() << "a source that does not compile loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared_name"), std::string::npos) << e.what();
  }
}

TEST(JitPrefetch, OneThreadCompilesNothingAhead) {
  if (!CpuJit::available()) GTEST_SKIP() << "built without the CPU JIT";
  CpuJit jit(JitOptions{"", false});
  jit.prefetch({{source(11), "a"}, {source(12), "b"}}, 1);
  EXPECT_EQ(jit.stats().compiled, 0);
  EXPECT_EQ(call(jit.get(source(11), symbol(11), "a"), 1), 13 + 11);
  EXPECT_EQ(jit.stats().compiled, 1);
}

// A cache entry whose bytes changed but still load (a flipped byte inside .text) is a
// miss: the entry carries a hash of its object. Before, it ran: SIGILL or SIGSEGV on
// every run, or here, a wrong constant.
TEST(JitCache, AChangedEntryIsCompiledAgain) {
  if (!CpuJit::available()) GTEST_SKIP() << "built without the CPU JIT";
  TempDir dir;
  const std::string src = "extern \"C\" int cache_entry_k(int x) { return x + 0x1234567; }\n";
  {
    CpuJit jit(JitOptions{dir.path.string(), true});
    ASSERT_EQ(call(jit.get(src, "cache_entry_k", "k"), 1), 1 + 0x1234567);
  }
  std::filesystem::path entry;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) entry = e.path();
  ASSERT_FALSE(entry.empty());
  std::string bytes;
  {
    std::FILE* f = std::fopen(entry.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
    std::fclose(f);
  }
  const std::string imm = {'\x67', '\x45', '\x23', '\x01'};  // 0x1234567, little-endian
  const size_t at = bytes.find(imm);
  ASSERT_NE(at, std::string::npos) << "the constant is not in the object";
  bytes[at] = '\x68';  // the code now adds 0x1234568
  {
    std::FILE* f = std::fopen(entry.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  CpuJit again(JitOptions{dir.path.string(), true});
  EXPECT_EQ(call(again.get(src, "cache_entry_k", "k"), 1), 1 + 0x1234567);
  EXPECT_EQ(again.stats().disk_hits, 0);
  EXPECT_EQ(again.stats().compiled, 1);
  CpuJit third(JitOptions{dir.path.string(), true});  // the entry was written again
  EXPECT_EQ(call(third.get(src, "cache_entry_k", "k"), 1), 1 + 0x1234567);
  EXPECT_EQ(third.stats().disk_hits, 1);
}

}  // namespace
}  // namespace lathe
