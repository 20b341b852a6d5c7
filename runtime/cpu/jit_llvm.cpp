// The one translation unit that includes Clang and LLVM headers. It is built as the
// module liblathe-jit.so, which CpuJit (jit.cpp) loads on first use, so commands that
// never compile a CPU kernel do not load Clang and LLVM at all (jit_engine.h).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <fcntl.h>
#include <unistd.h>

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Frontend/Utils.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/Demangle/Demangle.h>
#include <llvm/ExecutionEngine/JITEventListener.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/SymbolSize.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/xxhash.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SHA1.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "runtime/cpu/jit_engine.h"

namespace lathe {
namespace {

using Fail = std::runtime_error;

// Source lines around each "kernel.cpp:LINE:" the compiler mentions.
std::string offending_lines(const std::string& source, const std::string& diag) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  size_t pos = 0;
  int shown = 0;
  std::vector<int> done;
  while ((pos = diag.find("kernel.cpp:", pos)) != std::string::npos && shown < 3) {
    pos += 11;
    int line = std::atoi(diag.c_str() + pos);
    if (line <= 0 || line > int(lines.size()) || std::find(done.begin(), done.end(), line) != done.end()) continue;
    done.push_back(line);
    out += "  --- kernel.cpp around line " + std::to_string(line) + " ---\n";
    for (int l = std::max(1, line - 2); l <= std::min(int(lines.size()), line + 2); ++l)
      out += (l == line ? "  > " : "    ") + std::to_string(l) + ": " + lines[size_t(l - 1)] + "\n";
    ++shown;
  }
  return out;
}

// LATHE_PERF_MAP=1: every function of every kernel object the JIT loads (the kernel's
// entry and the loop bodies it hands the thread pool) goes to /tmp/perf-PID.map as
// "START SIZE NAME", the file `perf report` reads for code it finds no binary for, so
// profiles name the generated kernels instead of [JIT] addresses. NAME is the demangled
// function; a kernel's entry also carries the kernel it was loaded for (its node).
// Kernels are then compiled with frame pointers (LlvmEngine::flags).
class PerfMap final : public llvm::JITEventListener {
 public:
  static std::unique_ptr<PerfMap> from_env() {
    const char* v = std::getenv("LATHE_PERF_MAP");
    if (!v || !*v || std::string(v) == "0") return nullptr;
    FILE* f = file();
    return f ? std::unique_ptr<PerfMap>(new PerfMap(f)) : nullptr;
  }
  // The kernel whose object is being added (set under the engine's lock).
  void set_kernel(const std::string& k) { kernel_ = k; }

  void notifyObjectLoaded(ObjectKey, const llvm::object::ObjectFile& obj,
                          const llvm::RuntimeDyld::LoadedObjectInfo& info) override {
    std::lock_guard<std::mutex> lock(file_mu());
    for (const auto& [sym, size] : llvm::object::computeSymbolSizes(obj)) {
      auto type = sym.getType();
      auto name = sym.getName();
      auto sec = sym.getSection();
      auto addr = sym.getAddress();
      auto flags = sym.getFlags();
      if (!type || !name || !sec || !addr || !flags) {
        llvm::consumeError(type.takeError());
        llvm::consumeError(name.takeError());
        llvm::consumeError(sec.takeError());
        llvm::consumeError(addr.takeError());
        llvm::consumeError(flags.takeError());
        continue;
      }
      if (*type != llvm::object::SymbolRef::ST_Function || size == 0 || *sec == obj.section_end()) continue;
      const uint64_t base = info.getSectionLoadAddress(**sec);
      if (base == 0) continue;
      const uint64_t start = base + (*addr - (*sec)->getAddress());
      // Template functions (a GEMV's row loop, say) are weak: ORC runs the first loaded
      // object's copy for every later kernel (a later copy may still be loaded, never
      // run), so each is listed once, without a kernel; entries carry their kernel.
      std::string fn = llvm::demangle(name->str());
      if (*flags & llvm::object::SymbolRef::SF_Weak) {
        if (!weak_.insert(name->str()).second) continue;
      } else if (*flags & llvm::object::SymbolRef::SF_Global) {
        fn += " [" + kernel_ + "]";
      }
      std::fprintf(f_, "%llx %llx %s\n", (unsigned long long)start, (unsigned long long)size, fn.c_str());
    }
    std::fflush(f_);
  }

