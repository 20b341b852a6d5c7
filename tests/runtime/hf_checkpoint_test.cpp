// Hugging Face checkpoints: config.json import, the safetensors reader (good and
// malformed files), the name mapping and RoPE row permutation, and parity with
// transformers on the committed tiny fixtures (tests/fixtures/hf, made by
// bench/hf_parity.py): lathe's logits for a fixed token sequence, prefill and three
// decode steps, within 1e-4 normalized error of the logits transformers computed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "frontend/hf_config.h"
#include "ir/assert.h"
#include "runtime/hf_weights.h"
#include "runtime/safetensors.h"
#include "support/cpu_run.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/hf/" + name;
}

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::string u16_bytes(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// The message of the lathe::Error `f` throws, or "" when it does not throw.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A fresh temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("lathe-hf-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// ---------------------------------------------------------------- config.json

const char* kLlamaConfig = R"({
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 64,
  "intermediate_size": 128,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "vocab_size": 256,
  "max_position_embeddings": 128,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "float32",
  "hidden_act": "silu"
})";

TEST(HfConfig, LlamaFieldsMapToTheModelSpec) {
  HfConfig c = parse_hf_config(kLlamaConfig, "dir/config.json");
  const ModelSpec& m = c.model;
  EXPECT_EQ(m.arch, "llama");
  EXPECT_EQ(m.name, "dir");
  EXPECT_EQ(m.hidden, 64);
  EXPECT_EQ(m.layers, 2);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_EQ(m.head_dim, 16);
  EXPECT_EQ(m.ffn, 128);
  EXPECT_EQ(m.vocab, 256);
  EXPECT_EQ(m.max_context, 128);
  EXPECT_DOUBLE_EQ(m.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_EQ(m.dtype, DType::f32);
  EXPECT_FALSE(m.is_moe());
  EXPECT_TRUE(c.notes.empty());
}

TEST(HfConfig, TomlReadsBackToTheSameSpec) {
  for (
      const char* json :
      {kLlamaConfig,
       R"({"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
            "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1e6, "num_local_experts": 8,
            "num_experts_per_tok": 2, "torch_dtype": "bfloat16", "sliding_window": null,
            "_name_or_path": "mistralai/Mixtral-8x7B-v0.1"})",
       R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
            "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936, "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
            "sliding_window": 32768, "use_sliding_window": false, "_name_or_path": "Qwen/Qwen2-0.5B"})",
       R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
            "rope_theta": 500000.0, "torch_dtype": "bfloat16",
            "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"}})",
       R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
            "intermediate_size": 8, "vocab_size": 10, "max_position_embeddings": 64,
            "rope_scaling": {"type": "linear", "factor": 2.5}})"}) {
    HfConfig c = parse_hf_config(json, "config.json");
    ModelSpec back = parse_model_toml(hf_model_to_toml(c), "model.toml");
    const ModelSpec& m = c.model;
    EXPECT_EQ(back.name, m.name);
    EXPECT_EQ(back.arch, m.arch);
    EXPECT_EQ(back.hidden, m.hidden);
    EXPECT_EQ(back.layers, m.layers);
    EXPECT_EQ(back.heads, m.heads);
    EXPECT_EQ(back.kv_heads, m.kv_heads);
    EXPECT_EQ(back.head_dim, m.head_dim);
    EXPECT_EQ(back.ffn, m.ffn);
    EXPECT_EQ(back.vocab, m.vocab);
    EXPECT_EQ(back.max_context, m.max_context);
    EXPECT_EQ(back.norm_eps, m.norm_eps);
    EXPECT_EQ(back.rope_theta, m.rope_theta);
    ASSERT_EQ(back.rope_scaling.has_value(), m.rope_scaling.has_value());
    if (m.rope_scaling) {
      EXPECT_EQ(back.rope_scaling->type, m.rope_scaling->type);
      EXPECT_EQ(rope_divisors(*back.rope_scaling, back.rope_theta, back.head_dim),
                rope_divisors(*m.rope_scaling, m.rope_theta, m.head_dim));
    }
    EXPECT_EQ(back.tie_embeddings, m.tie_embeddings);
    EXPECT_EQ(back.dtype, m.dtype);
    EXPECT_EQ(back.is_moe(), m.is_moe());
    EXPECT_EQ(back.param_count(), m.param_count());
    if (m.is_moe()) {
      EXPECT_EQ(back.moe->experts, m.moe->experts);
      EXPECT_EQ(back.moe->top_k, m.moe->top_k);
      EXPECT_EQ(back.moe->expert_ffn, m.moe->expert_ffn);
    }
  }
  // Mixtral-8x7B as in the built-in spec: 46.7 B parameters.
  ModelSpec builtin = load_model("mixtral-8x7b");
  HfConfig mix = parse_hf_config(
      R"({"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
          "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
          "max_position_embeddings": 32768, "torch_dtype": "bfloat16"})",
      "config.json");
  EXPECT_EQ(mix.model.param_count(), builtin.param_count());
  EXPECT_EQ(mix.model.rope_theta, 1e6);  // the Mixtral default
  HfConfig qwen = parse_hf_config(
      R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
          "intermediate_size": 8, "vocab_size": 10, "max_position_embeddings": 64, "torch_dtype": "float16"})",
      "q.json");
  EXPECT_TRUE(qwen.attention_bias);
  EXPECT_FALSE(qwen.notes.empty());
  // Llama 3.1 (RoPE scaling) and Mistral 7B v0.1 (sliding window): notes, not errors.
  HfConfig l31 = parse_hf_config(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
          "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "bfloat16", "eos_token_id": [128001, 128008],
          "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192, "rope_type": "llama3"}})",
      "l31.json");
  EXPECT_TRUE(l31.rope_scaling);
  ASSERT_TRUE(l31.model.rope_scaling.has_value());  // applied, so no note
  EXPECT_EQ(l31.model.rope_scaling->type, "llama3");
  EXPECT_EQ(l31.model.rope_scaling->original_max_context, 8192);
  EXPECT_TRUE(l31.notes.empty());
  EXPECT_EQ(l31.model.param_count(), load_model("llama-3-8b").param_count());
  EXPECT_EQ(l31.model.rope_theta, 500000.0);
  HfConfig mistral = parse_hf_config(
      R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768,
          "sliding_window": 4096, "torch_dtype": "bfloat16"})",
      "m.json");
  ASSERT_TRUE(mistral.sliding_window.has_value());
  EXPECT_EQ(*mistral.sliding_window, 4096);
  EXPECT_EQ(mistral.model.param_count(), load_model("mistral-7b").param_count());
  EXPECT_EQ(mistral.model.arch, "mistral");
}

