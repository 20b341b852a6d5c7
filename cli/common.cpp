#include "cli/common.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "frontend/specs.h"
#include "ir/assert.h"
#include "ir/atomic_file.h"
#include "ir/hash.h"

namespace lathe::cli {

std::string fmt_double(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string human_count(double n) {
  const char* units[] = {"", " k", " M", " B", " T"};
  int u = 0;
  while (std::fabs(n) >= 1000.0 && u < 4) {
    n /= 1000.0;
    ++u;
  }
  return fmt_double(n, u == 0 ? 0 : (std::fabs(n) < 10 ? 2 : 1)) + units[u];
}

std::string human_flops(double flops) {
  const char* units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  int u = 0;
  while (std::fabs(flops) >= 1000.0 && u < 5) {
    flops /= 1000.0;
    ++u;
  }
  return fmt_double(flops, u == 0 ? 0 : 2) + " " + units[u];
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  return fmt_double(bytes, u == 0 ? 0 : 2) + " " + units[u];
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0) out += ',';
    out += *it;
    ++n;
  }
  if (v < 0) out += '-';
  return {out.rbegin(), out.rend()};
}

std::string Table::text(const std::string& indent) const {
  std::vector<size_t> w(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) w[c] = headers_[c].size();
  for (const auto& r : rows_)
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  auto numeric = [](const std::string& s) {
    return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' || s[0] == '.') &&
           s.find_first_of("abcdfghijklnopqrtuvwyzA") == std::string::npos;
  };
  auto line = [&](const std::vector<std::string>& r, bool header) {
    std::string out = indent;
    for (size_t c = 0; c < w.size(); ++c) {
      std::string cell = c < r.size() ? r[c] : "";
      std::string pad(w[c] - std::min(w[c], cell.size()), ' ');
      bool right = !header && c > 0 && numeric(cell);
      out += right ? pad + cell : cell + pad;
      if (c + 1 < w.size()) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(headers_, true);
  std::string rule = indent;
  for (size_t c = 0; c < w.size(); ++c) rule += std::string(w[c], '-') + (c + 1 < w.size() ? "  " : "");
  out += rule + "\n";
  for (const auto& r : rows_) out += line(r, false);
  return out;
}

std::string Table::csv() const {
  auto cell = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
  };
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t c = 0; c < r.size(); ++c) out += (c ? "," : "") + cell(r[c]);
    out += "\n";
  };
  line(headers_);
  for (const auto& r : rows_) line(r);
  return out;
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !std::isfinite(v)) return "'" + s + "' is not a number";
        return v > 0 ? "" : "must be above 0, got " + s;
      },
      "POSITIVE");
}

CLI::Validator number_in(double lo, double hi) {
  auto shown = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    return std::string(buf);
  };
  const std::string want = "[" + shown(lo) + ", " + shown(hi) + "]";
  return CLI::Validator(
      [lo, hi, want](std::string& s) -> std::string {
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0') return "'" + s + "' is not a number (expected one in " + want + ")";
        if (!std::isfinite(v)) return s + " is not a finite number (expected one in " + want + ")";
        return v >= lo && v <= hi ? "" : s + " is outside " + want;
      },
      "FLOAT in " + want);
}

CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
        if (!digits) return "must be a whole number >= 0, got '" + s + "'";
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        return ec == std::errc() && p == s.data() + s.size()
                   ? ""
                   : "must be at most 18446744073709551615 (2^64 - 1), got " + s;
      },
      "UINT");
}

void check_output_file(const std::string& path) {
  AtomicFile::check(path);
}

std::string model_content_hash(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) file /= fs::exists(file / "plan.json", ec) ? "plan.json" : "config.json";
  if (!fs::is_regular_file(file, ec)) return "";
  std::ifstream in(file, std::ios::binary);
  uint64_t h = kFnv1aBasis;
  std::string buf(1 << 16, '\0');
  while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
    h = fnv1a(std::string_view(buf.data(), size_t(in.gcount())), h);
    if (!in) break;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return hex;
}

bool same_file_path(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  auto normal = [](const std::string& p, std::error_code& ec) {
    fs::path abs = fs::absolute(p, ec);
    return ec ? fs::path(p) : fs::weakly_canonical(abs, ec);
  };
  std::error_code ea, eb;
  const fs::path pa = normal(a, ea), pb = normal(b, eb);
  return ea || eb ? a == b : pa == pb;
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty value") : std::string(); },
                        "NONEMPTY");
}

