// CpuJit: finds and loads the Clang/LLVM JIT module (jit_llvm.cpp, built as
// liblathe-jit.so) on first use and forwards to it. No Clang or LLVM header here.
#include "runtime/cpu/jit.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "ir/assert.h"
#include "runtime/cpu/jit_engine.h"

namespace lathe {

namespace {

std::string default_cache_dir() {
  if (const char* d = std::getenv("LATHE_CACHE_DIR"); d && *d) return std::string(d) + "/cpu";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/lathe/cpu";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/lathe/cpu";
  return "/tmp/lathe-cache/cpu";
}

#if LATHE_HAVE_JIT
constexpr const char* kModuleName = "liblathe-jit.so";

// Where the module may be: $LATHE_JIT_MODULE, beside the executable (the build tree
// puts it next to cli/lathe), an installed ../lib/lathe or ../lib, then the path the
// build wrote it to (for test binaries in other directories).
std::vector<std::string> module_candidates() {
  std::vector<std::string> out;
  if (const char* p = std::getenv("LATHE_JIT_MODULE"); p && *p) {
    out.push_back(p);
    return out;
  }
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path dir = exe.parent_path();
    out.push_back((dir / kModuleName).string());
    out.push_back((dir / ".." / "lib" / "lathe" / kModuleName).string());
    out.push_back((dir / ".." / "lib" / kModuleName).string());
  }
  out.push_back(LATHE_JIT_MODULE_PATH);
  return out;
}

// The module's factory, loaded once per process (and never unloaded: LLVM keeps
// global state). Throws lathe::Error naming every place it looked.
lathe_jit_create_fn load_module() {
  static std::once_flag once;
  static lathe_jit_create_fn create = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : module_candidates()) {
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) {
        tried += "\n  " + path + ": not found";
        continue;
      }
      void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* e = dlerror();
        tried += "\n  " + path + ": " + (e ? e : "dlopen failed");
        continue;
      }
      void* sym = dlsym(h, LATHE_JIT_CREATE_SYMBOL);
      if (!sym) {
        tried += "\n  " + path + ": no symbol " LATHE_JIT_CREATE_SYMBOL;
        continue;
      }
      create = reinterpret_cast<lathe_jit_create_fn>(sym);
      return;
    }
    failure = "the CPU backend's Clang/LLVM JIT module (" + std::string(kModuleName) +
              ") could not be loaded (set LATHE_JIT_MODULE to its path); tried:" + tried;
  });
  if (!create) throw Error(failure);
  return create;
}
#endif

}  // namespace

struct CpuJit::Impl {
  std::string dir;
  std::unique_ptr<JitEngine> engine;  // set by the constructor, which throws otherwise
};

CpuJit::CpuJit(JitOptions o) : impl_(std::make_unique<Impl>()) {
  impl_->dir = o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
  // A cache directory the user named that is a file would silently mean no cache (every
  // kernel compiled on every run).
  std::error_code ec;
  if (!o.cache_dir.empty() && o.disk_cache && std::filesystem::exists(o.cache_dir, ec) &&
      !std::filesystem::is_directory(o.cache_dir, ec))
    throw Error(o.cache_dir + ": the kernel cache directory is not a directory");
#if LATHE_HAVE_JIT
  lathe_jit_create_fn create = load_module();
  std::string error;
  impl_->engine.reset(create(kJitEngineVersion, impl_->dir.c_str(), o.disk_cache, &error));
  if (!impl_->engine) throw Error(error);
#else
  throw Error("this lathe was built without Clang/LLVM 14: the CPU backend is unavailable "
              "(install llvm-14-dev libclang-14-dev libclang-cpp14-dev and rebuild)");
#endif
}

CpuJit::~CpuJit() = default;

void* CpuJit::get(const std::string& source, const std::string& symbol, const std::string& kernel) {
  try {
    return impl_->engine->get(source, symbol, kernel);
  } catch (const std::exception& e) {  // the module throws std::runtime_error
    throw Error(e.what());
  }
}

void CpuJit::prefetch(const std::vector<JitSource>& sources, int threads) {
  try {
    impl_->engine->prefetch(sources, threads);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

const JitStats& CpuJit::stats() const { return impl_->engine->stats(); }
const std::string& CpuJit::cache_dir() const { return impl_->dir; }
std::string CpuJit::host_cpu() const { return impl_->engine->host_cpu(); }

bool CpuJit::available() { return LATHE_HAVE_JIT != 0; }

}  // namespace lathe