TEST(HfConfig, ErrorsNameTheFileLineAndKey) {
  struct Case {
    std::string json, want;
  };
  std::string base = kLlamaConfig;
  auto without = [&](const std::string& key) {
    std::string s = base;
    size_t at = s.find("\"" + key + "\"");
    size_t end = s.find('\n', at);
    return s.erase(at, end - at + 1);
  };
  auto with = [&](const std::string& key, const std::string& value) {
    std::string s = base;
    size_t at = s.find("\"" + key + "\"");
    size_t colon = s.find(':', at), end = s.find_first_of(",\n", colon);
    return s.replace(colon + 1, end - colon - 1, " " + value);
  };
  std::vector<Case> cases = {
      {without("hidden_size"), "c.json: hidden_size: missing required key"},
      {without("vocab_size"), "c.json: vocab_size: missing required key"},
      {with("hidden_size", "\"big\""), "c.json:3:3: hidden_size: expected an integer, got \"big\""},
      {with("num_hidden_layers", "-2"),
       "c.json:5:3: num_hidden_layers: expected an integer in [1,"},
      {with("num_key_value_heads", "3"),
       "c.json:7:3: num_key_value_heads: 3 must divide num_attention_heads (4)"},
      {with("architectures", "[\"GPT2LMHeadModel\"]"),
       "c.json:2:3: architectures: unsupported architecture 'GPT2LMHeadModel'"},
      {with("torch_dtype", "\"int8\""), "c.json:13:3: torch_dtype: unsupported dtype 'int8'"},
      {with("hidden_act", "\"gelu\""), "c.json:14:3: hidden_act: unsupported activation 'gelu'"},
      {"{\"hidden_size\": 64,", "c.json:1:20: not valid JSON"},
      {"[1, 2]", "c.json:1:1: expected a JSON object"},
      {"{\"hidden_size\": 1e705}",
       "c.json: not valid JSON: number overflow"},
      {"{}", "c.json:1:1: architectures: missing required key"},
  };
  for (const Case& c : cases) {
    std::string e = error_of([&] { parse_hf_config(c.json, "c.json"); });
    EXPECT_NE(e.find(c.want), std::string::npos) << "want '" << c.want << "' in: " << e;
  }
}

