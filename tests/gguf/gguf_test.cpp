// GGUF container, model metadata, weight loading and corrupted inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "checkpoint/gguf_file.h"
#include "checkpoint/gguf_model.h"
#include "frontend/builder.h"
#include "frontend/specs.h"
#include "ir/assert.h"
#include "passes/pipeline.h"
#include "runtime/gguf_weights.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("lathe-gguf-test-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return (d / name).string();
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A GGUF v3 file written byte by byte, for headers lathe's writer cannot produce.
struct RawGguf {
  std::vector<uint8_t> b;
  RawGguf(uint64_t tensors, uint64_t keys) {
    put("GGUF", 4);
    u32(3);
    u64(tensors);
    u64(keys);
  }
  void put(const void* p, size_t n) { b.insert(b.end(), (const uint8_t*)p, (const uint8_t*)p + n); }
  void u32(uint32_t v) { put(&v, 4); }
  void u64(uint64_t v) { put(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    put(s.data(), s.size());
  }
};

// A file written by lathe for a built-in model, cached per (model, format).
const std::string& model_file(const std::string& model, const std::string& fmt) {
  static std::map<std::string, std::string> files;
  std::string key = model + "-" + fmt;
  auto it = files.find(key);
  if (it != files.end()) return it->second;
  std::string path = temp_path(key + ".gguf");
  write_synthetic_gguf(load_model(model), 7, *parse_weight_format(fmt), path);
  return files[key] = path;
}

TEST(GgufFile, MetadataAndTensorsRoundTrip) {
  gguf::Writer w;
  w.add_string("general.architecture", "test");
  w.add_u32("a.u32", 4000000000u);
  w.add_i32("a.i32", -7);
  w.add_f32("a.f32", 0.25f);
  w.add_bool("a.bool", true);
  w.add_strings("a.strings", {"x", "", "yz"});
  w.add_numbers("a.f32s", gguf::ValueType::f32, {1.5, -2});
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 3;
  w.add_tensor("t.f32", {16, 4}, 0, [&](uint8_t* out) { std::memcpy(out, v.data(), 256); });
  w.add_tensor("t.q8", {32, 2}, 8, [&](uint8_t* out) {
    for (int b = 0; b < 2; ++b) {
      uint16_t one = 0x3c00;  // 1.0 in f16
      std::memcpy(out + b * 34, &one, 2);
      for (int j = 0; j < 32; ++j) out[b * 34 + 2 + j] = uint8_t(int8_t(j - 16 + b));
    }
  });
  std::string path = temp_path("roundtrip.gguf");
  w.write(path);
  auto f = gguf::File::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "test");
  EXPECT_EQ(f->get_int("a.u32"), 4000000000LL);
  EXPECT_EQ(f->get_int("a.i32"), -7);
  EXPECT_EQ(*f->get_float_opt("a.f32"), 0.25);
  EXPECT_EQ(f->get("a.bool")->number, 1);
  EXPECT_EQ(f->get_array("a.strings", gguf::ValueType::string).strings,
            (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_EQ(f->get_array("a.f32s", gguf::ValueType::f32).numbers, (std::vector<double>{1.5, -2}));
  ASSERT_EQ(f->tensors().size(), 2u);
  const gguf::TensorInfo* t = f->find("t.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->ne, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(std::memcmp(t->data, v.data(), 256), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 32, 0u);
  std::vector<float> q(64);
  gguf_dequantize(*f, *f->find("t.q8"), q.data());
  EXPECT_EQ(q[0], -16.0f);
  EXPECT_EQ(q[63], 16.0f);
  EXPECT_NE(error_of([&] { f->get_string("a.u32"); }).find("key 'a.u32': expected a string"),
            std::string::npos);
  EXPECT_NE(error_of([&] { f->get_int("missing"); }).find("missing key 'missing'"),
            std::string::npos);
}

TEST(GgufModel, NamesMapBothWays) {
  for (const char* n : {"tok_embeddings", "norm", "lm_head", "layers.3.wq", "layers.0.attn_norm",
                        "layers.11.w_down", "layers.1.router", "layers.1.experts.w_up"}) {
    std::string g = gguf::gguf_name(n);
    EXPECT_FALSE(g.empty()) << n;
    EXPECT_EQ(gguf::lathe_name(g), n);
  }
  EXPECT_EQ(gguf::gguf_name("layers.3.wq"), "blk.3.attn_q.weight");
  EXPECT_EQ(gguf::gguf_name("layers.1.experts.w_down"), "blk.1.ffn_down_exps.weight");
  EXPECT_EQ(gguf::gguf_name("layers.1.router"), "blk.1.ffn_gate_inp.weight");
  EXPECT_EQ(gguf::lathe_name("blk.0.attn_q.bias"), "");
}

TEST(GgufModel, SpecFromMetadataMatchesTheBuiltin) {
  for (const char* name : {"tiny", "tiny-moe"}) {
    ModelSpec want = load_model(name);
    ModelSpec got = load_model(model_file(name, "f32"));
    EXPECT_EQ(got.hidden, want.hidden);
    EXPECT_EQ(got.layers, want.layers);
    EXPECT_EQ(got.heads, want.heads);
    EXPECT_EQ(got.kv_heads, want.kv_heads);
    EXPECT_EQ(got.head_dim, want.head_dim);
    EXPECT_EQ(got.ffn, want.ffn);
    EXPECT_EQ(got.vocab, want.vocab);
    EXPECT_EQ(got.max_context, want.max_context);
    EXPECT_NEAR(got.norm_eps, want.norm_eps, 1e-12);
    EXPECT_EQ(got.rope_theta, want.rope_theta);
    EXPECT_EQ(got.tie_embeddings, want.tie_embeddings);
    EXPECT_EQ(got.is_moe(), want.is_moe());
    if (want.is_moe()) {
      EXPECT_EQ(got.moe->experts, want.moe->experts);
      EXPECT_EQ(got.moe->top_k, want.moe->top_k);
      EXPECT_EQ(got.moe->expert_ffn, want.moe->expert_ffn);
    }
    EXPECT_EQ(got.param_count(), want.param_count());
  }
  auto f = gguf::File::open(model_file("tiny", "q4_0"));
  EXPECT_EQ(gguf::stored_weight_format(*f), (Format{DType::int4, 32, DType::f16}));
  EXPECT_EQ(f->find("blk.0.attn_q.weight")->type, 2u);
  EXPECT_EQ(f->find("blk.0.attn_norm.weight")->type, 0u);
  EXPECT_EQ(f->find("token_embd.weight")->type, 0u);
}

// The store built from a GGUF file equals the store built from the synthetic source
// with the same seed and format: byte for byte when the file holds that format
// (direct copy), and also through the f32 detour (file F32, plan int8:g32).
// RoPE scaling: a model written with llama3 scaling carries llama.cpp's
// rope_freqs.weight divisors and reads back with those divisors; linear scaling goes
// through the metadata keys; a plain file has none; types lathe does not apply (yarn)
// are reported; a malformed rope_freqs tensor is an error naming it.
TEST(GgufModel, RopeScalingRoundTrips) {
  const ModelSpec plain = load_model("tiny");
  EXPECT_TRUE(gguf::model_notes(*gguf::File::open(model_file("tiny", "f32"))).empty());
  EXPECT_FALSE(gguf::load_model_spec(model_file("tiny", "f32")).rope_scaling.has_value());

  ModelSpec l3 = plain;
  l3.rope_scaling = RopeScaling{.type = "llama3", .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                                .original_max_context = 64, .factors = {}};
  const std::vector<double> want = rope_divisors(*l3.rope_scaling, l3.rope_theta, l3.head_dim);
  // The head size and theta put the pairs on both sides of the blend.
  EXPECT_DOUBLE_EQ(want.front(), 1.0);
  EXPECT_DOUBLE_EQ(want.back(), 8.0);
  EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](double d) { return d > 1.0 && d < 8.0; }));
  std::string path = temp_path("rope-llama3.gguf");
  write_synthetic_gguf(l3, 7, *parse_weight_format("f32"), path);
  ModelSpec back = gguf::load_model_spec(path);
  ASSERT_TRUE(back.rope_scaling.has_value());
  EXPECT_EQ(back.rope_scaling->type, "factors");
  std::vector<double> got = rope_divisors(*back.rope_scaling, back.rope_theta, back.head_dim);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << i;
  EXPECT_TRUE(gguf::model_notes(*gguf::File::open(path)).empty());

