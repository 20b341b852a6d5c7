// The interface between lathe and its Clang/LLVM JIT module (liblathe-jit.so).
//
// Clang and LLVM are large shared libraries: linking them into the lathe binary made
// every command, `lathe simulate` and `lathe --help` included, spend about 25 ms in the
// dynamic loader. The JIT therefore lives in a module that CpuJit (jit.cpp) dlopen()s
// the first time a CPU backend is created. Both sides are built from this tree by the
// same compiler, so the interface is a C++ class; kJitEngineVersion guards against a
// module left over from another build.
#pragma once

#include <string>
#include <vector>

#include "runtime/cpu/jit.h"

namespace lathe {

constexpr int kJitEngineVersion = 2;

class JitEngine {
 public:
  virtual ~JitEngine() = default;
  // As CpuJit::get. Errors are thrown as std::runtime_error with the full message.
  virtual void* get(const std::string& source, const std::string& symbol, const std::string& kernel) = 0;
  // As CpuJit::prefetch. Never throws for a source that does not compile (get does).
  virtual void prefetch(const std::vector<JitSource>& sources, int threads) = 0;
  virtual const JitStats& stats() const = 0;
  virtual std::string host_cpu() const = 0;
};

}  // namespace lathe

// The module's one exported symbol (extern "C" lathe_jit_create in jit_llvm.cpp). Returns
// a new engine, or nullptr with *error set when it cannot start (unknown host, version
// mismatch).
using lathe_jit_create_fn = lathe::JitEngine* (*)(int version, const char* cache_dir, bool disk_cache,
                                                  std::string* error);
#define LATHE_JIT_CREATE_SYMBOL "lathe_jit_create"
