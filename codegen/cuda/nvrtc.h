// NVRTC, loaded with dlopen at run time: CUDA C++ to CUBIN (and PTX) for a named
// architecture, no GPU needed. Results are cached by content hash on disk
// ($XDG_CACHE_HOME/lathe/cuda). ptxas's verbose report gives registers, shared
// memory and spills per kernel.
#pragma once

#include <string>
#include <vector>

namespace lathe {

struct CudaFunctionInfo {
  std::string name;
  int registers = -1, shared_bytes = 0, stack_bytes = 0, spill_stores = 0, spill_loads = 0;
};

struct CudaBinary {
  std::string cubin;  // ELF for the architecture
  std::string ptx;
  std::string log;    // compiler and ptxas output
  std::vector<CudaFunctionInfo> functions;  // per entry point, from ptxas -v
  int registers = -1;     // the largest over the entry points
  int shared_bytes = -1;  // static shared memory, largest
  int spill_stores = -1, spill_loads = -1, stack_bytes = -1;  // summed
  bool cached = false;
  double compile_s = 0;
};

struct NvrtcOptions {
  std::string include_dir;  // CUDA toolkit headers ("" = detected)
  std::string cache_dir;    // "" = $LATHE_CACHE_DIR/cuda or $XDG_CACHE_HOME/lathe/cuda
  bool disk_cache = true;
};

class Nvrtc {
 public:
  explicit Nvrtc(NvrtcOptions o = {});
  ~Nvrtc();
  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

  // Whether libnvrtc and the CUDA headers were found; why not otherwise.
  bool available() const;
  const std::string& why_unavailable() const;
  std::string version() const;
  // Architectures NVRTC can compile to (80, 86, 89, 90, ...).
  std::vector<int> supported_archs() const;

  // Compiles `source` for sm_<arch>. Throws lathe::Error naming `kernel`, with the
  // compiler log and the offending lines, when it does not compile, and when `arch`
  // is not supported by this NVRTC.
  CudaBinary compile(const std::string& source, const std::string& kernel, int arch);

 private:
  struct Impl;
  Impl* impl_;
};

// Parses ptxas -v output ("Used 40 registers, ... 8 bytes spill stores") into b.
void parse_ptxas_info(const std::string& log, CudaBinary& b);

}  // namespace lathe