  ModelSpec lin = plain;
  lin.rope_scaling = RopeScaling{.type = "linear", .factor = 4, .low_freq_factor = 1, .high_freq_factor = 4,
                                 .original_max_context = 8192, .factors = {}};
  path = temp_path("rope-linear.gguf");
  write_synthetic_gguf(lin, 7, *parse_weight_format("f32"), path);
  back = gguf::load_model_spec(path);
  ASSERT_TRUE(back.rope_scaling.has_value());
  EXPECT_EQ(back.rope_scaling->type, "linear");
  EXPECT_EQ(back.rope_scaling->factor, 4.0);

  gguf::Writer w;
  w.add_string("general.architecture", "llama");
  w.add_string("llama.rope.scaling.type", "yarn");
  w.add_f32("llama.rope.scaling.factor", 4.0f);
  path = temp_path("rope-yarn.gguf");
  w.write(path);
  std::vector<std::string> notes = gguf::model_notes(*gguf::File::open(path));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("'yarn'"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("not applied"), std::string::npos) << notes[0];
}

TEST(GgufModel, MalformedRopeFreqsIsAnError) {
  // The tiny model's file with a rope_freqs tensor of the wrong length, then with a
  // negative factor.
  const ModelSpec m = load_model("tiny");
  for (int64_t n : {m.head_dim / 2 - 1, m.head_dim / 2}) {
    gguf::Writer w;
    auto src = gguf::File::open(model_file("tiny", "f32"));
    for (const gguf::TensorInfo& t : src->tensors())
      w.add_tensor(t.name, t.ne, t.type, [&t](uint8_t* out) { std::memcpy(out, t.data, t.bytes); });
    for (const auto& [key, value] : src->metadata()) w.add(key, value);
    w.add_tensor("rope_freqs.weight", {n}, 0, [n](uint8_t* out) {
      for (int64_t i = 0; i < n; ++i) {
        float v = i == n - 1 ? -1.0f : 1.0f;
        std::memcpy(out + 4 * i, &v, 4);
      }
    });
    std::string path = temp_path("rope-bad.gguf");
    w.write(path);
    std::string e = error_of([&] { gguf::load_model_spec(path); });
    EXPECT_NE(e.find("rope_freqs.weight"), std::string::npos) << e;
    EXPECT_NE(e.find(n == m.head_dim / 2 ? "not a positive factor" : "expected F32"), std::string::npos) << e;
  }
}

