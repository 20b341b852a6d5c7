#include "ir/model.h"

#include <cmath>

namespace lathe {

namespace {
bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.';
}
}  // namespace

std::string name_problem(const std::string& name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > 128) return "is " + std::to_string(name.size()) + " characters long (at most 128)";
  for (char c : name)
    if (!name_char(c)) {
      unsigned char u = static_cast<unsigned char>(c);
      std::string shown = u >= 0x20 && u < 0x7f ? std::string("'") + c + "'" : "byte " + std::to_string(int(u));
      return "contains " + shown + "; use letters, digits, '-', '_' and '.' (names appear in IR text, plan files "
             "and tables)";
    }
  return "";
}

std::string safe_name(std::string name) {
  for (char& c : name)
    if (!name_char(c)) c = '-';
  if (name.size() > 128) name.resize(128);
  return name;
}

int64_t ModelSpec::attention_params_per_layer() const {
  int64_t norm = hidden;
  int64_t qo = 2 * hidden * q_dim();
  int64_t kv = 2 * hidden * kv_dim();
  return norm + qo + kv;
}

int64_t ModelSpec::ffn_params_per_layer() const {
  int64_t norm = hidden;
  if (!is_moe()) return norm + 3 * hidden * ffn;
  int64_t router = hidden * moe->experts;
  return norm + router + moe->experts * 3 * hidden * moe->expert_ffn;
}

int64_t ModelSpec::active_ffn_params_per_layer() const {
  int64_t norm = hidden;
  if (!is_moe()) return norm + 3 * hidden * ffn;
  int64_t router = hidden * moe->experts;
  return norm + router + moe->top_k * 3 * hidden * moe->expert_ffn;
}

std::vector<double> rope_divisors(const RopeScaling& s, double theta, int64_t head_dim) {
  const int64_t n = head_dim / 2;
  if (s.type == "factors") return s.factors;
  std::vector<double> d(size_t(n), s.type == "linear" ? s.factor : 1.0);
  if (s.type != "llama3") return d;
  // transformers' _compute_llama3_parameters, as a divisor of each frequency.
  const double low_wavelen = double(s.original_max_context) / s.low_freq_factor;
  const double high_wavelen = double(s.original_max_context) / s.high_freq_factor;
  for (int64_t i = 0; i < n; ++i) {
    double wavelen = 2.0 * M_PI * std::pow(theta, 2.0 * double(i) / double(head_dim));
    if (wavelen > low_wavelen) {
      d[size_t(i)] = s.factor;
    } else if (wavelen >= high_wavelen) {
      double smooth = (double(s.original_max_context) / wavelen - s.low_freq_factor) /
                      (s.high_freq_factor - s.low_freq_factor);
      d[size_t(i)] = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
  }
  return d;
}

int64_t ModelSpec::param_count() const {
  return embedding_params() + lm_head_params() + hidden /* final norm */ +
         layers * (attention_params_per_layer() + ffn_params_per_layer());
}

int64_t ModelSpec::active_param_count() const {
  return embedding_params() + lm_head_params() + hidden +
         layers * (attention_params_per_layer() + active_ffn_params_per_layer());
}

int64_t ModelSpec::matmul_params_per_token() const {
  int64_t attn = 2 * hidden * q_dim() + 2 * hidden * kv_dim();
  int64_t ffn_mm = is_moe() ? hidden * moe->experts + moe->top_k * 3 * hidden * moe->expert_ffn
                            : 3 * hidden * ffn;
  return layers * (attn + ffn_mm) + vocab * hidden;
}

double ModelSpec::kv_bytes_per_token(double bits_per_element) const {
  return 2.0 * double(layers) * double(kv_dim()) * bits_per_element / 8.0;
}

double ModelSpec::flops_per_token(int64_t context) const {
  double attn = 2.0 * 2.0 * double(context) * double(head_dim) * double(heads) * double(layers);
  return 2.0 * double(matmul_params_per_token()) + attn;
}

}  // namespace lathe
