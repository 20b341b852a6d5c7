#include "runtime/gguf_weights.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>

#include "checkpoint/gguf_model.h"
#include "checkpoint/tokenizer.h"
#include "codegen/cpu/kernel_prelude.h"
#include "ir/assert.h"

namespace lathe {

namespace {

std::string shape_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

float scale_at(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block, 2);
  return lk::h2f(d);
}

// The GGUF tensor behind a lathe weight, checked against the shape the plan needs.
const gguf::TensorInfo& tensor_for(const gguf::File& f, const std::string& name,
                                   const std::vector<int64_t>& shape) {
  std::string g = gguf::gguf_name(name);
  const gguf::TensorInfo* t = g.empty() ? nullptr : f.find(g);
  if (!t)
    throw Error(f.path() + ": no tensor for weight '" + name + "'" +
                (g.empty() ? "" : " (expected '" + g + "')"));
  if (t->shape() != shape)
    throw Error(f.path() + ": tensor '" + g + "' has shape " + shape_text(t->shape()) +
                " but the plan needs " + shape_text(shape) +
                " (GGUF weights cannot be split with --tp)");
  return *t;
}

}  // namespace

void gguf_check_values(const gguf::File& f, const gguf::TensorInfo& t) {
  const int64_t n = t.elements();
  auto bits16 = [&t](int64_t at) {
    uint16_t h;
    std::memcpy(&h, t.data + at, 2);
    return h;
  };
  auto fail = [&](const std::string& what) {
    throw Error(f.path() + ": tensor '" + t.name + "': " + what);
  };
  auto scales = [&](int64_t block_bytes) {
    for (int64_t b = 0; b < n / 32; ++b)
      if ((bits16(b * block_bytes) & 0x7c00) == 0x7c00)
        fail("block " + std::to_string(b) + " has a non-finite scale (" +
             std::to_string(lk::h2f(bits16(b * block_bytes))) + ")");
  };
  auto value = [&](int64_t i, float v) {
    fail("element " + std::to_string(i) + " is " + (std::isnan(v) ? "NaN" : "infinite"));
  };
  switch (t.type) {
    case 0:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, t.data + 4 * i, 4);
        if ((u & 0x7f800000u) == 0x7f800000u) value(i, lk::bits_to_float(u));
      }
      return;
    case 1:
      for (int64_t i = 0; i < n; ++i)
        if ((bits16(2 * i) & 0x7c00) == 0x7c00) value(i, lk::h2f(bits16(2 * i)));
      return;
    case 30:
      for (int64_t i = 0; i < n; ++i)
        if ((bits16(2 * i) & 0x7f80) == 0x7f80) value(i, lk::bf2f(bits16(2 * i)));
      return;
    case 8: return scales(34);
    case 2: return scales(18);
    default: return;  // a type lathe cannot load is named when it is loaded
  }
}

void gguf_dequantize(const gguf::File& f, const gguf::TensorInfo& t, float* out) {
  gguf_check_values(f, t);
  const int64_t n = t.elements();
  const uint8_t* p = t.data;
  switch (t.type) {
    case 0:
      std::memcpy(out, p, size_t(n) * 4);
      return;
    case 1:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = lk::h2f(h);
      }
      return;
    case 30:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = lk::bf2f(h);
      }
      return;
    case 8:
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = p + b * 34;
        float d = scale_at(blk);
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = float(int8_t(blk[2 + j])) * d;
      }
      return;
    case 2:
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = p + b * 18;
        float d = scale_at(blk);
        for (int j = 0; j < 16; ++j) {
          out[b * 32 + j] = float(int(blk[2 + j] & 15) - 8) * d;
          out[b * 32 + j + 16] = float(int(blk[2 + j] >> 4) - 8) * d;
        }
      }
      return;
    default:
      throw Error(f.path() + ": tensor '" + t.name + "' is stored as " + gguf::type_name(t.type) +
                  ", which lathe cannot load (supported: F32, F16, BF16, Q8_0, Q4_0)");
  }
}

