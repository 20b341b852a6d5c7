// What every pass takes and returns. A pass is a function of its IR and options:
//   PassResult fuse_qkv(Graph&, const PassContext&);
// It rewrites the graph in place and says whether anything changed, with a short
// note for the report (what it did, or why it chose what it chose).
#pragma once

#include <string>

#include "ir/graph.h"
#include "ir/plan_options.h"
#include "ir/target.h"

namespace lathe {

struct PassContext {
  const PlanOptions& options;
  const Target& target;
};

struct PassResult {
  bool changed = false;
  std::string note;
};

using PassFn = PassResult (*)(Graph&, const PassContext&);

}  // namespace lathe
