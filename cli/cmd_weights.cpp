// lathe weights init: write a synthetic model as a GGUF file. lathe weights info:
// what a GGUF file holds (model, vocabulary, tensors and their types).
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "checkpoint/gguf_file.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/tokenizer.h"
#include "cli/common.h"
#include "cli/planning.h"
#include "cli/run_weights.h"
#include "frontend/hf_config.h"
#include "frontend/specs.h"
#include "ir/assert.h"
#include "runtime/gguf_weights.h"

namespace lathe::cli {

namespace {

struct InitArgs {
  std::string model, weights = "f32", out;
  uint64_t seed = 1;
};

int run_init(const InitArgs& a) {
  std::string why;
  auto fmt = parse_weight_format(a.weights, &why);
  if (!fmt) throw Error("--weights: " + why);
  if (a.out.empty()) throw Error("-o: an empty path (give the output .gguf file)");
  check_output_file(a.out);  // before the weights are generated
  refuse_input_as_output(a.out, a.model, "-o", "models");
  ModelSpec m = load_model(a.model);
  // Its figures from the write: the output may be /dev/stdout, /dev/null or a FIFO,
  // which cannot be read back.
  const GgufWritten written = write_synthetic_gguf(m, a.seed, *fmt, a.out);
  report_stream(a.out) << "wrote " << a.out << ": " << m.name << " (" << human_count(double(m.param_count()))
            << " parameters, seed " << a.seed << "), matrices " << format_name(*fmt) << ", "
            << written.tensors << " tensors, " << human_bytes(double(written.bytes))
            << (m.vocab >= kMinSyntheticVocab ? ", synthetic vocabulary of " + std::to_string(m.vocab) + " tokens"
                                               : ", no vocabulary (\"no_vocab\": a synthetic one needs " +
                                                     std::to_string(kMinSyntheticVocab) + " tokens)")
            << "\n";
  return 0;
}

struct ConvertArgs {
  std::string source, weights = "f32", out;
};

// A Hugging Face checkpoint (its config.json and safetensors) as a GGUF file: the same
// values under llama.cpp's names, Q/K rows in GGUF's interleaved RoPE order.
int run_convert(const ConvertArgs& a) {
  std::string why;
  auto fmt = parse_weight_format(a.weights, &why);
  if (!fmt) throw Error("--weights: " + why);
  if (!model_has_weights(a.source)) {
    std::error_code ec;
    if (is_hf_dir(a.source))  // a directory named like a built-in model: the name wins
      throw Error(a.source + ": is a built-in model name; write ./" + a.source + " for the directory");
    if (!std::filesystem::exists(a.source, ec)) throw Error(a.source + ": no such directory");
    throw Error(a.source +
                ": not a Hugging Face checkpoint directory (config.json + *.safetensors)");
  }
  if (a.out.empty()) throw Error("-o: an empty path (give the output .gguf file)");
  check_output_file(a.out);  // before the checkpoint is read
  refuse_input_as_output(a.out, a.source);  // its config, index and shards
  PlanRequest req;
  req.model = a.source;
  req.hardware = "cpu-host";
  req.workload = {1, 1, 2};
  req.options.weights = Format{DType::f32};
  req.options.act_dtype = DType::f32;
  LowerHooks hooks;
  hooks.record = false;
  Planned p = make_plan(req, hooks, false);
  Plan plan = to_plan(p);
  std::string from;
  WeightSource source = run_weight_source(a.source, plan, 0, &from);
  // The checkpoint's tokenizer is not converted; a synthetic SentencePiece vocabulary
  // stands in where the model's vocabulary has room for its 262 fixed entries.
  const bool vocabulary = p.model.vocab >= kMinSyntheticVocab;
  write_gguf(p.model, source, *fmt, a.out, vocabulary);
  report_stream(a.out) << "wrote " << a.out << ": " << p.model.name << " from " << from << ", matrices "
            << format_name(*fmt)
            << (vocabulary ? " (synthetic vocabulary: the checkpoint's tokenizer is not converted)"
                           : " (no vocabulary, marked \"no_vocab\": the checkpoint's tokenizer is not converted)")
            << "\n";
  return 0;
}

struct InfoArgs {
  std::string file, format = "text";
};

int run_info(const InfoArgs& a) {
  auto f = gguf::File::open(a.file);
  ModelSpec m = gguf::model_spec(*f);
  validate_model(m, a.file);  // as every loader does (info showed heads of 15 dims that check refused)
  std::map<std::string, int> types;
  for (const gguf::TensorInfo& t : f->tensors()) ++types[gguf::type_name(t.type)];
  Format stored = gguf::stored_weight_format(*f);
  std::string tok = f->get_string_opt("tokenizer.ggml.model").value_or("");
  // The vocabulary is read (and checked) before anything is printed, in both formats.
  std::optional<gguf::Vocab> vocab;
  if (!tok.empty() && gguf::has_vocab(*f)) vocab = gguf::read_vocab(*f);
  if (a.format == "json") {
    nlohmann::json j = {{"file", a.file},
                        {"version", f->version()},
                        {"metadata_keys", f->metadata().size()},
                        {"model", m.name},
                        {"layers", m.layers},
                        {"hidden", m.hidden},
                        {"heads", m.heads},
                        {"kv_heads", m.kv_heads},
                        {"head_dim", m.head_dim},
                        {"vocab", m.vocab},
                        {"params", m.param_count()},
                        {"weights", format_name(stored)},
                        {"tokenizer", tok},
                        {"tensor_types", types}};
    if (vocab)
      j["vocabulary"] = {{"tokens", vocab->tokens.size()},
                         {"bos", vocab->bos},
                         {"eos", vocab->eos},
                         {"merges", vocab->merges.size()}};
    j["tensors"] = nlohmann::json::array();
    for (const gguf::TensorInfo& t : f->tensors())
      j["tensors"].push_back(
          {{"name", t.name}, {"ne", t.ne}, {"type", gguf::type_name(t.type)}, {"bytes", t.bytes}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << a.file << ": GGUF v" << f->version() << ", " << f->metadata().size() << " keys, "
            << f->tensors().size() << " tensors\n";
  std::cout << "  model        " << m.name << ": " << m.layers << " layers, hidden " << m.hidden
            << ", heads " << m.heads << " (kv " << m.kv_heads << ") x " << m.head_dim << ", vocab "
            << m.vocab << ", " << human_count(double(m.param_count())) << " parameters\n";
  std::cout << "  runs as      --weights " << format_name(stored)
            << " (the type of blk.0.attn_q.weight)\n";
  std::string types_text;
  for (const auto& [n, c] : types)
    types_text += (types_text.empty() ? "" : ", ") + std::to_string(c) + " " + n;
  std::cout << "  tensor types " << types_text << "\n";
  if (vocab) {
    std::cout << "  tokenizer    " << tok << ", " << vocab->tokens.size() << " tokens, bos " << vocab->bos
              << ", eos " << vocab->eos
              << (vocab->merges.empty() ? "" : ", " + std::to_string(vocab->merges.size()) + " merges")
              << "\n";
  } else if (!tok.empty()) {
    std::cout << "  tokenizer    none (" << tok << ")\n";
  }
  return 0;
}

// --weights of the subcommands that write GGUF files: the matrix formats GGUF stores.
void add_gguf_weights_option(CLI::App* cmd, std::string& weights, const std::string& note) {
  cmd->add_option("--weights", weights,
                  "format of the matrices (default f32): f32, f16, bf16, q8_0 (int8:g32) or q4_0 (int4:g32)" + note)
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "int8:g32", "q4_0", "int4:g32"}));
}

}  // namespace

void register_weights(CLI::App& app, Registry& r) {
  CLI::App* cmd = app.add_subcommand("weights", "Write and inspect GGUF weight files");
  cmd->require_subcommand(1);
  auto a = std::make_shared<InitArgs>();
  CLI::App* init = cmd->add_subcommand("init",
                                       "Write a model with seeded synthetic weights (the values "
                                       "`lathe run --seed` uses) as a llama GGUF file");
  init->add_option("MODEL", a->model,
                   "built-in model, model TOML or .gguf file (its model, new weights)")
      ->required();
  init->add_option("--seed", a->seed, "seed of the synthetic weights (default 1)")->check(non_negative_integer());
  add_gguf_weights_option(init, a->weights, "; norms, embedding table and MoE router stay F32");
  init->add_option("-o,--out", a->out, "output .gguf file (written atomically)")->required();
  init->callback([&r, a] { r.action = [a] { return run_init(*a); }; });

  auto c = std::make_shared<ConvertArgs>();
  CLI::App* convert = cmd->add_subcommand(
      "convert",
      "Write a Hugging Face checkpoint (config.json + *.safetensors) as a llama GGUF file");
  convert->add_option("DIR", c->source, "Hugging Face checkpoint directory")->required();
  add_gguf_weights_option(convert, c->weights, "");
  convert->add_option("-o,--out", c->out, "output .gguf file (written atomically)")->required();
  convert->callback([&r, c] { r.action = [c] { return run_convert(*c); }; });

  auto i = std::make_shared<InfoArgs>();
  CLI::App* info =
      cmd->add_subcommand("info", "Summarize a GGUF file: model, format, tokenizer, tensor types");
  info->add_option("FILE", i->file, ".gguf file")->required();
  info->add_option("--format", i->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  info->callback([&r, i] { r.action = [i] { return run_info(*i); }; });
}

}  // namespace lathe::cli
