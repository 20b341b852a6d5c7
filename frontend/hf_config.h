// Hugging Face checkpoints as model specs: config.json (LlamaForCausalLM,
// MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM) -> ModelSpec, and the
// model TOML that `lathe import-hf` writes for it.
//
// A "Hugging Face directory" is a directory holding config.json (and, to run it, the
// weights as *.safetensors; runtime/hf_weights.h reads those). Every user error throws
// lathe::Error naming the file, the line and column of the key when it is present,
// and the key.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/model.h"

namespace lathe {

struct HfConfig {
  ModelSpec model;
  std::string source;        // the config.json path
  std::string architecture;  // "LlamaForCausalLM" (or the model_type when no architectures)
  // Mistral / Qwen2 sliding-window attention (lathe attends to the whole context).
  std::optional<int64_t> sliding_window;
  bool rope_scaling = false;    // a rope_scaling other than the default (applied when linear / llama3)
  bool attention_bias = false;  // q/k/v biases (Qwen2, or Llama with attention_bias = true)
  // What lathe does differently from the checkpoint's model (sliding window, RoPE
  // scaling, biases); written as comments into the TOML and printed as warnings, so
  // text from config.json in them has its control characters escaped.
  std::vector<std::string> notes;
};

// Parses config.json text; `source` names it in messages.
HfConfig parse_hf_config(std::string_view json_text, std::string_view source);
// Reads `path`: a config.json file or a Hugging Face directory holding one.
HfConfig load_hf_config(const std::string& path);

// True when `path` is a directory that holds config.json.
bool is_hf_dir(const std::string& path);
// True when load_model should read `name_or_path` as a Hugging Face config: a
// Hugging Face directory or an existing *.json file.
bool is_hf_model_path(std::string_view name_or_path);

// A model spec TOML that parse_model_toml reads back to `c.model`, with the source
// and the notes as comments.
std::string hf_model_to_toml(const HfConfig& c);

}  // namespace lathe