void refuse_input_as_output(const std::string& out, const std::string& input, const std::string& flag,
                            std::string_view builtin_folder) {
  std::error_code ec;
  if (out.empty() || input.empty() || !std::filesystem::exists(input, ec)) return;
  if (!builtin_folder.empty() && is_builtin_name(builtin_folder, input)) return;
  // A Hugging Face checkpoint (its directory, or its config.json) is its config, index
  // and weight shards: `import-hf X -o X/model-00002-of-00002.safetensors` replaced a
  // shard with TOML.
  namespace fs = std::filesystem;
  // A compiled plan is its whole directory (plan.json, the IR, the report, the kernels):
  // `calibrate -o PLAN/prefill.ir` replaced the plan's IR with TOML.
  fs::path plan_dir = fs::is_directory(input, ec) ? fs::path(input)
                      : fs::path(input).filename() == "plan.json"
                          ? (fs::path(input).parent_path().empty() ? fs::path(".") : fs::path(input).parent_path())
                          : fs::path();
  if (!plan_dir.empty() && fs::exists(plan_dir / "plan.json", ec)) {
    std::error_code e1, e2;
    const fs::path d = fs::weakly_canonical(fs::absolute(plan_dir, e1), e1);
    const fs::path o = fs::weakly_canonical(fs::absolute(out, e2), e2);
    if (!e1 && !e2) {
      auto [dm, om] = std::mismatch(d.begin(), d.end(), o.begin(), o.end());
      if (dm == d.end())
        throw Error(flag + " " + out + ": that is inside the plan directory " + plan_dir.string() +
                    ", an input of this command; writing there would change the plan. Choose another output path");
    }
  }
  std::vector<std::string> files{input};
  fs::path dir;
  if (fs::is_directory(input, ec))
    dir = input, files = {(fs::path(input) / "config.json").string()};
  else if (fs::path(input).filename() == "config.json")
    dir = fs::path(input).parent_path().empty() ? fs::path(".") : fs::path(input).parent_path();
  if (!dir.empty())
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".json" || ext == ".safetensors") files.push_back(e.path().string());
    }
  for (const std::string& file : files)
    if (same_file_path(out, file))
      throw Error(flag + " " + out + ": that is an input of this command (" + file +
                  "); writing there would overwrite it. Choose another output path");
}

std::ostream& report_stream(const std::string& written) {
  // /dev/null beside a discarded stdout: the report stays where it was.
  struct stat out {}, file {};
  if (!written.empty() && written != "/dev/null" && ::fstat(1, &out) == 0 && ::stat(written.c_str(), &file) == 0 &&
      out.st_dev == file.st_dev && out.st_ino == file.st_ino)
    return std::cerr;
  return std::cout;
}

ReportAwayFromOutput::ReportAwayFromOutput(const std::string& written) {
  if (&report_stream(written) == &std::cerr) saved_ = std::cout.rdbuf(std::cerr.rdbuf());
}