// ---------------------------------------------------------------- safetensors

TEST(Safetensors, ReadsF32F16AndBF16) {
  std::vector<float> f = {1.5f, -2.25f, 0.0f, 3e-3f, 1e4f, -7.0f};
  // F16 of 1, -2, 0.5, 65504 (max), 2^-24 (smallest subnormal), -0
  std::vector<uint16_t> h = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000};
  // BF16 of 1, -2, 3.140625, 1e-3-ish
  std::vector<uint16_t> b = {0x3f80, 0xc000, 0x4049, 0x3a83};
  std::string bytes = safetensors_bytes({{"a", "F32", {2, 3}, f32_bytes(f)},
                                         {"h", "F16", {6}, u16_bytes(h)},
                                         {"b", "BF16", {2, 2}, u16_bytes(b)}});
  auto file = SafetensorsFile::from_bytes(bytes, "t.safetensors");
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->find("a")->shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> out(6);
  file->read_f32("a", 0, 6, out.data());
  EXPECT_EQ(out, f);
  file->read_f32("h", 0, 6, out.data());
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 0.5f, 65504.0f, std::ldexp(1.0f, -24), -0.0f}));
  EXPECT_TRUE(std::signbit(out[5]));
  out.assign(4, 0);
  file->read_f32("b", 0, 4, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 3.140625f);
  EXPECT_NEAR(out[3], 1e-3, 1e-5);
  // The same bytes through the file reader (memory-mapped).
  TempDir d;
  write(d.path / "x.safetensors", bytes);
  auto mapped = SafetensorsFile::open((d.path / "x.safetensors").string());
  out.assign(6, 0);
  mapped->read_f32("a", 0, 6, out.data());
  EXPECT_EQ(out, f);
}

TEST(Safetensors, MalformedFilesNameTheFileAndTensor) {
  std::string good = safetensors_bytes({{"w", "F32", {2, 2}, f32_bytes({1, 2, 3, 4})}});
  auto header_len = [](uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
    return s;
  };
  auto with_header = [&](const std::string& json, size_t data_bytes) {
    return header_len(json.size()) + json + std::string(data_bytes, '\0');
  };
  struct Case {
    std::string bytes, want;
  };
  std::vector<Case> cases = {
      {"", "bad.safetensors: not a safetensors file (0 bytes"},
      {"abc", "bad.safetensors: not a safetensors file (3 bytes"},
      {header_len(1000) + "{}", "bad.safetensors: corrupt safetensors header length 1000"},
      {header_len(~uint64_t(0)) + "{}", "corrupt safetensors header length"},
      {good.substr(0, good.size() - 4),
       "tensor 'w': data_offsets [0,16] run past the end of the file"},
      {with_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 16]", 16),
       "bad.safetensors: safetensors header is not valid JSON"},
      {with_header("[1]", 0), "header is not a JSON object"},
      {with_header(R"({"w": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}})", 8),
       "tensor 'w': unknown dtype 'F33'"},
      {with_header(R"({"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 8]}})", 8),
       "tensor 'w': shape [2,-1] is not a list of non-negative integers"},
      {with_header(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
       "tensor 'w': data_offsets [0,8] hold 8 bytes but shape [3] of F32 needs 12"},
      {with_header(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8),
       "tensor 'w': data_offsets [8,0] end before"},
      {with_header(R"({"w": {"dtype": "F32", "shape": [2]}})", 8),
       "tensor 'w': data_offsets must be [begin, end]"},
      {with_header(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8),
       "tensor 'w': missing dtype"},
      {with_header(R"({"w": 3})", 8), "tensor 'w': expected an object"},
      {with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   12),
       "tensors 'a' and 'b' overlap in the data section at byte 4"},
      {with_header(
           R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
           8),
       "tensor 'w': shape [4294967296,4294967296] is too large"},
  };
  for (const Case& c : cases) {
    std::string e = error_of([&] { SafetensorsFile::from_bytes(c.bytes, "bad.safetensors"); });
    EXPECT_NE(e.find(c.want), std::string::npos) << "want '" << c.want << "' in: " << e;
  }
  // Supported layout, unsupported dtype for reading.
  auto i8 = SafetensorsFile::from_bytes(safetensors_bytes({{"q", "I8", {4}, std::string(4, '\1')}}),
                                        "i8.safetensors");
  float out[4];
  EXPECT_NE(error_of([&] {
              i8->read_f32("q", 0, 4, out);
            }).find("i8.safetensors: tensor 'q': dtype I8 is not supported"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              SafetensorsFile::open("/nonexistent/x.safetensors");
            }).find("/nonexistent/x.safetensors: cannot open"),
            std::string::npos);
}

