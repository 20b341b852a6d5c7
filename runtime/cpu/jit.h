// In-process C++ compilation with Clang + LLVM ORC (the CPU twin of NVRTC).
//
// Each kernel is one translation unit. Its object code is cached by content hash
// (source + flags + compiler + host CPU) in memory and on disk, so a second run of
// the same plan compiles nothing. Clang and LLVM live in a module loaded on first use
// (jit_engine.h); their headers appear in jit_llvm.cpp only.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace lathe {

struct JitOptions {
  std::string cache_dir;  // "" = $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe, else ~/.cache/lathe
  bool disk_cache = true;
};

struct JitStats {
  int compiled = 0;     // kernels compiled by clang this process
  int disk_hits = 0;    // kernels loaded from the disk cache
  int memory_hits = 0;  // kernels already loaded in this process
  double compile_s = 0;  // wall time spent in clang + codegen
  double load_s = 0;     // wall time spent loading cached objects
};

// A kernel's source and its name for messages (CpuJit::prefetch).
struct JitSource {
  std::string source, kernel;
};

class CpuJit {
 public:
  explicit CpuJit(JitOptions o = {});
  ~CpuJit();
  CpuJit(const CpuJit&) = delete;
  CpuJit& operator=(const CpuJit&) = delete;

  // Address of extern "C" `symbol` defined by `source`, compiling on a cache miss.
  // Throws lathe::Error naming `kernel` with the compiler's messages and the
  // offending source lines when the source does not compile.
  void* get(const std::string& source, const std::string& symbol, const std::string& kernel);
  // Compiles the sources that are neither loaded nor in the disk cache on up to
  // `threads` threads at once, for later get() calls to load (a cold plan's kernels:
  // one clang each, otherwise one after another). Counts in stats() as compiled, its
  // wall time as compile_s. A source that does not compile is left to get(), which
  // throws with the compiler's messages.
  void prefetch(const std::vector<JitSource>& sources, int threads);

  const JitStats& stats() const;
  const std::string& cache_dir() const;
  std::string host_cpu() const;  // e.g. "znver4 (+avx512f, ...)"
  // False when lathe was built without Clang/LLVM. True does not promise the module
  // loads: the constructor throws lathe::Error naming where it looked if it does not.
  static bool available();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lathe