ReportAwayFromOutput::~ReportAwayFromOutput() {
  if (saved_) {
    std::cout.flush();
    std::cout.rdbuf(saved_);
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

void refuse_repeats(const std::vector<std::string>& items, const std::vector<std::string>& keys,
                    const std::string& flag) {
  LATHE_ASSERT(items.size() == keys.size(), "refuse_repeats: one key per item");
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (keys[i] == keys[j])
        throw Error(flag + ": '" + items[i] + "' " +
                    (items[i] == items[j] ? "is given twice" : "is the same as '" + items[j] + "'"));
}

std::vector<std::string> split_commas(const std::string& s, const std::string& flag) {
  std::vector<std::string> out;
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  size_t first = 0, last = s.size();
  while (first < last && blank(s[first])) ++first;
  while (last > first && blank(s[last - 1])) --last;
  if (first == last) return out;  // the caller names an empty list
  size_t start = first;
  while (start <= last) {
    size_t c = s.find(',', start);
    if (c == std::string::npos || c > last) c = last;
    size_t b = start, e = c;
    while (b < e && blank(s[b])) ++b;
    while (e > b && blank(s[e - 1])) --e;
    if (b == e) throw Error(flag + ": empty item in the list '" + s + "'");
    out.push_back(s.substr(b, e - b));
    start = c + 1;
  }
  return out;
}

std::vector<int64_t> int_list(const std::string& s, const std::string& flag, int64_t min, int64_t max) {
  std::vector<int64_t> out;
  std::vector<std::string> items = split_commas(s, flag), keys;
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  for (const std::string& x : items) {
    const size_t sign = x[0] == '-' || x[0] == '+' ? 1 : 0;
    if (x.size() == sign || x.find_first_not_of("0123456789", sign) != std::string::npos)
      throw Error(flag + ": '" + x + "' is not a whole decimal number in " + range);
    if (x.size() > sign + 1 && x[sign] == '0') throw Error(flag + ": '" + x + "': write it without leading zeros");
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(x.data() + (x[0] == '+'), x.data() + x.size(), v);
    if (ec != std::errc() || end != x.data() + x.size() || v < min || v > max)
      throw Error(flag + ": " + x + " is outside " + range);
    out.push_back(v);
    keys.push_back(std::to_string(v));
  }
  if (out.empty()) throw Error(flag + ": empty list");
  refuse_repeats(items, keys, flag);
  return out;
}

std::filesystem::path output_dir_path(const std::string& dir) {
  std::string trimmed = dir;  // "plan/" names the directory "plan"
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  return trimmed;
}

std::vector<std::string> plan_dir_entries() { return {"plan.json", "prefill.ir", "decode.ir", "report.md", "kernels"}; }

OutputDir plan_output_dir() {
  return {"plan.json",
          [](const std::string& e) {
            const std::vector<std::string> entries = plan_dir_entries();
            return std::find(entries.begin(), entries.end(), e) != entries.end();
          },
          "a lathe plan directory", "",
          // lathe's plan.json is a regular file holding a JSON object with a "lathe_plan"
          // version field (a directory or FIFO of that name is not read: no crash, no wait).
          [](const std::filesystem::path& marker) {
            std::error_code ec;
            if (!std::filesystem::is_regular_file(marker, ec)) return false;
            try {
              nlohmann::json j = nlohmann::json::parse(read_file(marker.string()), nullptr, false);
              return !j.is_discarded() && j.is_object() && j.contains("lathe_plan");
            } catch (const std::exception&) {
              return false;
            }
          }};
}

namespace {
// What an existing output directory holds: whether it carries lathe's marker, and the
// first entry lathe did not write there (empty: none).
struct DirContents {
  bool exists = false, marked = false, foreign_marker = false;
  std::vector<std::string> names;  // its entries, sorted
  std::string foreign;
};
DirContents dir_contents(const std::filesystem::path& target, const OutputDir& kind) {
  namespace fs = std::filesystem;
  std::error_code ec;
  DirContents d;
  if (!fs::is_directory(target, ec)) return d;
  d.exists = true;
  d.marked = fs::exists(target / kind.marker, ec);
  if (d.marked && kind.genuine && !kind.genuine(target / kind.marker)) d.marked = false, d.foreign_marker = true;
  for (fs::directory_iterator it(target, ec), end; !ec && it != end; it.increment(ec))
    d.names.push_back(it->path().filename().string());
  // A folder that cannot be listed is not taken for an empty one (it would be replaced).
  if (ec) throw Error(target.string() + ": cannot list the existing directory (" + ec.message() + ")");
  std::sort(d.names.begin(), d.names.end());
  for (const std::string& n : d.names)
    if (n != kind.marker && !kind.ours(n)) {
      d.foreign = n;
      break;
    }
  return d;
}
}  // namespace

void check_output_dir(const std::string& dir, const std::vector<std::string>& entries, const OutputDir& kind) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target = output_dir_path(dir);
  if (fs::exists(target, ec) && !fs::is_directory(target, ec)) throw Error(dir + ": exists and is not a directory");
  fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec))
    throw Error(dir + (fs::exists(parent, ec) ? ": " + parent.string() + " is not a directory"
                                              : ": parent directory " + parent.string() + " does not exist"));
  // The directory is built as a temporary sibling, so the parent must be writable.
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    int err = errno;
    throw Error(dir + ": cannot write in " + parent.string() + " (" + std::strerror(err) + ")");
  }
  // An entry already there is replaced only where lathe wrote it: the directory has
  // lathe's marker and lathe writes entries of that name.
  DirContents d = dir_contents(target, kind);
  if (!d.exists) return;
  for (const std::string& e : entries)
    if (fs::exists(target / e, ec) && !(d.marked && (e == kind.marker || kind.ours(e))))
      throw Error(dir + ": exists, is not " + kind.what + " (" +
                  (d.foreign_marker ? "its " + kind.marker + " is not one lathe wrote" : "no " + kind.marker) +
                  ") and already holds '" + e + "'; refusing to overwrite it" + kind.hint);
}