 private:
  explicit PerfMap(FILE* f) : f_(f) {}
  // The process's map, emptied when first opened (a file left by an earlier process
  // with the same pid is not this one's) and shared by every engine; never closed, as
  // perf reads it after the process exits. No symlink is followed.
  static FILE* file() {
    static FILE* f = [] {
      const std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
      FILE* out = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
      if (!out) {
        std::fprintf(stderr, "lathe: LATHE_PERF_MAP: cannot write %s: %s (no perf map)\n", path.c_str(),
                     std::strerror(errno));
        if (fd >= 0) ::close(fd);
      }
      return out;
    }();
    return f;
  }
  static std::mutex& file_mu() {
    static std::mutex mu;
    return mu;
  }
  FILE* f_;
  std::string kernel_;
  std::set<std::string> weak_;  // weak functions already listed by this engine
};

class LlvmEngine final : public JitEngine {
 public:
  LlvmEngine(std::string dir, bool disk_cache) : dir_(std::move(dir)), disk_cache_(disk_cache) {
    static std::once_flag init;
    std::call_once(init, [] {
      llvm::InitializeNativeTarget();
      llvm::InitializeNativeTargetAsmPrinter();
      llvm::InitializeNativeTargetAsmParser();
    });
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) throw Fail("JIT: cannot detect the host: " + llvm::toString(jtmb.takeError()));
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    cpu_ = jtmb->getCPU();
    features_ = jtmb->getFeatures().getString();
    jtmb_ = std::make_unique<llvm::orc::JITTargetMachineBuilder>(*jtmb);
    tm_ = target_machine();
    perf_map_ = PerfMap::from_env();
    // With a perf map, the object layer LLJIT makes by default on ELF hosts (RTDyld with
    // a section memory manager) is made here so the map can listen to it.
    llvm::orc::LLJITBuilder builder;
    builder.setJITTargetMachineBuilder(*jtmb);
    if (perf_map_)
      builder.setObjectLinkingLayerCreator([this](llvm::orc::ExecutionSession& es, const llvm::Triple&) {
        auto layer = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
            es, [] { return std::make_unique<llvm::SectionMemoryManager>(); });
        layer->registerJITEventListener(*perf_map_);
        return llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>>(std::move(layer));
      });
    auto jit = builder.create();
    if (!jit) throw Fail("JIT: cannot create LLJIT: " + llvm::toString(jit.takeError()));
    jit_ = std::move(*jit);
    // Kernels resolve libc/libm symbols in the process's global scope.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit_->getDataLayout().getGlobalPrefix());
    if (!gen) throw Fail("JIT: cannot search the process for symbols: " + llvm::toString(gen.takeError()));
    jit_->getMainJITDylib().addGenerator(std::move(*gen));
  }

  void* get(const std::string& source, const std::string& symbol, const std::string& kernel) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string key = key_of(source);
    if (auto it = addrs_.find({key, symbol}); it != addrs_.end()) {
      ++stats_.memory_hits;
      return it->second;
    }
    if (loaded_.count(key)) {  // the object is loaded; another of its symbols
      ++stats_.memory_hits;
      return addrs_[{key, symbol}] = lookup(symbol, kernel);
    }
    namespace fs = std::filesystem;
    const fs::path file = cache_file(key);
    std::error_code ec;
    auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<llvm::MemoryBuffer> obj;
    if (auto it = prefetched_.find(key); it != prefetched_.end()) {  // compiled and counted by prefetch
      obj = std::move(it->second);
      prefetched_.erase(it);
    } else if (disk_cache_ && fs::exists(file, ec)) {
      // A cache entry that does not load (truncated by a full disk, corrupted, written
      // by another build) or whose trailer does not hash its object (a flipped byte in
      // .text loaded and ran: SIGILL, SIGSEGV) is a miss: it is removed and the kernel
      // compiled again, where it failed every later run before.
      auto buf = llvm::MemoryBuffer::getFile(file.string());
      std::unique_ptr<llvm::MemoryBuffer> checked = buf ? verified_entry(**buf) : nullptr;
      if (checked && try_add_object(std::move(checked), kernel)) {
        loaded_[key] = true;
        auto sym = jit_->lookup(symbol);
        if (sym) {
          void* addr = addrs_[{key, symbol}] = reinterpret_cast<void*>(sym->getAddress());
          ++stats_.disk_hits;
          stats_.load_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          return addr;
        }
        llvm::consumeError(sym.takeError());
        drop_last_object();
        loaded_.erase(key);
      }
      fs::remove(file, ec);
    }
    if (!obj) {
      obj = compile(source, kernel, *tm_);
      stats_.compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++stats_.compiled;
    }
    if (disk_cache_) {
      // Write through a temporary name and rename: a concurrent or interrupted run
      // never sees a partial object.
      fs::create_directories(dir_, ec);
      fs::path tmp = file;
      tmp += ".tmp." + std::to_string(::getpid());
      bool written = false;
      {
        std::ofstream out(tmp, std::ios::binary);
        out.write(obj->getBufferStart(), std::streamsize(obj->getBufferSize()));
        const std::string trailer = entry_trailer(obj->getBuffer());
        out.write(trailer.data(), std::streamsize(trailer.size()));
        out.close();
        written = bool(out);
      }
      // A write that failed (a full disk) leaves no entry: the kernel is compiled again.
      if (written) fs::rename(tmp, file, ec);
      if (!written || ec) fs::remove(tmp, ec);
    }
    add_object(std::move(obj), kernel);
    loaded_[key] = true;
    return addrs_[{key, symbol}] = lookup(symbol, kernel);
  }

  void prefetch(const std::vector<JitSource>& sources, int threads) override {
    std::lock_guard<std::mutex> lock(mu_);
    // The misses: not loaded, not compiled already, not in the disk cache; once each.
    std::vector<std::pair<std::string, const JitSource*>> todo;
    std::set<std::string> seen;
    for (const JitSource& src : sources) {
      std::string key = key_of(src.source);
      if (loaded_.count(key) || prefetched_.count(key) || !seen.insert(key).second) continue;
      std::error_code ec;
      if (disk_cache_ && std::filesystem::exists(cache_file(key), ec)) continue;
      todo.emplace_back(std::move(key), &src);
    }
    const int n = int(std::min<size_t>(todo.size(), size_t(std::max(1, threads))));
    if (n < 2) return;  // get() compiles a lone miss as fast
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<llvm::MemoryBuffer>> objs(todo.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
      // A target machine per thread: codegen does not share one safely.
      std::unique_ptr<llvm::TargetMachine> tm;
      try {
        tm = target_machine();
      } catch (const std::exception&) {
        return;  // get() compiles what is left
      }
      for (size_t i; (i = next++) < todo.size();) {
        try {
          objs[i] = compile(todo[i].second->source, todo[i].second->kernel, *tm);
        } catch (const std::exception&) {
          // Left to get(), which compiles it again and throws with the messages.
        }
      }
    };
    std::vector<std::thread> pool;
    pool.reserve(size_t(n - 1));
    for (int t = 1; t < n; ++t) {
      try {
        pool.emplace_back(work);
      } catch (const std::exception&) {
        break;  // no more threads: the ones started and this one take the rest
      }
    }
    work();
    for (std::thread& t : pool) t.join();
    for (size_t i = 0; i < todo.size(); ++i)
      if (objs[i]) {
        prefetched_[todo[i].first] = std::move(objs[i]);
        ++stats_.compiled;
      }
    stats_.compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  const JitStats& stats() const override { return stats_; }
  std::string host_cpu() const override { return cpu_; }

 private:
  std::string dir_;
  bool disk_cache_;
  JitStats stats_;
  std::mutex mu_;
  std::unique_ptr<PerfMap> perf_map_;  // declared before jit_: its object layer listens to it
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  std::map<std::string, std::unique_ptr<llvm::MemoryBuffer>> prefetched_;  // by key, not yet loaded
  std::string cpu_, features_;
  std::map<std::string, bool> loaded_;                        // objects added, by key
  llvm::orc::ResourceTrackerSP last_rt_;                      // the last cached object added
  std::map<std::pair<std::string, std::string>, void*> addrs_;  // (key, symbol) -> address

  std::vector<std::string> flags() const {
    std::vector<std::string> f = {"-x", "c++", "-std=c++17", "-O3", "-march=native", "-fno-exceptions", "-fno-rtti",
                                  "-ffp-contract=fast", "-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math",
                                  "-fno-math-errno", "-Wno-unused-function", "-Wno-unused-parameter"};
    // With a perf map, frame pointers too, so `perf record -g` walks from a kernel to
    // what it calls and back to the thread pool (a separate cache entry: the key
    // hashes the flags).
    if (perf_map_) f.push_back("-fno-omit-frame-pointer");
    return f;
  }

  // A cache entry is the object followed by a trailer: kEntryMagic and the object's
  // xxHash64 (little-endian). An entry whose trailer or hash does not match is a miss.
  static constexpr char kEntryMagic[8] = {'l', 'a', 't', 'h', 'e', '.', 'o', '1'};
  static std::string entry_trailer(llvm::StringRef obj) {
    std::string t(kEntryMagic, sizeof kEntryMagic);
    const uint64_t h = llvm::xxHash64(obj);
    for (int i = 0; i < 8; ++i) t += char((h >> (8 * i)) & 0xff);
    return t;
  }
  static std::unique_ptr<llvm::MemoryBuffer> verified_entry(const llvm::MemoryBuffer& file) {
    const llvm::StringRef all = file.getBuffer();
    if (all.size() <= 16) return nullptr;
    const llvm::StringRef obj = all.drop_back(16);
    if (all.take_back(16) != entry_trailer(obj)) return nullptr;
    return llvm::MemoryBuffer::getMemBufferCopy(obj, file.getBufferIdentifier());
  }

  std::filesystem::path cache_file(const std::string& key) const { return std::filesystem::path(dir_) / (key + ".o"); }

  std::string key_of(const std::string& source) const {
    llvm::SHA1 h;
    h.update(source);
    for (const std::string& f : flags()) h.update(f);
    h.update("clang-14|" + cpu_ + "|" + features_);
    auto digest = h.final();
    std::string hex;
    static const char* k = "0123456789abcdef";
    for (unsigned char c : digest) {
      hex += k[c >> 4];
      hex += k[c & 15];
    }
    return hex;
  }

  void add_object(std::unique_ptr<llvm::MemoryBuffer> obj, const std::string& kernel) {
    if (perf_map_) perf_map_->set_kernel(kernel);
    auto rt = jit_->getMainJITDylib().createResourceTracker();
    if (auto err = jit_->addObjectFile(rt, std::move(obj)))
      throw Fail("JIT: cannot load the object of kernel " + kernel + ": " + llvm::toString(std::move(err)));
  }
  // Adds a cached object; false (nothing added) when it does not load.
  bool try_add_object(std::unique_ptr<llvm::MemoryBuffer> obj, const std::string& kernel) {
    if (perf_map_) perf_map_->set_kernel(kernel);
    auto rt = jit_->getMainJITDylib().createResourceTracker();
    if (auto err = jit_->addObjectFile(rt, std::move(obj))) {
      llvm::consumeError(std::move(err));
      if (auto e = rt->remove()) llvm::consumeError(std::move(e));
      return false;
    }
    last_rt_ = rt;
    return true;
  }
  void drop_last_object() {
    if (last_rt_)
      if (auto e = last_rt_->remove()) llvm::consumeError(std::move(e));
    last_rt_ = nullptr;
  }
  void* lookup(const std::string& symbol, const std::string& kernel) {
    auto sym = jit_->lookup(symbol);
    if (!sym) throw Fail("JIT: kernel " + kernel + " has no symbol " + symbol + ": " + llvm::toString(sym.takeError()));
    return reinterpret_cast<void*>(sym->getAddress());
  }

  std::unique_ptr<llvm::TargetMachine> target_machine() const {
    auto tm = jtmb_->createTargetMachine();
    if (!tm) throw Fail("JIT: cannot create a target machine: " + llvm::toString(tm.takeError()));
    return std::move(*tm);
  }

  // One kernel's object code, on target machine tm (safe on several threads at once,
  // each with its own tm: every call has its own clang instance and LLVM context).
  std::unique_ptr<llvm::MemoryBuffer> compile(const std::string& source, const std::string& kernel,
                                              llvm::TargetMachine& tm) const {
    auto opts = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
    std::string diag_text;
    llvm::raw_string_ostream diag_os(diag_text);
    auto* printer = new clang::TextDiagnosticPrinter(diag_os, &*opts);
    auto diags = llvm::makeIntrusiveRefCnt<clang::DiagnosticsEngine>(
        llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), &*opts, printer);
    std::vector<std::string> f = flags();
    std::vector<const char*> args = {LATHE_CLANG_EXECUTABLE};
    for (const std::string& s : f) args.push_back(s.c_str());
    args.push_back("-resource-dir");
    args.push_back(LATHE_CLANG_RESOURCE_DIR);
    args.push_back("kernel.cpp");
    std::unique_ptr<clang::CompilerInvocation> inv = clang::createInvocationFromCommandLine(args, diags);
    if (!inv) throw Fail("JIT: clang rejected its command line for kernel " + kernel + ":\n" + diag_os.str());
    inv->getPreprocessorOpts().addRemappedFile("kernel.cpp", llvm::MemoryBuffer::getMemBufferCopy(source).release());
    clang::CompilerInstance ci;
    ci.setInvocation(std::move(inv));
    ci.createDiagnostics(printer, false);
    // "N errors generated." to a stream of this call's own (llvm::nulls() is one
    // buffered stream for the process; prefetch compiles on several threads).
    ci.setVerboseOutputStream(std::make_unique<llvm::raw_null_ostream>());
    llvm::LLVMContext ctx;
    clang::EmitLLVMOnlyAction action(&ctx);
    if (!ci.ExecuteAction(action) || ci.getDiagnostics().hasErrorOccurred()) {
      diag_os.flush();
      throw Fail("JIT: generated kernel " + kernel + " does not compile:\n" + diag_text +
                 offending_lines(source, diag_text));
    }
    std::unique_ptr<llvm::Module> mod = action.takeModule();
    if (!mod) throw Fail("JIT: clang produced no module for kernel " + kernel);
    mod->setDataLayout(tm.createDataLayout());
    mod->setTargetTriple(tm.getTargetTriple().str());
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
      throw Fail("JIT: the target machine cannot emit object files");
    pm.run(*mod);
    return llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(buf.data(), buf.size()), kernel);
  }
};

}  // namespace
}  // namespace lathe

extern "C" __attribute__((visibility("default"))) lathe::JitEngine* lathe_jit_create(int version,
                                                                                    const char* cache_dir,
                                                                                    bool disk_cache,
                                                                                    std::string* error) {
  if (version != lathe::kJitEngineVersion) {
    *error = "JIT module interface version " + std::to_string(lathe::kJitEngineVersion) +
             ", lathe expects " + std::to_string(version) + " (a module from another build?)";
    return nullptr;
  }
  try {
    return new lathe::LlvmEngine(cache_dir, disk_cache);
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}