TEST(GgufWeights, LoadEqualsSyntheticPacking) {
  struct Case {
    const char* file_fmt;
    const char* plan_fmt;
  };
  for (Case c : {Case{"f32", "f32"}, Case{"f16", "f16"}, Case{"q8_0", "int8:g32"},
                 Case{"q4_0", "int4:g32"}, Case{"f32", "int8:g32"}, Case{"q8_0", "f32"}}) {
    for (const char* model : {"tiny", "tiny-moe"}) {
      ModelSpec m = load_model(model);
      Target t = load_target("cpu-host");
      PlanOptions o;
      o.weights = *parse_weight_format(c.plan_fmt);
      Workload wl{1, 4, 4};
      Graph g = build_graph(m, build_options(m, t, o, wl, Phase::decode));
      Graph pre = build_graph(m, build_options(m, t, o, wl, Phase::prefill));
      Lowered low = lower(std::move(pre), std::move(g), o, t, wl);
      auto file = gguf::File::open(model_file(model, c.file_fmt));
      WeightStore a = load_gguf_weights({&low.prefill, &low.decode}, file, 2);
      WeightStore b;
      if (std::string(c.file_fmt) == "q8_0" && std::string(c.plan_fmt) == "f32") {
        // The file holds quantized values: compare with the dequantized synthetic ones.
        b = WeightStore::build(
            {&low.prefill, &low.decode},
            [](const std::string& n, const std::vector<int64_t>& s, float* out) {
              int64_t K = s.back(), rows = 1;
              for (size_t i = 0; i + 1 < s.size(); ++i) rows *= s[i];
              synthetic_values(7, n, s, out);
              Format q{DType::int8, 32, DType::f16};
              if (s.size() < 2 || n == "tok_embeddings" || n.ends_with("router")) return;
              std::vector<int8_t> p(size_t(rows * K));
              std::vector<uint16_t> sc(size_t(rows * K / 32));
              pack_rows(out, rows, K, q, p.data(), sc.data());
              unpack_rows(p.data(), sc.data(), rows, K, q, out);
            },
            2);
      } else {
        b = WeightStore::build({&low.prefill, &low.decode}, synthetic_source(7), 2);
      }
      ASSERT_EQ(a.tensors().size(), b.tensors().size());
      for (const auto& [name, ta] : a.tensors()) {
        const WeightTensor& tb = b.get(name);
        ASSERT_EQ(ta.format, tb.format) << name;
        ASSERT_EQ(ta.payload.size(), tb.payload.size()) << name;
        EXPECT_EQ(std::memcmp(ta.payload.data(), tb.payload.data(), ta.payload.size()), 0)
            << model << " " << c.file_fmt << "->" << c.plan_fmt << ": " << name;
        ASSERT_EQ(ta.scales.size(), tb.scales.size()) << name;
        if (ta.scales.size()) {
          EXPECT_EQ(std::memcmp(ta.scales.data(), tb.scales.data(), ta.scales.size()), 0) << name;
        }
      }
    }
  }
}

