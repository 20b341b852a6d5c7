#include "codegen/cuda/nvrtc.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "ir/assert.h"
#include "ir/hash.h"

#if LATHE_HAVE_CUDA
#include <nvrtc.h>
#endif

namespace lathe {

void parse_ptxas_info(const std::string& log, CudaBinary& b) {
  // ptxas prints, per function: "Compiling entry function 'NAME'", "Function
  // properties for NAME", "N bytes stack frame, N bytes spill stores, N bytes spill
  // loads", "Used N registers, ... N bytes smem".
  b.functions.clear();
  std::regex entry(R"(Compiling entry function '([A-Za-z0-9_]+)')");
  std::vector<std::pair<size_t, std::string>> starts;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), entry); it != std::sregex_iterator(); ++it)
    starts.push_back({size_t(it->position()), (*it)[1]});
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t end = i + 1 < starts.size() ? starts[i + 1].first : log.size();
    std::string part = log.substr(starts[i].first, end - starts[i].first);
    CudaFunctionInfo f;
    f.name = starts[i].second;
    std::smatch m;
    if (std::regex_search(part, m, std::regex(R"(Used (\d+) registers)"))) f.registers = std::stoi(m[1]);
    if (std::regex_search(part, m, std::regex(R"((\d+) bytes smem)"))) f.shared_bytes = std::stoi(m[1]);
    if (std::regex_search(part, m, std::regex(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
      f.stack_bytes = std::stoi(m[1]);
      f.spill_stores = std::stoi(m[2]);
      f.spill_loads = std::stoi(m[3]);
    }
    b.functions.push_back(f);
  }
  b.registers = b.shared_bytes = -1;
  b.spill_stores = b.spill_loads = b.stack_bytes = 0;
  for (const CudaFunctionInfo& f : b.functions) {
    b.registers = std::max(b.registers, f.registers);
    b.shared_bytes = std::max(b.shared_bytes, f.shared_bytes);
    b.spill_stores += f.spill_stores;
    b.spill_loads += f.spill_loads;
    b.stack_bytes += f.stack_bytes;
  }
}

namespace {

std::string cuda_cache_dir() {
  if (const char* d = std::getenv("LATHE_CACHE_DIR"); d && *d) return std::string(d) + "/cuda";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/lathe/cuda";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/lathe/cuda";
  return "/tmp/lathe-cache/cuda";
}


// The cache's .cubin file ends in a trailer: "lathe.c1" and a hash of the cubin, PTX and
// log (little-endian), so an entry whose bytes changed (a flipped byte in the cubin would
// load and run) or whose three files come from different writes is compiled again.
std::string entry_trailer(const std::string& cubin, const std::string& ptx, const std::string& log) {
  uint64_t h = fnv1a(log, fnv1a(ptx, fnv1a(cubin) ^ 0x9e3779b97f4a7c15ULL) ^ 0x9e3779b97f4a7c15ULL);
  std::string t = "lathe.c1";
  for (int i = 0; i < 8; ++i) t += char((h >> (8 * i)) & 0xff);
  return t;
}

std::string offending(const std::string& source, const std::string& log, const std::string& name) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  std::regex re(name + R"(\((\d+)\): error)");
  int shown = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator() && shown < 3; ++it, ++shown) {
    int line = std::stoi((*it)[1]);
    out += "  --- " + name + " around line " + std::to_string(line) + " ---\n";
    for (int l = std::max(1, line - 2); l <= std::min(int(lines.size()), line + 2); ++l)
      out += (l == line ? "  > " : "    ") + std::to_string(l) + ": " + lines[size_t(l - 1)] + "\n";
  }
  return out;
}

}  // namespace

#if LATHE_HAVE_CUDA
struct Nvrtc::Impl {
  NvrtcOptions opts;
  std::string why, dir, include;
  void* lib = nullptr;
  std::mutex mu;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) get_log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) get_cubin = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) get_ptx = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcVersion) get_version = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) num_archs = nullptr;
  decltype(&nvrtcGetSupportedArchs) get_archs = nullptr;

  template <typename F>
  bool sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (!f) why = std::string("libnvrtc lacks ") + name;
    return f != nullptr;
  }
  void check(nvrtcResult r, const char* call) {
    if (r != NVRTC_SUCCESS) throw Error(std::string("NVRTC: ") + call + " failed: " + error_string(r));
  }
};