// ---------------------------------------------------------------- name mapping

// The Hugging Face tensors of a model whose lathe weights are the synthetic ones of
// `seed`: names mapped back, Q/K rows put back into rotate-half order, written as
// `dtype` (F32 or BF16 values truncated, so the comparison below stays exact).
std::vector<SafetensorsEntry> hf_tensors_of(const ModelSpec& m, const Graph& g, uint64_t seed) {
  std::vector<SafetensorsEntry> out;
  const int64_t d = m.head_dim;
  auto hf_name = [](const std::string& n) -> std::vector<std::string> {
    if (n == "tok_embeddings") return {"model.embed_tokens.weight"};
    if (n == "norm") return {"model.norm.weight"};
    if (n == "lm_head") return {"lm_head.weight"};
    std::string layer = n.substr(7, n.find('.', 7) - 7), rest = n.substr(n.find('.', 7) + 1),
                p = "model.layers." + layer + ".";
    std::map<std::string, std::string> names = {
        {"attn_norm", "input_layernorm.weight"}, {"ffn_norm", "post_attention_layernorm.weight"},
        {"wq", "self_attn.q_proj.weight"},       {"wk", "self_attn.k_proj.weight"},
        {"wv", "self_attn.v_proj.weight"},       {"wo", "self_attn.o_proj.weight"},
        {"w_gate", "mlp.gate_proj.weight"},      {"w_up", "mlp.up_proj.weight"},
        {"w_down", "mlp.down_proj.weight"},      {"router", "block_sparse_moe.gate.weight"}};
    if (names.count(rest)) return {p + names[rest]};
    std::string w = rest == "experts.w_gate" ? "w1" : rest == "experts.w_up" ? "w3" : "w2";
    return {p + "block_sparse_moe.experts.{E}." + w + ".weight"};
  };
  for (ValueId v : g.values_of(ValueKind::weight)) {
    const Value& w = g.value(v);
    std::vector<int64_t> shape;
    for (const Dim& x : w.shape) shape.push_back(x.coef);
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    std::vector<float> vals(static_cast<size_t>(n));
    synthetic_values(seed, w.name, shape, vals.data());
    if (w.name.ends_with(".wq") || w.name.ends_with(".wk")) {  // interleaved -> rotate-half
      const int64_t K = shape[1];
      std::vector<float> hf(vals.size());
      for (int64_t h = 0; h < shape[0] / d; ++h)
        for (int64_t i = 0; i < d / 2; ++i)
          for (int64_t j = 0; j < 2; ++j)
            std::copy_n(vals.begin() + (h * d + 2 * i + j) * K, K,
                        hf.begin() + (h * d + j * d / 2 + i) * K);
      vals = hf;
    }
    std::string name = hf_name(w.name)[0];
    if (size_t at = name.find("{E}"); at != std::string::npos) {
      int64_t per = n / shape[0];
      for (int64_t e = 0; e < shape[0]; ++e) {
        std::string en = name;
        en.replace(at, 3, std::to_string(e));
        out.push_back(
            {en, "F32", std::vector<int64_t>(shape.begin() + 1, shape.end()),
             f32_bytes(std::vector<float>(vals.begin() + e * per, vals.begin() + (e + 1) * per))});
      }
    } else {
      out.push_back({name, "F32", shape, f32_bytes(vals)});
    }
  }
  return out;
}

