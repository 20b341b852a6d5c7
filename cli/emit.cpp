#include "cli/emit.h"

#include <map>
#include <set>

#include "codegen/cpu/emit_cpu.h"
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

}  // namespace

void add_emitted_kernels(const Plan& plan, const std::string& backend, std::map<std::string, std::string>& files) {
  if (backend == "cpu") return emit_cpu(plan, files);
  throw Error("--emit " + backend + ": kernel emitter not part of this build yet");
}

}  // namespace lathe::cli
