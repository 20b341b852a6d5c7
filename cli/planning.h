// Puts the layers together for one plan: resolve specs, build both phases' graphs,
// lower them through the pass pipeline, simulate. Shared by simulate, whatif,
// compile, run, sweep.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli/common.h"
#include "frontend/specs.h"
#include "ir/assert.h"
#include "ir/model.h"
#include "codegen/plan.h"
#include "passes/pipeline.h"
#include "simulator/simulate.h"

namespace lathe {
struct CudaDeviceInfo;
}

namespace lathe::cli {

// --batch/--prompt/--gen; -1 means "not given" (plan file, then defaults apply).
struct WorkloadFlags {
  int64_t batch = -1, prompt = -1, gen = -1;
  void add_to(CLI::App* cmd);
  Workload resolve(Workload base) const;
};

// A plan its target cannot run: a weight, KV or activation format the target lacks,
// or a tp it has no link for. A lathe::Error like any other; whatif catches it to show
// that column as n/a rather than failing the table.
class UnsupportedOnTarget : public Error {
 public:
  UnsupportedOnTarget(const std::string& target, const std::string& msg) : Error(msg), target(target) {}
  std::string target;  // the target's name (with its overrides)
};

// A workload value a --plan file may set, for commands with their own workload flags
// (run, tune): the flag where it was given or the file is silent, else the file's value,
// held to [lo, hi] (what `command` takes; an error names the file and key).
int64_t flag_or_plan_file(bool flag_given, int64_t flag, bool file_sets, int64_t file_value, int64_t lo,
                          int64_t hi, const std::string& plan_file, const char* key, const char* command);

struct PlanRequest {
  std::string model, hardware;
  std::vector<std::string> sets;
  Workload workload;
  PlanOptions options;
  bool ideal = false;
  int64_t prefill_chunk = 0;  // SimOptions::prefill_chunk (simulate --prefill-chunk)
  // For CUDA kernels (compile --emit cuda): with no act_dtype given, an f32 default (an
  // f32 model on a GPU) becomes bf16, f16 where the target lacks bf16.
  bool cuda_act = false;
};

struct Planned {
  ModelSpec model;
  Target target;
  Workload workload;
  PlanOptions options;
  Lowered lowered;
  SimResult sim;
  bool ideal = false;  // sim and the per-pass records are the pure roofline
  int64_t prefill_chunk = 0;  // sim's prefill in chunks of this many tokens (0: whole prompts; below the prompt)
};

// Checks the workload against the model (context) and returns warnings.
std::vector<std::string> check_workload(const ModelSpec& m, const Workload& w);
// Warnings about a target's efficiency factors above 1 (accepted up to 1.5, as
// calibration can fit them where caches carry part of the traffic): predictions with
// them can beat the roofline floors.
std::vector<std::string> check_target(const Target& t);

Planned make_plan(const PlanRequest& req, const LowerHooks& hooks = {}, bool per_op = true);

// A probed or calibrated spec describes the kernels of the build that measured it
// (Target::measured_with); after the kernels or the cost model change, its efficiencies
// mispredict (a spec probed before a flash-attention speed-up predicted attention 1.9x
// slow). Warns on stderr, once per spec; make_plan calls it, and the commands that load
// targets otherwise (check, sweep, advise, run of a plan directory).
void warn_if_measured_by_another_build(const Target& t);
// An NVSwitch spec describes one HGX board of 8 GPUs; past it, collectives would cross
// nodes (InfiniBand), which the cost model does not have: a warning on stderr, once per
// spec (a sweep's "+key=value" variants count as their spec) and tp.
void warn_if_tp_spans_boards(const Target& t, int64_t tp);
// An override of a field no predicted time depends on (smem_per_sm_kb; l2_mb, which only
// the --per-op L2 hit rates read; TargetField::untimed) gave what-if columns identical to
// the base: a warning on stderr, once per field. `overrides` is a --set value, a "NAME+key=value" spec or a
// sweep's what-if field name.
void warn_if_descriptive_override(const std::string& overrides);

// The activation dtype of a CUDA plan when none is given: bf16, or f16 on a target
// without bf16 (before sm_80, or a spec that sets its bf16 peak to 0).
DType cuda_default_act(const Target& t);

// Refuses `out` (named `flag` in the message) when it is the model, hardware or plan file
// (`plan_file`, "" for none) the request reads: refuse_input_as_output for each.
void refuse_plan_inputs(const std::string& out, const std::string& flag, const PlanRequest& req,
                        const std::string& plan_file);

// The plan file contents for a lowered plan.
Plan to_plan(const Planned& p);

// The report.md of a plan directory: what each pass bought, the kernel mix.
std::string pass_report_md(const Planned& p);
// The files of a plan directory (`lathe compile`): plan.json, prefill.ir, decode.ir,
// report.md. `lathe run DIR` executes it.
std::map<std::string, std::string> plan_files(const Planned& p);

// Applies a tuning file (`lathe tune -o FILE`) to a plan's lowered graphs; returns a
// note for the user (how many kernels, and a warning when it was tuned on another CPU
// or on a GPU). `backend` "cpu" or "cuda": the file must be for it (lathe run);
// empty: any backend (lathe compile; a plan can carry both backends' parameters).
// `file_backend`, when given, receives the file's backend.
std::string apply_tuning_file(Graph& prefill, Graph& decode, const std::string& path,
                              const std::string& backend = "", std::string* file_backend = nullptr);

// The built-in hardware spec that describes a detected GPU (for predictions); warns
// on stderr and answers h100-sxm for GPUs without one.
std::string builtin_target_for(const CudaDeviceInfo& d);

// One-line descriptions used in headers.
std::string describe_target(const Target& t);
// The layers' weight format ("bf16", "int4:g128").
std::string weights_format(const Planned& p);
std::string describe_options(const Planned& p);

// The "does not fit" message (with the largest batch that fits).
std::string oom_message(const Planned& p);

}  // namespace lathe::cli