Nvrtc::Nvrtc(NvrtcOptions o) : impl_(new Impl) {
  Impl& m = *impl_;
  m.opts = o;
  m.dir = o.cache_dir.empty() ? cuda_cache_dir() : o.cache_dir;
  // The CUDA headers: the option, else $LATHE_CUDA_INCLUDE (a toolkit elsewhere than at
  // build time), else the build's toolkit.
  const char* env_inc = std::getenv("LATHE_CUDA_INCLUDE");
  m.include = !o.include_dir.empty() ? o.include_dir
              : (env_inc && *env_inc) ? std::string(env_inc)
                                      : std::string(LATHE_CUDA_INCLUDE_DIR);
  for (const char* name : {"libnvrtc.so", LATHE_NVRTC_LIBRARY, "libnvrtc.so.13", "libnvrtc.so.12"}) {
    m.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (m.lib) break;
  }
  if (!m.lib) {
    m.why = "libnvrtc not found (install the CUDA toolkit or add its lib64 to LD_LIBRARY_PATH)";
    return;
  }
  bool ok = m.sym(m.create, "nvrtcCreateProgram") && m.sym(m.compile, "nvrtcCompileProgram") &&
            m.sym(m.destroy, "nvrtcDestroyProgram") && m.sym(m.log_size, "nvrtcGetProgramLogSize") &&
            m.sym(m.get_log, "nvrtcGetProgramLog") && m.sym(m.cubin_size, "nvrtcGetCUBINSize") &&
            m.sym(m.get_cubin, "nvrtcGetCUBIN") && m.sym(m.ptx_size, "nvrtcGetPTXSize") &&
            m.sym(m.get_ptx, "nvrtcGetPTX") && m.sym(m.error_string, "nvrtcGetErrorString") &&
            m.sym(m.get_version, "nvrtcVersion") && m.sym(m.num_archs, "nvrtcGetNumSupportedArchs") &&
            m.sym(m.get_archs, "nvrtcGetSupportedArchs");
  if (!ok) {
    dlclose(m.lib);
    m.lib = nullptr;
    return;
  }
  std::error_code ec;
  if (!std::filesystem::exists(m.include + "/cuda_fp16.h", ec)) {
    m.why = "CUDA headers not found in " + m.include + " (set LATHE_CUDA_INCLUDE to the toolkit's include directory)";
    dlclose(m.lib);
    m.lib = nullptr;
  }
}

Nvrtc::~Nvrtc() {
  // libnvrtc stays loaded until exit (a later Nvrtc gets the same handle from dlopen):
  // unloading a library that keeps its own C++ runtime state is unsafe, and leak
  // checkers can only attribute (and suppress, scripts/lsan.supp) what it keeps at
  // exit while it is still mapped.
  delete impl_;
}

bool Nvrtc::available() const { return impl_->lib != nullptr; }
const std::string& Nvrtc::why_unavailable() const { return impl_->why; }

std::string Nvrtc::version() const {
  if (!available()) return "";
  int a = 0, b = 0;
  impl_->get_version(&a, &b);
  return std::to_string(a) + "." + std::to_string(b);
}

std::vector<int> Nvrtc::supported_archs() const {
  std::vector<int> out;
  if (!available()) return out;
  int n = 0;
  impl_->num_archs(&n);
  out.resize(size_t(n));
  impl_->get_archs(out.data());
  return out;
}