// A Hugging Face directory for built-in model `base` (tiny or tiny-moe) with the
// synthetic weights of `seed`; optionally sharded over two files with an index.
void write_hf_dir(const fs::path& dir, const std::string& base, bool sharded, uint64_t seed,
                  std::vector<SafetensorsEntry>* tensors_out = nullptr) {
  ModelSpec m = load_model(base);
  nlohmann::json cfg = {{"architectures", {m.is_moe() ? "MixtralForCausalLM" : "LlamaForCausalLM"}},
                        {"hidden_size", m.hidden},
                        {"num_hidden_layers", m.layers},
                        {"num_attention_heads", m.heads},
                        {"num_key_value_heads", m.kv_heads},
                        {"head_dim", m.head_dim},
                        {"intermediate_size", m.is_moe() ? m.moe->expert_ffn : m.ffn},
                        {"vocab_size", m.vocab},
                        {"max_position_embeddings", m.max_context},
                        {"rms_norm_eps", m.norm_eps},
                        {"rope_theta", m.rope_theta},
                        {"tie_word_embeddings", m.tie_embeddings},
                        {"torch_dtype", "float32"}};
  if (m.is_moe()) {
    cfg["num_local_experts"] = m.moe->experts;
    cfg["num_experts_per_tok"] = m.moe->top_k;
  }
  fs::create_directories(dir);
  write(dir / "config.json", cfg.dump(2));
  auto b = testing::build_plan_graphs(base, "cpu-host", {1, 4, 2});
  std::vector<SafetensorsEntry> t = hf_tensors_of(m, b.decode, seed);
  if (tensors_out) *tensors_out = t;
  if (!sharded) {
    write(dir / "model.safetensors", safetensors_bytes(t));
    return;
  }
  std::vector<SafetensorsEntry> a(t.begin(), t.begin() + long(t.size() / 2)),
      c(t.begin() + long(t.size() / 2), t.end());
  write(dir / "model-00001-of-00002.safetensors", safetensors_bytes(a));
  write(dir / "model-00002-of-00002.safetensors", safetensors_bytes(c));
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  for (const auto& e : a) index["weight_map"][e.name] = "model-00001-of-00002.safetensors";
  for (const auto& e : c) index["weight_map"][e.name] = "model-00002-of-00002.safetensors";
  write(dir / "model.safetensors.index.json", index.dump(2));
}

TEST(HfWeights, MapsNamesAndPermutesRopeRowsBackToLathesValues) {
  for (const char* base : {"tiny", "tiny-moe"})
    for (bool sharded : {false, true}) {
      TempDir d;
      write_hf_dir(d.path / "m", base, sharded, 7);
      std::string dir = (d.path / "m").string();
      ASSERT_TRUE(is_hf_dir(dir));
      auto b = testing::build_plan_graphs(dir, "cpu-host", {1, 4, 2});
      EXPECT_EQ(b.model.param_count(), load_model(base).param_count());
      auto hf = HfWeights::open(dir);
      hf->check({&b.prefill, &b.decode});
      WeightSource src = hf->source(b.decode);
      for (ValueId v : b.decode.values_of(ValueKind::weight)) {
        const Value& w = b.decode.value(v);
        std::vector<int64_t> shape;
        for (const Dim& x : w.shape) shape.push_back(x.coef);
        int64_t n = 1;
        for (int64_t x : shape) n *= x;
        std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1e30f);
        synthetic_values(7, w.name, shape, want.data());
        src(w.name, shape, got.data());
        EXPECT_EQ(got, want) << base << (sharded ? " sharded " : " ") << w.name;
      }
    }
}