WeightStore load_gguf_weights(const std::vector<const Graph*>& graphs,
                              std::shared_ptr<const gguf::File> file, int threads) {
  const gguf::File& f = *file;
  // The file's tensors the plan reads (the weights are filled on several threads).
  std::mutex used_mu;
  std::set<std::string> used;
  auto use = [&](const std::string& name, const std::vector<int64_t>& shape) -> const gguf::TensorInfo& {
    const gguf::TensorInfo& t = tensor_for(f, name, shape);
    std::lock_guard<std::mutex> lock(used_mu);
    used.insert(t.name);
    return t;
  };
  WeightSource source = [&f, &use](const std::string& name, const std::vector<int64_t>& shape,
                                   float* out) { gguf_dequantize(f, use(name, shape), out); };
  DirectFill direct = [&f, &use](WeightTensor& w) {
    const gguf::TensorInfo& t = use(w.name, w.shape);
    if (gguf::format_of(t.type) != w.format) return false;
    gguf_check_values(f, t);
    const int64_t n = t.elements();
    uint8_t* payload = static_cast<uint8_t*>(w.payload.data());
    uint16_t* scales = static_cast<uint16_t*>(w.scales.data());
    switch (t.type) {
      case 0:
      case 1:
      case 30:
        std::memcpy(payload, t.data, size_t(t.bytes));
        return true;
      case 8:
        for (int64_t b = 0; b < n / 32; ++b) {
          const uint8_t* blk = t.data + b * 34;
          std::memcpy(&scales[b], blk, 2);
          std::memcpy(payload + b * 32, blk + 2, 32);
        }
        return true;
      case 2:
        for (int64_t b = 0; b < n / 32; ++b) {
          const uint8_t* blk = t.data + b * 18;
          std::memcpy(&scales[b], blk, 2);
          std::memcpy(payload + b * 16, blk + 2, 16);
        }
        return true;
      default:
        return false;
    }
  };
  WeightStore store = WeightStore::build(graphs, source, threads, direct);
  // A tensor no weight reads: the metadata describes another model than the tensors
  // hold (checked when the model is read too; here against what the plan's graphs read).
  gguf::refuse_unwanted_tensors(f, used, "");
  return store;
}

Format gguf_tensor_format(const std::string& name, const std::vector<int64_t>& shape,
                          const Format& matrices) {
  const Format f32{DType::f32, 0, DType::f16};
  if (shape.size() < 2 || name == "tok_embeddings" || name.ends_with(".router")) return f32;
  return matrices;
}

GgufWritten write_synthetic_gguf(const ModelSpec& m, uint64_t seed, const Format& matrices,
                                 const std::string& path) {
  return write_gguf(m, synthetic_source(seed), matrices, path, m.vocab >= kMinSyntheticVocab);
}