TEST(GgufErrors, WrongMagicVersionAndGarbage) {
  std::string p = temp_path("bad.gguf");
  write_bytes(p, {'G', 'G', 'U', 'F', 3, 0, 0, 0, 'g', 'a', 'r', 'b', 'a', 'g', 'e'});
  std::string e = error_of([&] { load_model(p); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  write_bytes(p, {'G', 'G', 'M', 'L', 3, 0, 0, 0});
  EXPECT_NE(error_of([&] { gguf::File::open(p); }).find("wrong magic"), std::string::npos);
  write_bytes(p, {'G', 'G', 'U', 'F', 9, 0, 0, 0});
  EXPECT_NE(error_of([&] { gguf::File::open(p); }).find("version 9"), std::string::npos);
  write_bytes(p, {});
  EXPECT_NE(error_of([&] { gguf::File::open(p); }).find("wrong magic"), std::string::npos);
  EXPECT_NE(error_of([&] { gguf::File::open(temp_path("missing.gguf")); }).find("cannot open"),
            std::string::npos);
}

// Every truncation of a valid file is rejected with an error (never a crash), and
// random byte flips either parse or throw lathe::Error.
TEST(GgufErrors, TruncationsAndFlipsNeverCrash) {
  std::vector<uint8_t> good = read_bytes(model_file("tiny-moe", "q4_0"));
  size_t header_end = 0;
  {
    auto f = gguf::File::parse(good.data(), good.size(), "mem");
    header_end = size_t(f->tensors().front().data - good.data());
  }
  for (size_t n = 0; n < good.size(); n += (n < header_end + 64 ? 1 : 997)) {
    std::string e = error_of([&] { gguf::File::parse(good.data(), n, "cut"); });
    EXPECT_FALSE(e.empty()) << "a file cut to " << n << " bytes parsed";
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> b = good;
    for (int k = 0; k < 3; ++k) b[rng() % header_end] = uint8_t(rng());
    try {
      auto f = gguf::File::parse(b.data(), b.size(), "flipped");
      ModelSpec m = gguf::model_spec(*f);
      (void)m;
    } catch (const Error&) {
    }
  }
}

TEST(GgufErrors, DataPastEndShapeMismatchTypesAndScales) {
  // Tensor data past the end of the file.
  std::vector<uint8_t> good = read_bytes(model_file("tiny", "q8_0"));
  std::string p = temp_path("short.gguf");
  write_bytes(p, std::vector<uint8_t>(good.begin(), good.end() - 100));
  std::string e = error_of([&] { load_model(p); });
  EXPECT_NE(e.find("runs past the end of the file"), std::string::npos) << e;
  EXPECT_NE(e.find("output.weight"), std::string::npos) << e;

  // Metadata that disagrees with the tensors, a K-quant tensor, a NaN scale.
  auto base = [](gguf::Writer& w, int64_t hidden_in_metadata) {
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.embedding_length", uint32_t(hidden_in_metadata));
    w.add_u32("llama.block_count", 1);
    w.add_u32("llama.attention.head_count", 2);
    w.add_u32("llama.feed_forward_length", 64);
    w.add_u32("llama.context_length", 64);
  };
  auto zeros = [](uint8_t*) {};
  auto tensors = [&](gguf::Writer& w, uint32_t q_type) {
    w.add_tensor("token_embd.weight", {32, 300}, 0, zeros);
    w.add_tensor("blk.0.attn_norm.weight", {32}, 0, zeros);
    w.add_tensor("blk.0.attn_q.weight", {q_type == 12 ? 256 : 32, q_type == 12 ? 4 : 32}, q_type,
                 [](uint8_t* out) {
                   uint16_t nan = 0x7e00;
                   std::memcpy(out, &nan, 2);  // first block's scale (Q8_0)
                 });
    for (const char* n : {"blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight"})
      w.add_tensor(n, {32, 32}, 0, zeros);
    w.add_tensor("blk.0.ffn_norm.weight", {32}, 0, zeros);
    w.add_tensor("blk.0.ffn_gate.weight", {32, 64}, 0, zeros);
    w.add_tensor("blk.0.ffn_up.weight", {32, 64}, 0, zeros);
    w.add_tensor("blk.0.ffn_down.weight", {64, 32}, 0, zeros);
    w.add_tensor("output_norm.weight", {32}, 0, zeros);
  };
  {
    gguf::Writer w;
    base(w, 32);
    tensors(w, 8);
    std::string path = temp_path("nan.gguf");
    w.write(path);
    ModelSpec m = load_model(path);  // metadata and shapes agree
    EXPECT_TRUE(m.tie_embeddings);
    auto f = gguf::File::open(path);
    std::vector<float> out(32 * 32);
    e = error_of([&] { gguf_dequantize(*f, *f->find("blk.0.attn_q.weight"), out.data()); });
    EXPECT_NE(e.find("blk.0.attn_q.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("non-finite scale"), std::string::npos) << e;
  }
  {
    // Non-finite values in float tensors: named on load, before they turn logits into NaN.
    gguf::Writer w;
    base(w, 32);
    w.add_tensor("blk.0.attn_norm.weight", {32}, 0, [](uint8_t* out) {
      float nan = std::nanf("");
      std::memcpy(out + 4 * 7, &nan, 4);
    });
    w.add_tensor("blk.0.ffn_norm.weight", {32}, 1, [](uint8_t* out) {
      uint16_t inf = 0x7c00;  // f16 infinity
      std::memcpy(out + 2 * 3, &inf, 2);
    });
    w.add_tensor("output_norm.weight", {32}, 30, [](uint8_t* out) {
      uint16_t one = 0x3f80;  // bf16 1.0: finite
      std::memcpy(out, &one, 2);
    });
    std::string path = temp_path("nonfinite.gguf");
    w.write(path);
    auto f = gguf::File::open(path);
    e = error_of([&] { gguf_check_values(*f, *f->find("blk.0.attn_norm.weight")); });
    EXPECT_NE(e.find("nonfinite.gguf: tensor 'blk.0.attn_norm.weight': element 7 is NaN"), std::string::npos) << e;
    std::vector<float> out(32);
    e = error_of([&] { gguf_dequantize(*f, *f->find("blk.0.ffn_norm.weight"), out.data()); });
    EXPECT_NE(e.find("tensor 'blk.0.ffn_norm.weight': element 3 is infinite"), std::string::npos) << e;
    EXPECT_NO_THROW(gguf_dequantize(*f, *f->find("output_norm.weight"), out.data()));
    EXPECT_EQ(out[0], 1.0f);
  }
  {
    gguf::Writer w;
    base(w, 48);
    tensors(w, 0);
    std::string path = temp_path("mismatch.gguf");
    w.write(path);
    e = error_of([&] { load_model(path); });
    EXPECT_NE(e.find("token_embd.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("llama.embedding_length"), std::string::npos) << e;
  }
  {
    gguf::Writer w;
    base(w, 32);
    tensors(w, 12);  // Q4_K
    std::string path = temp_path("kquant.gguf");
    w.write(path);
    e = error_of([&] { load_model(path); });
    EXPECT_NE(e.find("blk.0.attn_q.weight"), std::string::npos) << e;
  }
  {
    gguf::Writer w;
    base(w, 32);
    tensors(w, 0);
    w.add_tensor("blk.0.attn_q.bias", {32}, 0, zeros);
    std::string path = temp_path("bias.gguf");
    w.write(path);
    e = error_of([&] { load_model(path); });
    EXPECT_NE(e.find("blk.0.attn_q.bias"), std::string::npos) << e;
  }
  {
    gguf::Writer w;
    w.add_string("general.architecture", "gpt2");
    std::string path = temp_path("arch.gguf");
    w.write(path);
    e = error_of([&] { load_model(path); });
    EXPECT_NE(e.find("general.architecture"), std::string::npos) << e;
  }
}

// Tensor infos are written by hand here: lathe's writer cannot place two tensors on
// the same bytes.
TEST(GgufErrors, OverlappingTensorDataIsRefused) {
  auto file = [](uint64_t second_offset) {
    RawGguf f(2, 0);  // two tensors, no metadata
    uint64_t offsets[2] = {0, second_offset};
    for (int i = 0; i < 2; ++i) {
      f.str(i == 0 ? "a.weight" : "b.weight");
      f.u32(1);   // dimensions
      f.u64(32);  // 32 f32 values: 128 bytes
      f.u32(0);   // F32
      f.u64(offsets[i]);
    }
    f.b.resize((f.b.size() + 31) / 32 * 32 + 256, 0);
    return f.b;
  };
  std::vector<uint8_t> ok = file(128), bad = file(96);
  EXPECT_NO_THROW(gguf::File::parse(ok.data(), ok.size(), "ok.gguf"));
  std::string e = error_of([&] { gguf::File::parse(bad.data(), bad.size(), "bad.gguf"); });
  EXPECT_NE(e.find("bad.gguf: tensor 'b.weight': its data (at offset 96) overlaps tensor 'a.weight' (128 bytes at offset 0)"),
            std::string::npos)
      << e;
}

// A key read with a corrupt string length swallows the bytes after it: refused as not
// a name, without quoting the bytes (the error was 8 KB of raw bytes).
TEST(GgufErrors, KeyThatIsNotANameIsNotQuoted) {
  RawGguf f(0, 1);  // no tensors, one key
  std::string key = "general.name\t\x01";
  key += std::string(300, 'x');
  f.str(key);
  f.u32(4);  // UINT32
  f.u32(7);
  std::string e = error_of([&] { gguf::File::parse(f.b.data(), f.b.size(), "bad.gguf"); });
  EXPECT_NE(e.find("bad.gguf: metadata key #0 is not a name (314 bytes with control characters or past 256 bytes"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("xxxx"), std::string::npos) << e;
}

TEST(GgufErrors, KQuantTypeIsNamed) {
  gguf::Writer w;
  w.add_string("general.architecture", "llama");
  w.add_tensor("blk.0.attn_q.weight", {256, 2}, 12, [](uint8_t*) {});
  std::string path = temp_path("q4k.gguf");
  w.write(path);
  auto f = gguf::File::open(path);
  std::string e = error_of([&] { gguf::stored_weight_format(*f); });
  EXPECT_NE(e.find("blk.0.attn_q.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("Q4_K"), std::string::npos) << e;
  std::vector<float> out(512);
  e = error_of([&] { gguf_dequantize(*f, f->tensors()[0], out.data()); });
  EXPECT_NE(e.find("Q4_K"), std::string::npos) << e;
}

TEST(GgufWriter, FailureLeavesNoFile) {
  gguf::Writer w;
  w.add_string("general.architecture", "llama");
  w.add_tensor("x", {32}, 0, [](uint8_t*) { throw Error("boom"); });
  std::string path = temp_path("never.gguf");
  EXPECT_NE(error_of([&] { w.write(path); }).find("boom"), std::string::npos);
  EXPECT_FALSE(fs::exists(path));
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find("never.gguf.tmp"), std::string::npos);
  EXPECT_NE(error_of([&] { w.write("/no/such/dir/x.gguf"); }).find("does not exist"),
            std::string::npos);
}

}  // namespace
}  // namespace lathe
