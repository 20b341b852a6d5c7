// Kernel sources for `lathe compile --emit cpu|cuda`: one file per kernel under
// kernels/ in the plan directory.
#pragma once

#include <map>
#include <string>

#include "codegen/plan.h"

namespace lathe::cli {

// nvrtc_arch > 0 (cuda only): also compile each kernel with NVRTC for sm_<arch> and
// write the ptxas report.
void add_emitted_kernels(const Plan& plan, const std::string& backend, std::map<std::string, std::string>& files,
                         int nvrtc_arch = 0);

}  // namespace lathe::cli
