#include "cli/run_weights.h"

#include <iostream>

#include "frontend/hf_config.h"
#include "runtime/hf_weights.h"

namespace lathe::cli {

bool model_has_weights(const std::string& model) {
  return is_hf_dir(model);
}

WeightSource run_weight_source(const std::string& model, const Plan& plan, uint64_t seed,
                               std::string* description) {
  if (is_hf_dir(model)) {
    for (const std::string& n : load_hf_config(model).notes)
      std::cerr << "lathe: warning: " << n << "\n";
    auto checkpoint = HfWeights::open(model);
    checkpoint->check({&plan.prefill, &plan.decode});
    *description = model;
    return checkpoint->source(plan.decode);
  }
  *description = "seed " + std::to_string(seed);
  return synthetic_source(seed);
}

}  // namespace lathe::cli
