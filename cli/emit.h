// Kernel sources for `lathe compile --emit cpu|cuda`: one file per kernel under
// kernels/ in the plan directory.
#pragma once

#include <map>
#include <string>

#include "codegen/plan.h"

namespace lathe::cli {

void add_emitted_kernels(const Plan& plan, const std::string& backend, std::map<std::string, std::string>& files);

}  // namespace lathe::cli