void write_dir_atomic(const std::string& dir, const std::map<std::string, std::string>& files,
                      const OutputDir& kind) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::set<std::string> top;
  for (const auto& kv : files) top.insert(fs::path(kv.first).begin()->string());
  LATHE_ASSERT(top.count(kind.marker) == 1, "write_dir_atomic: the files must include the marker " + kind.marker);
  check_output_dir(dir, {top.begin(), top.end()}, kind);  // refuses to overwrite what is not ours
  fs::path target = output_dir_path(dir);
  // A directory holding something lathe did not write (a scratch folder, a folder
  // holding a log, notes beside a plan): replace lathe's entries in it one by one and
  // keep the rest.
  DirContents d = dir_contents(target, kind);
  bool merge = !d.names.empty() && (!d.marked || !d.foreign.empty());
  fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::path tmp = parent / (target.filename().string() + ".tmp." + std::to_string(::getpid()));
  fs::path old = parent / (target.filename().string() + ".old." + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  fs::remove_all(old, ec);
  try {
    fs::create_directories(tmp);
    for (const auto& [rel, content] : files) {
      fs::path p = tmp / rel;
      fs::create_directories(p.parent_path());
      std::ofstream f(p, std::ios::binary | std::ios::trunc);
      f.write(content.data(), std::streamsize(content.size()));
      f.close();
      if (!f) throw Error(p.string() + ": write failed");
    }
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw Error(dir + ": " + e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  if (merge) {
    // The marker goes first out of the way and comes back last, so a half-written
    // directory never looks like a whole one; the entries lathe wrote before (even
    // ones this write does not have, as a kernels/ folder of an earlier --emit) are
    // moved aside and restored if a rename fails.
    std::vector<std::string> mine;
    if (d.marked)
      for (const std::string& n : d.names)
        if (n == kind.marker || kind.ours(n)) mine.push_back(n);
    std::stable_partition(mine.begin(), mine.end(), [&](const std::string& t) { return t == kind.marker; });
    std::vector<std::string> order(top.begin(), top.end());
    std::stable_partition(order.begin(), order.end(), [&](const std::string& t) { return t != kind.marker; });
    std::vector<std::string> aside, moved;
    auto undo = [&](const std::string& why) {
      for (const auto& m : moved) fs::remove_all(target / m, ec);
      for (const auto& m : aside) fs::rename(old / m, target / m, ec);
      fs::remove_all(tmp, ec);
      fs::remove_all(old, ec);
      throw Error(dir + ": " + why);
    };
    if (!mine.empty()) fs::create_directories(old, ec);
    for (const auto& m : mine) {
      fs::rename(target / m, old / m, ec);
      if (ec) undo("cannot move the old '" + m + "' aside");
      aside.push_back(m);
    }
    for (const auto& t : order) {
      fs::rename(tmp / t, target / t, ec);
      if (ec) undo("cannot move '" + t + "' into place");
      moved.push_back(t);
    }
    fs::remove_all(tmp, ec);
    fs::remove_all(old, ec);
    return;
  }
  if (fs::exists(target, ec)) fs::rename(target, old, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    throw Error(dir + ": cannot replace the existing directory");
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    if (fs::exists(old)) fs::rename(old, target, ec);
    fs::remove_all(tmp, ec);
    throw Error(dir + ": cannot move the new plan into place");
  }
  fs::remove_all(old, ec);
}

void PlanFlags::add_to(CLI::App* cmd, bool with_passes) {
  // `--weights ''` was taken as not given: the model's format, without a word.
  const CLI::Validator given_value(
      [](std::string& s) -> std::string { return s.empty() ? "an empty value (leave the flag out for the default)" : ""; },
      "");
  cmd->add_option("--weights", weights, std::string("weight format: ") + std::string(kWeightFormatSpellings))
      ->check(given_value);
  cmd->add_option("--kv", kv, std::string("KV-cache dtype: ") + std::string(kKvDtypeSpellings))->check(given_value);
  cmd->add_option("--kv-layout", kv_layout, "KV layout: auto, LHTD, LTHD, TLHD, paged:N")->check(given_value);
  cmd->add_option("--act", act, "activation dtype: f32, f16, bf16 (default: f32 on CPUs, model dtype on GPUs)")
      ->check(given_value);
  tp_opt = cmd->add_option("--tp", tp, "tensor-parallel degree")->check(CLI::Range(int64_t(1), int64_t(1024)));
  cmd->add_option("--plan", plan_file, "plan TOML file (flags given here override it)")->check(non_empty());
  if (!with_passes) return;
  passes_opt = cmd->add_option("--passes", passes,
                  "pass pipeline, comma separated (default: all; 'none' or '' runs no optimization pass)");
  cmd->add_option("--no-pass", disable, "switch one pass off (repeatable)");
  cmd->add_flag("--no-fusion", no_fusion, "switch every fusion pass off");
}

std::string PlanFlags::given() const {
  std::string out;
  auto add = [&out](bool on, const char* flag) {
    if (on) out += (out.empty() ? "" : ", ") + std::string(flag);
  };
  add(!weights.empty(), "--weights"), add(!kv.empty(), "--kv"), add(!kv_layout.empty(), "--kv-layout");
  add(!act.empty(), "--act"), add(!passes.empty() || (passes_opt && passes_opt->count() > 0), "--passes");
  add(tp_given(), "--tp"), add(!disable.empty(), "--no-pass"), add(no_fusion, "--no-fusion");
  add(!plan_file.empty(), "--plan");
  return out;
}

PlanOptions PlanFlags::resolve(PlanOptions o) const {
  std::string why;
  if (!weights.empty()) {
    auto f = parse_weight_format(weights, &why);
    if (!f) throw Error("--weights: " + why);
    o.weights = f;
  }
  if (!kv.empty()) {
    auto d = parse_kv_dtype(kv, &why);
    if (!d) throw Error("--kv: " + why);
    o.kv_dtype = d;
  }
  if (!kv_layout.empty() && kv_layout != "auto") {
    auto l = parse_kv_layout(kv_layout, &why);
    if (!l) throw Error("--kv-layout: " + why);
    o.kv_layout = l;
  } else if (kv_layout == "auto") {
    o.kv_layout.reset();
  }
  if (!act.empty()) {
    auto d = parse_float_dtype(act);
    if (!d)
      throw Error("--act: expected f32, f16 or bf16, got '" + act + "'");
    o.act_dtype = d;
  }
  if (tp_given()) o.tp = tp;
  auto known = known_pass_names();
  auto check_pass = [&](const std::string& p, const char* flag) {
    if (std::find(known.begin(), known.end(), p) == known.end()) {
      std::string all;
      for (auto k : known) all += (all.empty() ? "" : ", ") + std::string(k);
      throw Error(std::string(flag) + ": unknown pass '" + p + "'; passes: " + all);
    }
  };
  if (passes_opt && passes_opt->count() > 0) {
    std::string list = passes;
    if (list.empty() || list == "none") {
      o.passes = "none";
    } else if (list == "default") {  // over a plan file's pipeline, the default's
      o.passes.reset();
    } else {
      for (const std::string& p : split_commas(list, "--passes")) check_pass(p, "--passes");
      o.passes = list;
    }
  }
  for (const std::string& p : disable) {
    check_pass(p, "--no-pass");
    o.pass_enabled[p] = false;
  }
  if (no_fusion)
    for (auto k : known)
      if (k.starts_with("fuse-") || k == "flash-attention") o.pass_enabled[std::string(k)] = false;
  return o;
}

PlanSpec PlanFlags::plan_spec() const {
  PlanSpec spec;
  if (!plan_file.empty()) spec = load_plan(plan_file);
  spec.options = resolve(spec.options);
  return spec;
}

}  // namespace lathe::cli
