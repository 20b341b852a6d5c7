#include "cli/emit.h"

#include <map>
#include <set>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/nvrtc.h"
#include "ir/assert.h"

namespace lathe::cli {

namespace {

// kernels/cpu/: prelude.h (the building blocks), one <symbol>.cpp per distinct kernel
// (identical layers share one) naming the nodes that launch it, and launch_order.txt.
void emit_cpu(const Plan& plan, std::map<std::string, std::string>& files) {
  std::string prelude(cpu_prelude_text());
  files["kernels/cpu/prelude.h"] = "// lathe CPU kernel prelude (abi.h + kernel_prelude.h + kernel_lib.h)\n" + prelude;
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> kernels;  // symbol -> (body, users)
  std::string order = "# phase node kernel symbol\n";
  for (const Graph* g : {&plan.prefill, &plan.decode})
    for (const CpuKernel& k : emit_cpu_kernels(*g)) {
      auto& e = kernels[k.symbol];
      if (e.first.empty()) e.first = k.body;
      e.second.push_back(std::string(phase_name(g->phase)) + "/" + k.node_name);
      order += std::string(phase_name(g->phase)) + " " + k.node_name + " " + k.label + " " + k.symbol + "\n";
    }
  for (const auto& [symbol, e] : kernels) {
    std::string users = "// launched by:";
    for (size_t i = 0; i < e.second.size(); ++i) users += (i % 6 == 0 ? "\n//  " : " ") + e.second[i];
    files["kernels/cpu/" + symbol + ".cpp"] = "#include \"prelude.h\"\n\n" + users + "\n" + e.first;
  }
  files["kernels/cpu/launch_order.txt"] = order;
}

// kernels/cuda/: one self-contained <symbol>.cu per distinct kernel (prelude + the
// node's entry points; NVRTC compiles each alone), launch_order.txt, and with
// `nvrtc_arch` > 0 a compile report (registers, shared memory, spills per kernel).
void emit_cuda(const Plan& plan, std::map<std::string, std::string>& files, int nvrtc_arch) {
  std::map<std::string, std::pair<const CudaKernel*, std::vector<std::string>>> kernels;
  std::vector<CudaKernel> all;
  for (const Graph* g : {&plan.prefill, &plan.decode})
    for (CudaKernel& k : emit_cuda_kernels(*g)) all.push_back(std::move(k));
  std::string order = "# phase node kernel entry-points\n";
  size_t i = 0;
  for (const Graph* g : {&plan.prefill, &plan.decode})
    for (size_t n = 0; n < g->num_nodes(); ++n, ++i) {
      const CudaKernel& k = all[i];
      std::string base = k.entries[0].symbol.substr(0, 18);
      auto& e = kernels[base];
      e.first = &k;
      e.second.push_back(std::string(phase_name(g->phase)) + "/" + k.node_name);
      order += std::string(phase_name(g->phase)) + " " + k.node_name + " " + k.label;
      for (const CudaEntry& en : k.entries) order += " " + en.symbol;
      order += "\n";
    }
  files["kernels/cuda/launch_order.txt"] = order;
  std::string report = "| kernel | entry | registers | shared bytes | spill stores | spill loads |\n|---|---|---:|---:|---:|---:|\n";
  Nvrtc nvrtc;
  if (nvrtc_arch > 0 && !nvrtc.available()) throw Error("--nvrtc: " + nvrtc.why_unavailable());
  for (const auto& [base, e] : kernels) {
    std::string users = "// launched by:";
    for (size_t u = 0; u < e.second.size(); ++u) users += (u % 6 == 0 ? "\n//  " : " ") + e.second[u];
    files["kernels/cuda/" + base + ".cu"] = users + "\n" + e.first->source;
    if (nvrtc_arch > 0) {
      CudaBinary bin = nvrtc.compile(e.first->source, base, nvrtc_arch);
      // One cubin holds every entry point; ptxas reports each function in turn.
      for (const CudaFunctionInfo& f : bin.functions)
        report += "| " + e.first->label + " | " + f.name + " | " + std::to_string(f.registers) + " | " +
                  std::to_string(f.shared_bytes) + " | " + std::to_string(f.spill_stores) + " | " +
                  std::to_string(f.spill_loads) + " |\n";
      files["kernels/cuda/" + base + ".sm" + std::to_string(nvrtc_arch) + ".log"] = bin.log;
    }
  }
  if (nvrtc_arch > 0) files["kernels/cuda/nvrtc_report.md"] = report;
}

}  // namespace

void add_emitted_kernels(const Plan& plan, const std::string& backend, std::map<std::string, std::string>& files,
                         int nvrtc_arch) {
  if (backend == "cpu") return emit_cpu(plan, files);
  if (backend == "cuda") {
    try {
      cuda_arch_for(plan.target.compute_capability);
    } catch (const Error& e) {
      throw Error("--emit cuda: " + plan.target.name + ": " + e.what());
    }
    return emit_cuda(plan, files, nvrtc_arch);
  }
  throw Error("--emit: unknown backend '" + backend + "' (expected cpu or cuda)");
}

}  // namespace lathe::cli
