#include "cli/run_weights.h"

#include <algorithm>
#include <iostream>

#include "frontend/hf_config.h"
#include "frontend/specs.h"
#include "runtime/hf_weights.h"

namespace lathe::cli {

bool model_has_weights(const std::string& model) {
  std::vector<std::string> names = builtin_names("models");  // built-in names keep precedence
  return std::find(names.begin(), names.end(), model) == names.end() && is_hf_dir(model);
}

WeightSource run_weight_source(const std::string& model, const Plan& plan, uint64_t seed,
                               std::string* description) {
  if (model_has_weights(model)) {
    for (const std::string& n : load_hf_config(model).notes)
      std::cerr << "lathe: warning: " << n << "\n";
    auto checkpoint = HfWeights::open(model);
    for (const std::string& n : checkpoint->check({&plan.prefill, &plan.decode}))
      std::cerr << "lathe: warning: " << n << "\n";
    *description = model;
    return checkpoint->source(plan.decode);
  }
  *description = "seed " + std::to_string(seed);
  return synthetic_source(seed);
}

}  // namespace lathe::cli