GgufWritten write_gguf(const ModelSpec& m, const WeightSource& source, const Format& matrices,
                       const std::string& path, bool vocabulary) {
  auto type = gguf::ggml_type_of(matrices);
  if (!type)
    throw Error("--weights " + format_name(matrices) +
                ": GGUF stores f32, f16, bf16, q8_0 (int8:g32) and q4_0 (int4:g32) weights");
  gguf::Writer w;
  const uint32_t file_type = *type == 0    ? 0
                             : *type == 1  ? 1
                             : *type == 30 ? 32
                             : *type == 8  ? 7
                                           : 2;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", m.name);
  w.add_u32("general.file_type", file_type);
  w.add_u32("general.quantization_version", 2);
  w.add_u32("general.alignment", 32);
  // Model sizes are 64-bit in lathe and 32-bit in GGUF metadata: one that does not fit
  // is an error, not a value wrapped modulo 2^32.
  auto put_u32 = [&](const char* key, int64_t v) {
    if (v < 0 || v > int64_t(UINT32_MAX))
      throw Error(path + ": model '" + m.name + "': " + std::to_string(v) + " does not fit the GGUF key '" + key +
                  "' (32 bits)");
    w.add_u32(key, uint32_t(v));
  };
  put_u32("llama.context_length", m.max_context);
  put_u32("llama.embedding_length", m.hidden);
  put_u32("llama.block_count", m.layers);
  put_u32("llama.feed_forward_length", m.is_moe() ? m.moe->expert_ffn : m.ffn);
  put_u32("llama.attention.head_count", m.heads);
  put_u32("llama.attention.head_count_kv", m.kv_heads);
  w.add_f32("llama.rope.freq_base", float(m.rope_theta));
  w.add_f32("llama.attention.layer_norm_rms_epsilon", float(m.norm_eps));
  put_u32("llama.rope.dimension_count", m.head_dim);
  // RoPE scaling as llama.cpp reads it: linear by metadata, anything else (llama3,
  // per-dimension factors) as the rope_freqs.weight divisors its converter writes.
  if (m.rope_scaling && m.rope_scaling->type == "linear") {
    w.add_string("llama.rope.scaling.type", "linear");
    w.add_f32("llama.rope.scaling.factor", float(m.rope_scaling->factor));
  } else if (m.rope_scaling) {
    std::vector<double> div = rope_divisors(*m.rope_scaling, m.rope_theta, m.head_dim);
    w.add_tensor("rope_freqs.weight", {int64_t(div.size())}, 0, [div](uint8_t* out) {
      for (size_t i = 0; i < div.size(); ++i) {
        float v = float(div[i]);
        std::memcpy(out + 4 * i, &v, 4);
      }
    });
  }
  if (m.head_dim * m.heads != m.hidden) {
    put_u32("llama.attention.key_length", m.head_dim);
    put_u32("llama.attention.value_length", m.head_dim);
  }
  put_u32("llama.vocab_size", m.vocab);
  if (m.is_moe()) {
    put_u32("llama.expert_count", m.moe->experts);
    put_u32("llama.expert_used_count", m.moe->top_k);
    put_u32("llama.expert_feed_forward_length", m.moe->expert_ffn);
  }
  // Without a vocabulary, llama.cpp's marker for a model that has none, so that it (and
  // other GGUF tools) still load the file and run it on token ids.
  if (vocabulary) gguf::add_vocab(w, gguf::synthetic_vocab(m.vocab));
  else w.add_string("tokenizer.ggml.model", "no_vocab");

  for (const gguf::WeightInfo& info : gguf::model_weights(m)) {
    Format fmt = gguf_tensor_format(info.name, info.shape, matrices);
    uint32_t t = *gguf::ggml_type_of(fmt);
    int64_t K = info.shape.back();
    if (fmt.group > 0 && K % fmt.group != 0)
      throw Error("--weights " + format_name(matrices) + ": " + info.name +
                  " has a reduction length of " + std::to_string(K) + ", not a multiple of " +
                  std::to_string(fmt.group));
    std::vector<int64_t> ne(info.shape.rbegin(), info.shape.rend());
    w.add_tensor(gguf::gguf_name(info.name), ne, t, [&source, info, fmt, t](uint8_t* out) {
      int64_t K = info.shape.back(), rows = 1;
      for (size_t i = 0; i + 1 < info.shape.size(); ++i) rows *= info.shape[i];
      std::vector<float> values(size_t(rows * K));
      source(info.name, info.shape, values.data());
      if (t == 0 || t == 1 || t == 30) {
        pack_rows(values.data(), rows, K, fmt, out, nullptr);
        return;
      }
      std::vector<uint8_t> payload(packed_bytes(fmt, rows, K));
      std::vector<uint16_t> scales(scale_count(fmt, rows, K));
      pack_rows(values.data(), rows, K, fmt, payload.data(), scales.data());
      const int64_t blocks = rows * K / 32, qbytes = t == 8 ? 32 : 16;
      for (int64_t b = 0; b < blocks; ++b) {
        uint8_t* blk = out + b * (2 + qbytes);
        std::memcpy(blk, &scales[size_t(b)], 2);
        std::memcpy(blk + 2, payload.data() + b * qbytes, size_t(qbytes));
      }
    });
  }
  w.write(path);
  return {w.tensor_count(), w.tensor_bytes_total()};
}

}  // namespace lathe