TEST(HfWeights, CheckpointErrorsNameTheFileAndTensor) {
  auto b = [](const std::string& dir) {
    return testing::build_plan_graphs(dir, "cpu-host", {1, 4, 2});
  };
  auto check = [&](const std::string& dir) {
    return error_of([&] {
      auto g = b(dir);
      HfWeights::open(dir)->check({&g.prefill, &g.decode});
    });
  };
  TempDir d;
  std::vector<SafetensorsEntry> t;
  write_hf_dir(d.path / "m", "tiny", false, 3, &t);
  const std::string dir = (d.path / "m").string(), file = dir + "/model.safetensors";
  EXPECT_EQ(check(dir), "");
  auto rewrite = [&](std::vector<SafetensorsEntry> v) { write(file, safetensors_bytes(v)); };

  // A missing tensor.
  std::vector<SafetensorsEntry> v = t;
  v.erase(std::find_if(v.begin(), v.end(), [](const auto& e) {
    return e.name == "model.layers.1.self_attn.k_proj.weight";
  }));
  rewrite(v);
  EXPECT_NE(
      check(dir).find(
          dir +
          ": missing tensor 'model.layers.1.self_attn.k_proj.weight' (lathe weight layers.1.wk)"),
      std::string::npos);
  // No lm_head while the config does not tie embeddings.
  v = t;
  v.erase(
      std::find_if(v.begin(), v.end(), [](const auto& e) { return e.name == "lm_head.weight"; }));
  rewrite(v);
  EXPECT_NE(check(dir).find("missing tensor 'lm_head.weight'"), std::string::npos);
  // A shape that does not match config.json.
  v = t;
  for (auto& e : v)
    if (e.name == "model.norm.weight") {
      e.shape = {e.shape[0] / 2, 2};
    }
  rewrite(v);
  EXPECT_NE(check(dir).find(file + ": tensor 'model.norm.weight': shape ["), std::string::npos)
      << check(dir);
  // A dtype lathe cannot convert.
  v = t;
  for (auto& e : v)
    if (e.name == "model.norm.weight") e.dtype = "I32";
  rewrite(v);
  EXPECT_NE(check(dir).find(file + ": tensor 'model.norm.weight': dtype I32 is not supported"),
            std::string::npos);
  // A NaN weight is named when the values are read (it would make every logit NaN).
  v = t;
  for (auto& e : v)
    if (e.name == "model.norm.weight") {
      float nan = std::nanf("");
      std::memcpy(e.data.data() + 4 * 5, &nan, 4);
    }
  rewrite(v);
  {
    auto g = b(dir);
    auto hf = HfWeights::open(dir);
    std::vector<float> out(size_t(g.model.hidden));
    std::string e = error_of([&] { hf->source(g.decode)("norm", {g.model.hidden}, out.data()); });
    EXPECT_NE(e.find(file + ": tensor 'model.norm.weight': element 5 is NaN"), std::string::npos) << e;
  }
  // Attention biases (Qwen2).
  v = t;
  v.push_back({"model.layers.0.self_attn.q_proj.bias", "F32", {4}, f32_bytes({1, 2, 3, 4})});
  rewrite(v);
  EXPECT_NE(
      check(dir).find(file +
                      ": tensor 'model.layers.0.self_attn.q_proj.bias': the checkpoint has biases"),
      std::string::npos);
  // Tensors the model does not use: a layer past num_hidden_layers (config.json and the
  // checkpoint disagree) is an error; RoPE's inverse frequencies are skipped; other names
  // are warnings.
  auto notes = [&] {
    auto g = b(dir);
    return HfWeights::open(dir)->check({&g.prefill, &g.decode});
  };
  rewrite(t);
  EXPECT_TRUE(notes().empty());
  const int64_t layers = load_model("tiny").layers;
  v = t;
  v.push_back({"model.layers." + std::to_string(layers) + ".mlp.up_proj.weight", "F32", {4},
               f32_bytes({1, 2, 3, 4})});
  v.push_back({"model.layers." + std::to_string(layers + 1) + ".input_layernorm.weight", "F32",
               {4}, f32_bytes({1, 2, 3, 4})});
  rewrite(v);
  EXPECT_NE(check(dir).find(file + ": tensor 'model.layers." + std::to_string(layers) +
                            ".mlp.up_proj.weight' is not used: a layer past num_hidden_layers = " +
                            std::to_string(layers) + " (1 more unused tensors); config.json and the checkpoint disagree"),
            std::string::npos)
      << check(dir);
  v = t;
  v.push_back({"model.layers.0.block_sparse_moe.gate.weight", "F32", {4}, f32_bytes({1, 2, 3, 4})});
  rewrite(v);
  EXPECT_NE(check(dir).find("tensor 'model.layers.0.block_sparse_moe.gate.weight' is not used: a router, "
                            "but config.json has no experts"),
            std::string::npos)
      << check(dir);
  // A weight of a layer the model has that lathe's IR lacks (QK-norm): the model would
  // run without it, so it is an error, not a warning.
  v = t;
  v.push_back({"model.layers.1.self_attn.q_norm.weight", "F32", {4}, f32_bytes({1, 2, 3, 4})});
  rewrite(v);
  EXPECT_NE(check(dir).find("tensor 'model.layers.1.self_attn.q_norm.weight' is not used: a weight lathe's IR "
                            "does not have"),
            std::string::npos)
      << check(dir);
  v = t;
  v.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, f32_bytes({1, 2, 3, 4})});
  rewrite(v);
  EXPECT_TRUE(notes().empty());
  v.push_back({"model.vision_tower.proj", "F32", {4}, f32_bytes({1, 2, 3, 4})});
  rewrite(v);
  ASSERT_EQ(notes().size(), 1u);
  EXPECT_EQ(notes()[0], file + ": tensor 'model.vision_tower.proj' is not a weight lathe knows, and not used");
  // A tied model's own lm_head: the embeddings are used in its place.
  {
    const std::string config = dir + "/config.json";
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(config));
    cfg["tie_word_embeddings"] = true;
    write(config, cfg.dump());
    rewrite(t);
    ASSERT_EQ(notes().size(), 1u);
    EXPECT_NE(notes()[0].find(file + ": tensor 'lm_head.weight' is not used: config.json ties"),
              std::string::npos)
        << notes()[0];
    cfg["tie_word_embeddings"] = false;
    write(config, cfg.dump());
  }
  // MoE: an expert past num_local_experts, and an expert tensor lathe does not know.
  {
    TempDir m;
    std::vector<SafetensorsEntry> mt;
    write_hf_dir(m.path / "m", "tiny-moe", false, 3, &mt);
    const std::string mdir = (m.path / "m").string();
    EXPECT_EQ(check(mdir), "");
    const int64_t experts = load_model("tiny-moe").moe->experts;
    std::vector<SafetensorsEntry> w = mt;
    w.push_back({"model.layers.0.block_sparse_moe.experts." + std::to_string(experts) + ".w1.weight", "F32", {4},
                 f32_bytes({1, 2, 3, 4})});
    write(mdir + "/model.safetensors", safetensors_bytes(w));
    EXPECT_NE(check(mdir).find("is not used: an expert past num_local_experts = " + std::to_string(experts)),
              std::string::npos)
        << check(mdir);
    w = mt;
    w.push_back({"model.layers.0.block_sparse_moe.experts.0.w1.weight_scale", "F32", {1}, f32_bytes({1})});
    write(mdir + "/model.safetensors", safetensors_bytes(w));
    EXPECT_NE(check(mdir).find("experts.0.w1.weight_scale' is not used: a weight lathe's IR does not have"),
              std::string::npos)
        << check(mdir);
  }
  // A truncated file.
  std::string bytes = safetensors_bytes(t);
  write(file, bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(check(dir).find(file + ": tensor '"), std::string::npos);
  EXPECT_NE(check(dir).find("run past the end of the file"), std::string::npos);
  // No weights at all.
  fs::remove(file);
  EXPECT_NE(check(dir).find(dir + ": no *.safetensors files"), std::string::npos);

  // Sharded: the index names a shard that is missing, or a tensor the shard lacks.
  TempDir s;
  write_hf_dir(s.path / "m", "tiny", true, 3);
  const std::string sdir = (s.path / "m").string();
  EXPECT_EQ(check(sdir), "");
  std::string index = sdir + "/model.safetensors.index.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(index));
  j["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors";
  write(index, j.dump());
  EXPECT_NE(check(sdir).find("lists shard 'model-00009-of-00009.safetensors', which is missing"),
            std::string::npos);
  j["weight_map"]["model.norm.weight"] = "../../etc/passwd";
  write(index, j.dump());
  EXPECT_NE(check(sdir).find("is not a file name in the directory"), std::string::npos);
  j["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
  j["weight_map"]["model.layers.0.ffn_norm.weight_typo"] = "model-00001-of-00002.safetensors";
  write(index, j.dump());
  EXPECT_NE(check(sdir).find("which does not hold it"), std::string::npos);
  write(index, "{\"weight_map\": ");
  EXPECT_NE(check(sdir).find(index + ": not valid JSON"), std::string::npos);
}

// ---------------------------------------------------------------- parity with transformers

struct Fixture {
  std::vector<int32_t> prompt, decode;
  std::vector<std::vector<float>> logits;  // [1 + decode steps][vocab]
};

Fixture read_fixture(const std::string& dir) {
  std::ifstream f(dir + "/reference_logits.json");
  LATHE_ASSERT(bool(f),
               "missing fixture " + dir + "/reference_logits.json (bench/hf_parity.py writes it)");
  nlohmann::json j = nlohmann::json::parse(f);
  Fixture x;
  x.prompt = j["prompt"].get<std::vector<int32_t>>();
  x.decode = j["decode"].get<std::vector<int32_t>>();
  x.logits = j["logits"].get<std::vector<std::vector<float>>>();
  LATHE_ASSERT(x.logits.size() == x.decode.size() + 1, "fixture: one logits row per step");
  return x;
}

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  return normalized_error(a, std::vector<double>(b.begin(), b.end()));
}

class HfParity : public ::testing::TestWithParam<std::string> {};

// The float64 reference interpreter with the checkpoint's weights.
TEST_P(HfParity, ReferenceMatchesTransformers) {
  const std::string dir = fixture(GetParam());
  Fixture fx = read_fixture(dir);
  auto b = testing::build_plan_graphs(
      dir, "cpu-host", {1, int64_t(fx.prompt.size()), int64_t(fx.decode.size()) + 1});
  auto hf = HfWeights::open(dir);
  hf->check({&b.prefill, &b.decode});
  Reference ref(b.prefill, b.decode, hf->source(b.decode));
  std::vector<std::vector<double>> l = ref.prefill({fx.prompt});
  for (size_t step = 0; step < fx.logits.size(); ++step) {
    std::vector<float> mine(l[0].begin(), l[0].end());
    double e = rel_error(mine, fx.logits[step]);
    EXPECT_LT(e, 1e-4) << "step " << step;
    std::cout << "  [" << GetParam() << "] reference step " << step << ": normalized error " << e
              << "\n";
    if (step < fx.decode.size()) l = ref.decode({fx.decode[step]});
  }
}

// The JIT-compiled CPU plan (fused, f32 KV) with the checkpoint's weights, packed as
// f32 and in the checkpoint's own dtype (tiny-mixtral: bf16, the values it holds, so
// the tolerance stays; this also covers bf16 norm gains, which every format keeps).
// Quantized formats get the tolerance of tests/runtime/cpu_backend_test.cpp (3 x the
// relative error of the weights and of the int8 activations of integer dot products)
// and no greedy-token check.
void cpu_backend_matches(const std::string& name, const std::string& weights, double tol = 1e-4) {
  const std::string dir = fixture(name);
  Fixture fx = read_fixture(dir);
  PlanOptions o;
  if (weights != "model") o.weights = parse_weight_format(weights);
  o.kv_dtype = parse_kv_dtype("f32");
  Plan plan =
      testing::make_plan(dir, {1, int64_t(fx.prompt.size()), int64_t(fx.decode.size()) + 1}, o);
  auto hf = HfWeights::open(dir);
  hf->check({&plan.prefill, &plan.decode});
  WeightStore w = WeightStore::build({&plan.prefill, &plan.decode}, hf->source(plan.decode), 2);
  SessionOptions so;
  so.poison = true;
  so.threads = 2;
  CpuSession s(plan, w, testing::test_jit(), so);
  StepResult r = s.prefill({fx.prompt});
  for (size_t step = 0; step < fx.logits.size(); ++step) {
    double e = rel_error(r.logits[0], fx.logits[step]);
    EXPECT_LT(e, tol) << "step " << step;
    std::cout << "  [" << name << ", weights " << weights << "] cpu step " << step
              << ": normalized error " << e << "\n";
    int32_t want = int32_t(std::max_element(fx.logits[step].begin(), fx.logits[step].end()) -
                           fx.logits[step].begin());
    if (tol <= 1e-4) {
      EXPECT_EQ(r.argmax[0], want) << "greedy token differs at step " << step;
    }
    if (step < fx.decode.size()) r = s.decode({fx.decode[step]});
  }
}

TEST_P(HfParity, CpuBackendMatchesTransformers) {
  cpu_backend_matches(GetParam(), "f32");
  cpu_backend_matches(GetParam(), "model");
  // The fixtures' weights are Gaussian (N(0, 1 / in)), and so are the activations, so
  // int8 weights per row and int8 activations per 32-block each carry the peaky-value
  // error of cpu_backend_test.cpp (amax ~ 2.5 std: e = 0.0057), not the uniform 0.0039.
  cpu_backend_matches(GetParam(), "int8", 3 * (0.0057 + 0.0057));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfParity, ::testing::Values("tiny-llama", "tiny-mixtral", "tiny-llama31"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace lathe
