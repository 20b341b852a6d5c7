// Shared pieces of the `lathe` commands: registration, output tables, number
// formatting, atomic file writes and the plan-option flags several commands take.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ir/atomic_file.h"
#include "ir/model.h"
#include "ir/plan_options.h"
#include "ir/target.h"
#include "frontend/specs.h"

namespace lathe::cli {

// --cache-dir's help (run and tune share the JIT caches).
inline constexpr const char* kCacheDirHelp =
    "JIT cache directory (default $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe, in its cpu/ or cuda/ folder; a given "
    "DIR holds CPU kernels itself and CUDA kernels in DIR/cuda)";

// The workloads `lathe run` accepts (--batch, --prompt-tokens, --gen); `lathe calibrate`
// holds recorded runs to the same limits.
constexpr int64_t kMaxRunBatch = 4096;
constexpr int64_t kMaxRunTokens = int64_t(1) << 20;

// Flag checks with short messages (CLI11's PositiveNumber and NonNegativeNumber print
// their range as 300-digit numbers): a number above zero; a whole number of at least
// zero (seeds).
// A finite number in [lo, hi]: CLI::Range lets NaN through (every comparison with it
// is false), so floating-point flags use this.
CLI::Validator number_in(double lo, double hi);
CLI::Validator positive_number();
CLI::Validator non_negative_integer();

// The command CLI11 selected; main runs it inside the error guard.
struct Registry {
  std::function<int()> action;
};

void register_specs(CLI::App& app, Registry& r);
void register_check(CLI::App& app, Registry& r);
void register_graph(CLI::App& app, Registry& r);
void register_simulate(CLI::App& app, Registry& r);  // simulate, whatif
void register_compile(CLI::App& app, Registry& r);
void register_run(CLI::App& app, Registry& r);  // run, probe
void register_serve(CLI::App& app, Registry& r);  // serve-sim
void register_rag(CLI::App& app, Registry& r);    // rag-sim
void register_moe(CLI::App& app, Registry& r);    // moe-sim
void register_edge(CLI::App& app, Registry& r);   // edge-sim
void register_sweep(CLI::App& app, Registry& r);  // sweep, merge
void register_advise(CLI::App& app, Registry& r);
void register_calibrate(CLI::App& app, Registry& r);
void register_tune(CLI::App& app, Registry& r);
void register_weights(CLI::App& app, Registry& r);  // weights init, weights info
void register_import_hf(CLI::App& app, Registry& r);  // import-hf

// "8.03 B", "512.0 M", "12.3 k".
std::string human_count(double n);
// "15.03 GFLOP", "1.20 TFLOP".
std::string human_flops(double flops);
// "16.06 GB" (decimal units, as datasheets use).
std::string human_bytes(double bytes);
std::string fmt_double(double v, int precision);
std::string with_commas(int64_t v);

// A text table with right-aligned numeric columns; also CSV.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string text(const std::string& indent = "") const;
  std::string csv() const;
  size_t size() const { return rows_.size(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Writes `content` to `path` through a temporary file and a rename, so a failure
// never leaves a partial file. Throws lathe::Error.
void write_file_atomic(const std::string& path, const std::string& content);
// Where a command's report goes when it wrote `written`: stderr when that is standard
// output (/dev/stdout, /dev/fd/1, or the file stdout is redirected to), so that
// `-o /dev/stdout | ...` carries the output alone; stdout otherwise.
std::ostream& report_stream(const std::string& written);
// The same for a whole command: while alive, std::cout writes to stderr when `written`
// is standard output (sweep -o /dev/stdout: the report mixed into the rows).
class ReportAwayFromOutput {
 public:
  explicit ReportAwayFromOutput(const std::string& written);
  ~ReportAwayFromOutput();
  ReportAwayFromOutput(const ReportAwayFromOutput&) = delete;
  ReportAwayFromOutput& operator=(const ReportAwayFromOutput&) = delete;

 private:
  std::streambuf* saved_ = nullptr;
};
// Throws lathe::Error when `path` could not be written (missing directory, a directory,
// no permission): for commands that work a long time before they write.
void check_output_file(const std::string& path);
// 16 hex digits hashing a model's bytes as `lathe run` read them: a file, a directory's
// config.json (a Hugging Face checkpoint) or plan.json (a compiled plan); "" when there
// is none to read. calibrate compares it to tell a model file edited since the run.
std::string model_content_hash(const std::string& path);
// Whether two output paths name the same file ("out.json" and "./out.json", or through a
// symbolic link), so that a command writing both would overwrite one with the other.
bool same_file_path(const std::string& a, const std::string& b);
// Refuses an output path that names one of the command's inputs: the input would be
// replaced (atomically, but replaced) by the output. An `input` that is a built-in spec
// name of `builtin_folder` ("models", "hardware", "plans", "scenarios"; "" for none) is
// read from the library, so no file of that name is an input; a Hugging Face directory
// is read through its config.json. `flag` names `out` in the message.
void refuse_input_as_output(const std::string& out, const std::string& input, const std::string& flag = "-o",
                            std::string_view builtin_folder = "");

// A CLI11 check refusing an empty value ("--plot ''" was ignored as if not given).
CLI::Validator non_empty();

using lathe::AtomicFile;  // ir/atomic_file.h

// The items of a comma-separated flag value, blanks around each item trimmed
// ("a, b" -> a, b). An empty item ("a,,b", "a,") is an error naming `flag`; an empty
// value gives an empty list, which each caller reports in its own words.
std::vector<std::string> split_commas(const std::string& s, const std::string& flag);

// A comma-separated list of whole numbers in [min, max], in plain decimal as the integer
// options take them (an optional sign and digits: no leading zeros, exponents, fractions
// or hex), none named twice; an empty list is an error.
std::vector<int64_t> int_list(const std::string& s, const std::string& flag, int64_t min, int64_t max);

// Refuses a list that names one value twice: items[i] as the user wrote it, keys[i] its
// canonical spelling ("int8:g0" and "int8" are one format), so a duplicate row or
// column is an error naming both spellings rather than a table that repeats itself.
void refuse_repeats(const std::vector<std::string>& items, const std::vector<std::string>& keys,
                    const std::string& flag);

// An output directory as a path ("plan/" names the directory "plan").
std::filesystem::path output_dir_path(const std::string& dir);

// What lathe writes into an output directory: `marker`, the file that says lathe wrote
// the directory (plan.json for a plan), `ours`, whether a top-level entry is one lathe
// writes there, and for messages `what` the directory is and a `hint` on a refusal.
struct OutputDir {
  std::string marker;
  std::function<bool(const std::string&)> ours;
  std::string what, hint;
  // Whether an existing marker file is lathe's own (null: any file of that name is);
  // a plan.json a user wrote does not make the directory lathe's.
  std::function<bool(const std::filesystem::path&)> genuine = nullptr;
};
// The top-level entries of a plan directory (plan.json, prefill.ir, decode.ir,
// report.md, kernels/), and the directory they make.
std::vector<std::string> plan_dir_entries();
OutputDir plan_output_dir();

// Writes a directory of files atomically: everything goes into a temporary sibling
// directory that then replaces `dir` when `dir` is missing, empty or holds only what
// lathe writes there (its marker and entries it owns). Into any other existing
// directory the entries are renamed one by one, the marker last, keeping what lathe
// did not write: an entry lathe owns is replaced only where the directory has the
// marker, and any other entry already there is refused. Throws lathe::Error.
void write_dir_atomic(const std::string& dir, const std::map<std::string, std::string>& files,
                      const OutputDir& kind = plan_output_dir());
// The checks write_dir_atomic makes before writing (not a directory, no parent, a
// parent it cannot write in, an existing folder already holding one of `entries` that
// is not lathe's), so a command can fail before doing its work.
void check_output_dir(const std::string& dir, const std::vector<std::string>& entries,
                      const OutputDir& kind = plan_output_dir());

// A plan spec's fields as `lathe check --format json` and `lathe specs` show them
// (model, hardware, workload, weights, kv, kv_layout, act, tp; unset options named by
// what they default to).
nlohmann::json plan_spec_json(const PlanSpec& p);

// Plan-option flags shared by graph, simulate, compile, run...
struct PlanFlags {
  std::string weights, kv, kv_layout, act, passes;
  int64_t tp = 1;
  std::vector<std::string> disable;  // --no-pass NAME
  bool no_fusion = false;
  std::string plan_file;
  CLI::Option* passes_opt = nullptr;
  CLI::Option* tp_opt = nullptr;  // --tp 1 given beside a plan file's tp (1 read as "not given")
  bool tp_given() const { return (tp_opt && tp_opt->count() > 0) || tp != 1; }

  void add_to(CLI::App* cmd, bool with_passes = true);
  // Applies the flags on top of `base`.
  PlanOptions resolve(PlanOptions base = {}) const;
  // The plan file (when given) with the flags applied to its options.
  PlanSpec plan_spec() const;
  // The flags given, as they were spelled ("--weights, --tp"), or "" when none.
  std::string given() const;
};

}  // namespace lathe::cli
