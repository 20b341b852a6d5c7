// libFuzzer target over the spec frontend, the IR text parser, sweep files, plan
// files and tuning files: any input must either parse or raise lathe::Error; crashes, hangs and
// sanitizer reports are bugs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "codegen/plan.h"
#include "codegen/tuning.h"
#include "frontend/scenario.h"
#include "frontend/specs.h"
#include "frontend/sweep.h"
#include "ir/assert.h"
#include "ir/text.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the parser so one corpus covers all of them.
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 9) {
      case 0: lathe::parse_model_toml(text, "fuzz.toml"); break;
      case 1: lathe::parse_target_toml(text, "fuzz.toml"); break;
      case 2: lathe::parse_plan_toml(text, "fuzz.toml"); break;
      case 3: lathe::detect_spec_kind(text, "fuzz.toml"); break;
      case 4: {
        lathe::Graph g = lathe::parse_graph(text, "fuzz.ir");
        lathe::verify(g);
        break;
      }
      case 5: lathe::parse_scenario_toml(text, "fuzz.toml"); break;
      case 6: lathe::sweep_point_count(lathe::parse_sweep_toml(text, "fuzz.toml")); break;
      case 7: lathe::plan_from_json(std::string(text), "fuzz.json"); break;
      case 8: lathe::tuning_from_json(std::string(text), "fuzz.json"); break;
    }
  } catch (const lathe::Error&) {
  }
  return 0;
}
