// lathe import-hf: a Hugging Face config.json (or the directory holding it) -> a lathe
// model spec TOML.
#include <iostream>

#include "cli/common.h"
#include "frontend/hf_config.h"
#include "ir/assert.h"

namespace lathe::cli {

namespace {

struct ImportHfArgs {
  std::string config, out, name;
};

int run_import_hf(const ImportHfArgs& a) {
  if (!a.name.empty())
    if (std::string why = name_problem(a.name); !why.empty()) throw Error("--name: " + why);
  refuse_input_as_output(a.out, a.config);  // a directory: its config.json
  HfConfig c = load_hf_config(a.config);
  if (!a.name.empty()) c.model.name = a.name;
  std::string toml = hf_model_to_toml(c);
  parse_model_toml(toml, a.out.empty() ? "<stdout>" : a.out);  // what we write must read back
  for (const std::string& n : c.notes) std::cerr << "lathe: warning: " << n << "\n";
  if (a.out.empty()) {
    std::cout << toml;
    return 0;
  }
  write_file_atomic(a.out, toml);
  const ModelSpec& m = c.model;
  report_stream(a.out) << "wrote " << a.out << ": " << m.name << " (" << c.architecture << "), " << m.layers
            << " layers, hidden " << m.hidden << ", " << human_count(double(m.param_count()))
            << " parameters\n";
  return 0;
}

}  // namespace

void register_import_hf(CLI::App& app, Registry& r) {
  auto a = std::make_shared<ImportHfArgs>();
  CLI::App* cmd = app.add_subcommand("import-hf",
                                     "Turn a Hugging Face config.json (Llama, Mistral, Mixtral, "
                                     "Qwen2) into a lathe model spec TOML");
  cmd->add_option("CONFIG", a->config, "config.json, or a Hugging Face directory holding one")
      ->required();
  cmd->add_option("-o,--out", a->out, "write the model TOML here (default: stdout)")->check(non_empty());
  cmd->add_option("--name", a->name, "model name (default: from _name_or_path or the directory)")
      ->check(non_empty());
  cmd->callback([&r, a] { r.action = [a] { return run_import_hf(*a); }; });
}

}  // namespace lathe::cli
