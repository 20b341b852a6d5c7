// Spec files: TOML -> ModelSpec / Target / PlanSpec, the embedded library of built-in
// specs, and name-or-path resolution ("llama-3-8b" or "my-model.toml").
//
// Every user error throws lathe::Error with "file:line:col: key.path: why" so the CLI
// can print it and exit 2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/atomic_file.h"  // read_file
#include "ir/model.h"
#include "ir/plan_options.h"
#include "ir/target.h"

namespace lathe {

enum class SpecKind { model, hardware, plan, sweep, scenario, unknown };
std::string_view spec_kind_name(SpecKind k);

// A plan file: optional model/hardware references, a workload and plan options.
struct PlanSpec {
  std::optional<std::string> model;
  std::optional<std::string> hardware;
  Workload workload;  // the file's [plan.workload], defaults where it is silent
  bool batch_given = false, prompt_given = false, gen_given = false;  // which the file sets
  PlanOptions options;
};

ModelSpec parse_model_toml(std::string_view text, std::string_view source);
Target parse_target_toml(std::string_view text, std::string_view source);
// A hardware spec's measured_with: "cpu:" or "cuda:" and lowercase hex digits.
bool is_kernel_build_id(std::string_view id);
PlanSpec parse_plan_toml(std::string_view text, std::string_view source);
// The kind of spec a TOML text holds, judged by its top-level table.
SpecKind detect_spec_kind(std::string_view text, std::string_view source);

// A hardware spec TOML that parse_target_toml reads back to the same target (every
// field written out), with `comment` as leading # lines.
std::string target_to_toml(const Target& t, const std::string& comment = "");

// Checks the model's internal consistency (heads vs kv_heads, MoE sizes...). Throws
// lathe::Error prefixed with `where`.
void validate_model(const ModelSpec& m, const std::string& where);

struct BuiltinSpec {
  std::string name;  // "llama-3-8b"
  std::string path;  // "models/llama-3-8b.toml" inside the embedded library
  std::string text;
};
std::vector<BuiltinSpec> builtin_specs(std::string_view folder);  // "models", "hardware", ...
std::vector<std::string> builtin_names(std::string_view folder);
// Whether `name` is a built-in spec of `folder`: every command reads the built-in, never
// a file of that name.
bool is_builtin_name(std::string_view folder, std::string_view name);

bool looks_like_path(std::string_view arg);
// kMaxLayers (ir/model.h) bounds model TOML, config.json and GGUF alike.
// A model or hardware reference written inside a spec file (`model = "my-model.toml"`):
// a relative path is taken relative to that file when it exists there, else as given
// (relative to the working directory). Names, absolute paths, references in built-in
// specs and hardware overrides ("x.toml+key=value") keep their meaning.
std::string resolve_spec_reference(const std::string& ref, std::string_view source);
// Where the path in a spec reference "PATH[+key=value...]" ends, judged by what exists
// under `dir` (a path may hold '+'): the whole reference when it exists, else the
// longest prefix before a '+' that does; npos when none does.
size_t existing_path_end(std::string_view ref, const std::string& dir = "");
// Where a hardware spec's base ends and its "+key=value" overrides begin: at the first
// '+' after the longest prefix that is an existing file (a path may hold '+'), else at
// the first '+'; npos when there are no overrides.
size_t target_spec_split(std::string_view spec);
// The base of a hardware spec (a built-in name or a TOML path) without its overrides.
inline std::string target_spec_base(std::string_view spec) {
  return std::string(spec.substr(0, target_spec_split(spec)));
}

// Resolves a built-in name, a TOML path or a .gguf file (the model its llama.*
// metadata describes). Unknown names list the built-ins.
ModelSpec load_model(std::string_view name_or_path);
Target load_target(std::string_view name_or_path);
PlanSpec load_plan(std::string_view path);

}  // namespace lathe
