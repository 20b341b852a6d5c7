// lathe graph: print the IR graph of one phase (text IR or Graphviz DOT).
#include <iostream>

#include "cli/common.h"
#include "frontend/builder.h"
#include "frontend/specs.h"
#include "ir/assert.h"
#include "ir/text.h"
#include "ir/verifier.h"

namespace lathe::cli {

namespace {
struct GraphArgs {
  std::string model;
  std::string phase = "decode";
  int64_t batch = 1, prompt = 128, context = -1;
  std::string format = "text";
  std::string act = "f32";
  int64_t tp = 1;
};

int run_graph(const GraphArgs& a) {
  ModelSpec m = load_model(a.model);
  Workload w;
  w.batch = a.batch;
  w.prompt = a.prompt;
  const bool prefill = a.phase == "prefill";
  if (prefill && a.context >= 0) throw Error("--context is the decode phase's context length; prefill has none");
  int64_t ctx = a.context < 0 ? a.prompt + 1 : a.context;
  if (ctx < a.prompt) throw Error("--context (" + std::to_string(ctx) + ") must be >= --prompt (" + std::to_string(a.prompt) + ")");
  w.gen = ctx - a.prompt;
  const int64_t used = prefill ? a.prompt : ctx;
  if (used > m.max_context)
    std::cerr << "lathe: warning: " << (prefill ? "--prompt " : "context ") << used << " exceeds " << m.name
              << "'s max_context (" << m.max_context << ")\n";
  BuildOptions o;
  o.phase = prefill ? Phase::prefill : Phase::decode;
  o.tp = a.tp;
  o.act = *parse_dtype(a.act);
  o.workload = w;
  Graph g = build_graph(m, o);
  verify_or_die(g, "build");
  std::cout << (a.format == "dot" ? graph_to_dot(g) : print_graph(g));
  return 0;
}
}  // namespace

void register_graph(CLI::App& app, Registry& r) {
  auto a = std::make_shared<GraphArgs>();
  CLI::App* cmd = app.add_subcommand("graph", "Print the (unfused) IR graph of a model for one phase");
  cmd->add_option("MODEL", a->model, "built-in model name, model TOML path, .gguf file, or Hugging Face directory / config.json")->required();
  cmd->add_option("--phase", a->phase, "prefill or decode (default decode)")->check(CLI::IsMember({"prefill", "decode"}));
  cmd->add_option("--batch", a->batch, "sequences in the batch (B; default 1)")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--prompt", a->prompt, "prompt tokens per sequence (S in prefill; default 128)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--context", a->context, "context length in decode (T; default prompt + 1)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--format", a->format, "text (lathe IR, default) or dot (Graphviz)")->check(CLI::IsMember({"text", "dot"}));
  cmd->add_option("--act", a->act, "activation dtype")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--tp", a->tp, "tensor-parallel degree (prints one device's graph)")
      ->check(CLI::Range(int64_t(1), int64_t(1024)));
  cmd->callback([&r, a] { r.action = [a] { return run_graph(*a); }; });
}

}  // namespace lathe::cli
