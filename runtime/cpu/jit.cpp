// The one translation unit that includes Clang and LLVM headers.
#include "runtime/cpu/jit.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "ir/assert.h"

#if LATHE_HAVE_JIT
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Frontend/Utils.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SHA1.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#endif

namespace lathe {

namespace {

std::string default_cache_dir() {
  if (const char* d = std::getenv("LATHE_CACHE_DIR"); d && *d) return std::string(d) + "/cpu";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/lathe/cpu";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/lathe/cpu";
  return "/tmp/lathe-cache/cpu";
}

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

}  // namespace

#if LATHE_HAVE_JIT

struct CpuJit::Impl {
  JitOptions opts;
  std::string dir;
  JitStats stats;
  std::mutex mu;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string cpu, features;
  std::map<std::string, bool> loaded;                        // objects added, by key
  std::map<std::pair<std::string, std::string>, void*> addrs;  // (key, symbol) -> address

  std::vector<std::string> flags() const {
    return {"-x", "c++", "-std=c++17", "-O3", "-march=native", "-fno-exceptions", "-fno-rtti",
            "-ffp-contract=fast", "-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math",
            "-fno-math-errno", "-Wno-unused-function", "-Wno-unused-parameter"};
  }

  std::string key_of(const std::string& source) const {
    llvm::SHA1 h;
    h.update(source);
    for (const std::string& f : flags()) h.update(f);
    h.update("clang-14|" + cpu + "|" + features);
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
    auto rt = jit->getMainJITDylib().createResourceTracker();
    if (auto err = jit->addObjectFile(rt, std::move(obj)))
      throw Error("JIT: cannot load the object of kernel " + kernel + ": " + llvm::toString(std::move(err)));
  }
  void* lookup(const std::string& symbol, const std::string& kernel) {
    auto sym = jit->lookup(symbol);
    if (!sym) throw Error("JIT: kernel " + kernel + " has no symbol " + symbol + ": " + llvm::toString(sym.takeError()));
    return reinterpret_cast<void*>(sym->getAddress());
  }

  std::unique_ptr<llvm::MemoryBuffer> compile(const std::string& source, const std::string& kernel) {
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
    if (!inv) throw Error("JIT: clang rejected its command line for kernel " + kernel + ":\n" + diag_os.str());
    inv->getPreprocessorOpts().addRemappedFile("kernel.cpp", llvm::MemoryBuffer::getMemBufferCopy(source).release());
    clang::CompilerInstance ci;
    ci.setInvocation(std::move(inv));
    ci.createDiagnostics(printer, false);
    llvm::LLVMContext ctx;
    clang::EmitLLVMOnlyAction action(&ctx);
    if (!ci.ExecuteAction(action) || ci.getDiagnostics().hasErrorOccurred()) {
      diag_os.flush();
      throw Error("JIT: generated kernel " + kernel + " does not compile:\n" + diag_text +
                  offending_lines(source, diag_text));
    }
    std::unique_ptr<llvm::Module> mod = action.takeModule();
    if (!mod) throw Error("JIT: clang produced no module for kernel " + kernel);
    mod->setDataLayout(tm->createDataLayout());
    mod->setTargetTriple(tm->getTargetTriple().str());
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
      throw Error("JIT: the target machine cannot emit object files");
    pm.run(*mod);
    return llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(buf.data(), buf.size()), kernel);
  }
};

CpuJit::CpuJit(JitOptions o) : impl_(std::make_unique<Impl>()) {
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
  impl_->opts = o;
  impl_->dir = o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) throw Error("JIT: cannot detect the host: " + llvm::toString(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
  impl_->cpu = jtmb->getCPU();
  impl_->features = jtmb->getFeatures().getString();
  auto tm = jtmb->createTargetMachine();
  if (!tm) throw Error("JIT: cannot create a target machine: " + llvm::toString(tm.takeError()));
  impl_->tm = std::move(*tm);
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
  if (!jit) throw Error("JIT: cannot create LLJIT: " + llvm::toString(jit.takeError()));
  impl_->jit = std::move(*jit);
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      impl_->jit->getDataLayout().getGlobalPrefix());
  if (!gen) throw Error("JIT: cannot search the process for symbols: " + llvm::toString(gen.takeError()));
  impl_->jit->getMainJITDylib().addGenerator(std::move(*gen));
}

CpuJit::~CpuJit() = default;

void* CpuJit::get(const std::string& source, const std::string& symbol, const std::string& kernel) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::string key = impl_->key_of(source);
  if (auto it = impl_->addrs.find({key, symbol}); it != impl_->addrs.end()) {
    ++impl_->stats.memory_hits;
    return it->second;
  }
  if (impl_->loaded.count(key)) {  // the object is loaded; another of its symbols
    ++impl_->stats.memory_hits;
    return impl_->addrs[{key, symbol}] = impl_->lookup(symbol, kernel);
  }
  namespace fs = std::filesystem;
  fs::path file = fs::path(impl_->dir) / (key + ".o");
  std::error_code ec;
  auto t0 = std::chrono::steady_clock::now();
  if (impl_->opts.disk_cache && fs::exists(file, ec)) {
    auto buf = llvm::MemoryBuffer::getFile(file.string());
    if (buf) {
      impl_->add_object(std::move(*buf), kernel);
      impl_->loaded[key] = true;
      void* addr = impl_->addrs[{key, symbol}] = impl_->lookup(symbol, kernel);
      ++impl_->stats.disk_hits;
      impl_->stats.load_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return addr;
    }
  }
  std::unique_ptr<llvm::MemoryBuffer> obj = impl_->compile(source, kernel);
  impl_->stats.compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++impl_->stats.compiled;
  if (impl_->opts.disk_cache) {
    // Write through a temporary name and rename: a concurrent or interrupted run
    // never sees a partial object.
    fs::create_directories(impl_->dir, ec);
    fs::path tmp = file;
    tmp += ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(obj->getBufferStart(), std::streamsize(obj->getBufferSize()));
    }
    fs::rename(tmp, file, ec);
    if (ec) fs::remove(tmp, ec);
  }
  impl_->add_object(std::move(obj), kernel);
  impl_->loaded[key] = true;
  return impl_->addrs[{key, symbol}] = impl_->lookup(symbol, kernel);
}

const JitStats& CpuJit::stats() const { return impl_->stats; }
const std::string& CpuJit::cache_dir() const { return impl_->dir; }
std::string CpuJit::host_cpu() const { return impl_->cpu; }
bool CpuJit::available() { return true; }

#else  // !LATHE_HAVE_JIT

struct CpuJit::Impl {
  JitStats stats;
  std::string dir;
};
CpuJit::CpuJit(JitOptions) : impl_(std::make_unique<Impl>()) {
  throw Error("this lathe was built without Clang/LLVM 14: the CPU backend is unavailable "
              "(install llvm-14-dev libclang-14-dev libclang-cpp14-dev and rebuild)");
}
CpuJit::~CpuJit() = default;
void* CpuJit::get(const std::string&, const std::string&, const std::string&) { return nullptr; }
const JitStats& CpuJit::stats() const { return impl_->stats; }
const std::string& CpuJit::cache_dir() const { return impl_->dir; }
std::string CpuJit::host_cpu() const { return ""; }
bool CpuJit::available() { return false; }

#endif

}  // namespace lathe
