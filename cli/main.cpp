// lathe: compile, simulate and run LLM inference plans.
#include <cstdio>
#include <exception>
#include <new>

#include "cli/common.h"
#include "ir/assert.h"

int main(int argc, char** argv) {
  CLI::App app{
      "lathe: a compiler and simulator for LLM inference plans.\n"
      "Built-in specs: `lathe specs`. Each command takes --help."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lathe 0.1.0");
  lathe::cli::Registry reg;
  lathe::cli::register_specs(app, reg);
  lathe::cli::register_check(app, reg);
  lathe::cli::register_import_hf(app, reg);
  lathe::cli::register_graph(app, reg);
  lathe::cli::register_simulate(app, reg);
  lathe::cli::register_compile(app, reg);
  lathe::cli::register_run(app, reg);
  lathe::cli::register_serve(app, reg);
  lathe::cli::register_rag(app, reg);
  lathe::cli::register_moe(app, reg);
  lathe::cli::register_edge(app, reg);
  lathe::cli::register_sweep(app, reg);
  lathe::cli::register_advise(app, reg);
  lathe::cli::register_calibrate(app, reg);
  lathe::cli::register_tune(app, reg);
  lathe::cli::register_weights(app, reg);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lathe: error: %s\n", e.what());
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
  }
}
