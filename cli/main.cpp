// lathe: compile, simulate and run LLM inference plans.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli/common.h"
#include "frontend/toml_doc.h"
#include "ir/assert.h"
#include "ir/atomic_file.h"

namespace {
// CLI11's range check says "--batch: Value abc not in range 1 to 1048576" also for a
// value that is not a number, or not a whole one: say which.
std::string parse_error_text(const std::string& what) {
  const std::string key = ": Value ", mid = " not in range ", to = " to ";
  const size_t v = what.find(key), r = what.rfind(mid);
  if (v == std::string::npos || r == std::string::npos || r < v) return what;
  const std::string flag = what.substr(0, v), value = what.substr(v + key.size(), r - v - key.size());
  const std::string range = what.substr(r + mid.size());
  const size_t t = range.find(to);
  if (t == std::string::npos) return what;
  const std::string lo = range.substr(0, t), hi = range.substr(t + to.size());
  auto shown = [](const std::string& n) {  // "10000000.000000" -> "1e+07"
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", std::strtod(n.c_str(), nullptr));
    return std::string(buf);
  };
  const std::string want = "[" + shown(lo) + ", " + shown(hi) + "]";
  char* end = nullptr;
  const double x = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size())
    return flag + ": '" + value + "' is not a number (expected one in " + want + ")";
  const double a = std::strtod(lo.c_str(), nullptr), b = std::strtod(hi.c_str(), nullptr);
  if (x >= a && x <= b) return flag + ": '" + value + "' is not a whole number (expected one in " + want + ")";
  return flag + ": " + value + " is outside " + want;
}

// CLI11 reads integers with C prefixes: `--batch 010` was batch 8 (octal) and
// `--batch 0x10` batch 16. Every integer option takes plain decimal digits instead, and
// an unsigned one no minus sign (`--sample-seed -5` wrapped around).
void decimal_integers(CLI::App* app) {
  for (CLI::Option* o : app->get_options()) {
    const std::string t = o->get_type_name();
    const bool is_unsigned = t.rfind("UINT", 0) == 0;
    if (t.rfind("INT", 0) != 0 && !is_unsigned) continue;
    o->check(CLI::Validator(
        [is_unsigned](std::string& v) -> std::string {
          if (is_unsigned && !v.empty() && v[0] == '-') return "'" + v + "' is negative; expected a whole number >= 0";
          const size_t digits = v.size() - (!v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0);
          const std::string_view d = std::string_view(v).substr(v.size() - digits);
          if (d.empty() || d.find_first_not_of("0123456789") != std::string_view::npos)
            return "'" + v + "' is not a whole decimal number";
          if (d.size() > 1 && d[0] == '0') return "'" + v + "': write it without leading zeros";
          // Past 64 bits CLI11 wrapped or saturated silently (--sample-seed 2^64).
          uint64_t magnitude = 0;
          const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), magnitude);
          if (ec != std::errc() || end != d.data() + d.size() ||
              (!is_unsigned && magnitude > (v[0] == '-' ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX))))
            return "'" + v + "' is out of the 64-bit range";
          return "";
        },
        ""));
  }
  for (CLI::App* sub : app->get_subcommands({})) decimal_integers(sub);
}
}  // namespace

int main(int argc, char** argv) {
  lathe::remove_temporaries_on_signals();
  CLI::App app{
      "lathe: a compiler and simulator for LLM inference plans.\n"
      "Built-in specs: `lathe specs`. Each command takes --help."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lathe 0.1.0");
  lathe::cli::Registry reg;
  // Each entry registers the subcommands it names. Setting up every subcommand's
  // options costs about a millisecond, so a command line that starts with a known
  // subcommand registers only that entry; anything else (--help, a typo) gets all.
  using Register = void (*)(CLI::App&, lathe::cli::Registry&);
  struct Entry {
    std::initializer_list<std::string_view> names;
    Register fn;
  };
  const Entry entries[] = {
      {{"specs"}, lathe::cli::register_specs},
      {{"check"}, lathe::cli::register_check},
      {{"import-hf"}, lathe::cli::register_import_hf},
      {{"graph"}, lathe::cli::register_graph},
      {{"simulate", "whatif"}, lathe::cli::register_simulate},
      {{"compile"}, lathe::cli::register_compile},
      {{"run", "probe"}, lathe::cli::register_run},
      {{"serve-sim"}, lathe::cli::register_serve},
      {{"rag-sim"}, lathe::cli::register_rag},
      {{"moe-sim"}, lathe::cli::register_moe},
      {{"edge-sim"}, lathe::cli::register_edge},
      {{"sweep", "merge"}, lathe::cli::register_sweep},
      {{"advise"}, lathe::cli::register_advise},
      {{"calibrate"}, lathe::cli::register_calibrate},
      {{"tune"}, lathe::cli::register_tune},
      {{"weights"}, lathe::cli::register_weights},
  };
  const Entry* only = nullptr;
  if (argc > 1)
    for (const Entry& e : entries)
      for (std::string_view n : e.names)
        if (n == argv[1]) only = &e;
  if (!only && argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    std::string list;
    for (const Entry& e : entries)
      for (std::string_view n : e.names) names.emplace_back(n), list += (list.empty() ? "" : ", ") + std::string(n);
    std::string hint = lathe::closest_match(argv[1], names);
    std::fprintf(stderr, "lathe: error: unknown command '%s'%s; commands: %s\nRun with --help for usage.\n", argv[1],
                 hint.empty() ? "" : (" (did you mean '" + hint + "'?)").c_str(), list.c_str());
    return 2;
  }
  if (only) {
    only->fn(app, reg);
  } else {
    for (const Entry& e : entries) e.fn(app, reg);
  }
  decimal_integers(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    CLI::App* sub = nullptr;
    if (argc > 1) try {
        sub = app.get_subcommand(argv[1]);
      } catch (const CLI::Error&) {
      }
    // --help wins over an error elsewhere on the line (`simulate --help --batch 0`), for
    // the command named (`weights init --help --seed -1`: init's help).
    for (int i = 1; i < argc; ++i)
      if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
        CLI::App* nested = nullptr;
        if (sub && argc > 2) try {
            nested = sub->get_subcommand(argv[2]);
          } catch (const CLI::Error&) {
          }
        std::cout << (nested ? nested->help(std::string(argv[0]) + " " + argv[1])
                             : sub ? sub->help(argv[0])
                                   : app.help());
        return 0;
      }
    // A command with subcommands of its own given an unknown one (`weights nope`).
    if (sub && argc > 2 && argv[2][0] != '-' && !sub->get_subcommands({}).empty() &&
        !sub->get_subcommands([&](CLI::App* c) { return c->get_name() == argv[2]; }).size()) {
      std::string names;
      for (const CLI::App* c : sub->get_subcommands({})) names += (names.empty() ? "" : ", ") + c->get_name();
      std::fprintf(stderr, "lathe: error: unknown %s subcommand '%s'; subcommands: %s\nRun with --help for usage.\n",
                   argv[1], lathe::printable(argv[2]).c_str(), names.c_str());
      return 2;
    }
    std::fprintf(stderr, "lathe: error: %s\n", parse_error_text(e.what()).c_str());
    std::fprintf(stderr, "Run with --help for usage.\n");
    return 2;
  }
  try {
    return reg.action ? reg.action() : 0;
  } catch (const lathe::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "lathe: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "lathe: error: out of memory\n");
    return 2;
  } catch (const std::system_error& e) {  // the system refused a thread, a lock, a file
    std::fflush(stdout);
    std::fprintf(stderr, "lathe: error: %s\n", e.what());
    return 2;
  }
}
