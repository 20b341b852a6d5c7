// Where `lathe run` takes its weights from: a checkpoint named as the MODEL argument
// (a Hugging Face directory), or the seeded synthetic values.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/plan.h"
#include "runtime/weights.h"

namespace lathe::cli {

// True when MODEL names a checkpoint whose weights `lathe run` loads.
bool model_has_weights(const std::string& model);

// The weights of `model` for `plan`: checked against the plan's graphs before any is
// read (missing tensors, shapes, dtypes: lathe::Error naming file and tensor), or the
// synthetic values of `seed`. `description` says which ("seed 1", the directory).
WeightSource run_weight_source(const std::string& model, const Plan& plan, uint64_t seed,
                               std::string* description);

}  // namespace lathe::cli