CudaBinary Nvrtc::compile(const std::string& source, const std::string& kernel, int arch) {
  Impl& m = *impl_;
  if (!available()) throw Error("NVRTC unavailable: " + m.why);
  std::vector<int> archs = supported_archs();
  if (std::find(archs.begin(), archs.end(), arch) == archs.end()) {
    std::string list;
    for (int a : archs) list += (list.empty() ? "sm_" : ", sm_") + std::to_string(a);
    throw Error("NVRTC " + version() + " cannot compile for sm_" + std::to_string(arch) + " (supported: " + list + ")");
  }
  std::string arch_flag = "--gpu-architecture=sm_" + std::to_string(arch);
  std::string inc = "-I" + m.include;
  std::vector<const char*> opts = {arch_flag.c_str(), inc.c_str(), "-std=c++17", "--ptxas-options=-v",
                                   "-default-device", "--use_fast_math", "-lineinfo"};
  std::string key;
  {
    uint64_t h = fnv1a(source);
    for (const char* o : opts) h = fnv1a(o, h);
    h = fnv1a(version(), h);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
    key = buf;
  }
  namespace fs = std::filesystem;
  fs::path base = fs::path(m.dir) / (key + ".sm" + std::to_string(arch));
  std::error_code ec;
  CudaBinary b;
  if (m.opts.disk_cache && fs::exists(base.string() + ".cubin", ec) && fs::exists(base.string() + ".log", ec)) {
    auto slurp = [](const std::string& p) {
      std::ifstream f(p, std::ios::binary);
      std::ostringstream ss;
      ss << f.rdbuf();
      return ss.str();
    };
    std::string cubin = slurp(base.string() + ".cubin");
    b.ptx = slurp(base.string() + ".ptx");
    b.log = slurp(base.string() + ".log");
    if (cubin.size() > 16 && cubin.substr(cubin.size() - 16) == entry_trailer(cubin.substr(0, cubin.size() - 16), b.ptx, b.log)) {
      b.cubin = cubin.substr(0, cubin.size() - 16);
      b.cached = true;
      parse_ptxas_info(b.log, b);
      return b;
    }
    b = CudaBinary{};  // a changed or mixed entry: compiled again, and rewritten below
  }
  auto t0 = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(m.mu);
  std::string file = kernel + ".cu";
  nvrtcProgram prog;
  m.check(m.create(&prog, source.c_str(), file.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  nvrtcResult r = m.compile(prog, int(opts.size()), opts.data());
  size_t n = 0;
  m.log_size(prog, &n);
  b.log.assign(n, '\0');
  m.get_log(prog, b.log.data());
  while (!b.log.empty() && b.log.back() == '\0') b.log.pop_back();
  if (r != NVRTC_SUCCESS) {
    m.destroy(&prog);
    throw Error("NVRTC: kernel " + kernel + " does not compile for sm_" + std::to_string(arch) + " (" +
                m.error_string(r) + "):\n" + b.log.substr(0, 4000) + offending(source, b.log, file));
  }
  size_t cs = 0, ps = 0;
  m.check(m.cubin_size(prog, &cs), "nvrtcGetCUBINSize");
  b.cubin.assign(cs, '\0');
  m.check(m.get_cubin(prog, b.cubin.data()), "nvrtcGetCUBIN");
  m.check(m.ptx_size(prog, &ps), "nvrtcGetPTXSize");
  b.ptx.assign(ps, '\0');
  m.check(m.get_ptx(prog, b.ptx.data()), "nvrtcGetPTX");
  m.destroy(&prog);
  b.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  parse_ptxas_info(b.log, b);
  if (m.opts.disk_cache) {
    fs::create_directories(m.dir, ec);
    const std::string cubin_entry = b.cubin + entry_trailer(b.cubin, b.ptx, b.log);
    // The .cubin last: an entry is whole once its trailer matches the other two.
    for (auto [ext, data] : {std::pair<const char*, const std::string*>{".ptx", &b.ptx}, {".log", &b.log},
                             {".cubin", &cubin_entry}}) {
      std::string tmp = base.string() + ext + ".tmp." + std::to_string(::getpid());
      std::ofstream(tmp, std::ios::binary).write(data->data(), std::streamsize(data->size()));
      fs::rename(tmp, base.string() + ext, ec);
    }
  }
  return b;
}

#else  // no CUDA toolkit at build time

struct Nvrtc::Impl {
  std::string why = "lathe was built without the CUDA toolkit (NVRTC headers)";
};
Nvrtc::Nvrtc(NvrtcOptions) : impl_(new Impl) {}
Nvrtc::~Nvrtc() { delete impl_; }
bool Nvrtc::available() const { return false; }
const std::string& Nvrtc::why_unavailable() const { return impl_->why; }
std::string Nvrtc::version() const { return ""; }
std::vector<int> Nvrtc::supported_archs() const { return {}; }
CudaBinary Nvrtc::compile(const std::string&, const std::string&, int) {
  throw Error("NVRTC unavailable: " + impl_->why);
}

#endif

}  // namespace lathe
