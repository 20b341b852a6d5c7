#include "checkpoint/tokenizer.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <queue>

#include "ir/assert.h"

namespace lathe::gguf {

namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581 "▁"

size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;  // a stray continuation byte stands alone
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80)
    s += char(cp);
  else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

std::vector<std::string> split_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = std::min(utf8_len(static_cast<unsigned char>(s[i])), s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// GPT-2's byte-to-unicode table: printable bytes map to themselves, the others to
// U+0100 onwards.
const std::vector<std::string>& byte_to_unicode() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[size_t(b)] = utf8_encode(keep ? uint32_t(b) : uint32_t(256 + n++));
    }
    return t;
  }();
  return table;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size())
    s.replace(p, from.size(), to);
  return s;
}

bool is_letter(unsigned char c) {
  return std::isalpha(c) || c >= 0x80;
}
bool is_digit(unsigned char c) {
  return c >= '0' && c <= '9';
}
bool is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// GPT-2's pre-tokenizer regex, by hand (see tokenizer.h for the character classes).
std::vector<std::string> pretokenize_gpt2(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0, n = s.size();
  auto u = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  while (i < n) {
    if (s[i] == '\'') {
      bool matched = false;
      for (const char* c : {"s", "t", "re", "ve", "m", "ll", "d"}) {
        size_t len = std::strlen(c);
        if (s.compare(i + 1, len, c) == 0) {
          out.push_back(s.substr(i, len + 1));
          i += len + 1;
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    size_t j = i + (s[i] == ' ' && i + 1 < n && !is_space(u(i + 1)) ? 1 : 0);
    if (is_letter(u(j))) {
      while (j < n && is_letter(u(j))) ++j;
    } else if (is_digit(u(j))) {
      while (j < n && is_digit(u(j))) ++j;
    } else if (!is_space(u(j))) {
      while (j < n && !is_space(u(j)) && !is_letter(u(j)) && !is_digit(u(j))) ++j;
    } else {
      // whitespace: \s+(?!\S) leaves the last space to the next word; \s+ otherwise
      while (j < n && is_space(u(j))) ++j;
      if (j < n && j - i > 1) --j;
    }
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Llama-3's pre-tokenizer regex, by hand, with the same character classes:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
std::vector<std::string> pretokenize_llama3(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0, n = s.size();
  auto u = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto newline = [&](size_t k) { return s[k] == '\r' || s[k] == '\n'; };
  auto punct = [&](size_t k) { return !is_space(u(k)) && !is_letter(u(k)) && !is_digit(u(k)); };
  while (i < n) {
    if (s[i] == '\'') {
      size_t len = 0;
      for (const char* c : {"s", "t", "re", "ve", "m", "ll", "d"}) {
        size_t l = std::strlen(c);
        bool ok = i + 1 + l <= n;
        for (size_t k = 0; ok && k < l; ++k) ok = std::tolower(u(i + 1 + k)) == c[k];
        if (ok) {
          len = l + 1;
          break;
        }
      }
      if (len) {
        out.push_back(s.substr(i, len));
        i += len;
        continue;
      }
    }
    size_t j = i;
    if (!is_letter(u(i)) && !is_digit(u(i)) && !newline(i) && i + 1 < n && is_letter(u(i + 1)))
      j = i + 1;
    if (is_letter(u(j))) {
      while (j < n && is_letter(u(j))) ++j;
    } else if (is_digit(u(i))) {
      j = i;
      while (j < n && j - i < 3 && is_digit(u(j))) ++j;
    } else if ((punct(i)) || (s[i] == ' ' && i + 1 < n && punct(i + 1))) {
      j = i + (s[i] == ' ' ? 1 : 0);
      while (j < n && punct(j)) ++j;
      while (j < n && newline(j)) ++j;
    } else {
      size_t k = i;
      while (k < n && is_space(u(k))) ++k;
      size_t last_nl = n;
      for (size_t p = i; p < k; ++p)
        if (newline(p)) last_nl = p;
      if (last_nl != n)
        j = last_nl + 1;  // \s*[\r\n]+
      else if (k == n || k - i == 1)
        j = k;  // \s+(?!\S) at the end, or \s+
      else
        j = k - 1;  // \s+(?!\S): the last space stays
    }
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

Vocab synthetic_vocab(int64_t size) {
  if (size < 262)
    throw Error(
        "a synthetic vocabulary needs at least 262 tokens (3 special + 256 bytes + 3); got " +
        std::to_string(size));
  Vocab v;
  auto add = [&](const std::string& t, int32_t type) {
    v.tokens.push_back(t);
    v.scores.push_back(type == kNormal ? -float(v.tokens.size()) : 0.0f);
    v.types.push_back(type);
  };
  add("<unk>", kUnknown);
  add("<s>", kControl);
  add("</s>", kControl);
  v.unk = 0, v.bos = 1, v.eos = 2;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, kByte);
  }
  // Normal pieces, each the concatenation of two earlier ones: "▁", printable ASCII,
  // "▁" + letter, then letter strings of growing length with and without "▁".
  std::vector<std::string> pieces = {kSpace};
  for (char c = 33; c < 127; ++c) pieces.push_back(std::string(1, c));
  std::vector<std::string> level;
  for (char c = 'a'; c <= 'z'; ++c) level.push_back(std::string(1, c));
  for (const std::string& l : level) pieces.push_back(kSpace + l);
  while (int64_t(v.tokens.size() + pieces.size()) < size) {
    std::vector<std::string> next;
    for (const std::string& l : level)
      for (char c : std::string("etaoinshrdlucmfwypvbgkjqxz")) next.push_back(l + c);
    for (const std::string& l : next) {
      pieces.push_back(l);
      pieces.push_back(kSpace + l);
    }
    level = std::move(next);
  }
  for (const std::string& p : pieces) {
    if (int64_t(v.tokens.size()) >= size) break;
    add(p, kNormal);
  }
  return v;
}

void add_vocab(Writer& w, const Vocab& v) {
  w.add_string("tokenizer.ggml.model", v.model);
  w.add_strings("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty())
    w.add_numbers("tokenizer.ggml.scores", ValueType::f32, {v.scores.begin(), v.scores.end()});
  w.add_numbers("tokenizer.ggml.token_type", ValueType::i32, {v.types.begin(), v.types.end()});
  if (!v.merges.empty()) w.add_strings("tokenizer.ggml.merges", v.merges);
  if (v.bos >= 0) w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(v.bos));
  if (v.eos >= 0) w.add_u32("tokenizer.ggml.eos_token_id", uint32_t(v.eos));
  if (v.unk >= 0) w.add_u32("tokenizer.ggml.unknown_token_id", uint32_t(v.unk));
  w.add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
  if (v.model == "llama") w.add_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
}

bool has_vocab(const File& f) {
  std::optional<std::string> m = f.get_string_opt("tokenizer.ggml.model");
  return m && *m != "no_vocab" && *m != "none";
}

Vocab read_vocab(const File& f) {
  Vocab v;
  v.model = f.get_string("tokenizer.ggml.model");
  if (v.model != "llama" && v.model != "gpt2")
    throw Error(f.path() + ": key 'tokenizer.ggml.model': '" + v.model +
                "' is not supported (lathe tokenizes 'llama' SentencePiece and 'gpt2' byte-level "
                "BPE vocabularies)");
  v.tokens = f.get_array("tokenizer.ggml.tokens", ValueType::string).strings;
  size_t n = v.tokens.size();
  if (const Value* s = f.get("tokenizer.ggml.scores")) {
    const Value& a = f.get_array("tokenizer.ggml.scores", ValueType::f32);
    if (a.size() != n)
      throw Error(f.path() + ": key 'tokenizer.ggml.scores' has " + std::to_string(a.size()) +
                  " entries for " + std::to_string(n) + " tokens");
    v.scores.assign(s->numbers.begin(), s->numbers.end());
  } else {
    v.scores.assign(n, 0.0f);
  }
  if (f.get("tokenizer.ggml.token_type")) {
    const Value& a = f.get_array("tokenizer.ggml.token_type", ValueType::i32);
    if (a.size() != n)
      throw Error(f.path() + ": key 'tokenizer.ggml.token_type' has " + std::to_string(a.size()) +
                  " entries for " + std::to_string(n) + " tokens");
    v.types.assign(a.numbers.begin(), a.numbers.end());
  } else {
    v.types.assign(n, kNormal);
  }
  if (v.model == "gpt2") {
    v.merges = f.get_array("tokenizer.ggml.merges", ValueType::string).strings;
    // Each merge is two non-empty symbols split at the first space after the first byte
    // (llama.cpp's rule: "Ġ t"); one without that shape never matched a pair, so the
    // merge was silently dead.
    for (size_t i = 0; i < v.merges.size(); ++i) {
      const std::string& m = v.merges[i];
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size())
        throw Error(f.path() + ": key 'tokenizer.ggml.merges': entry " + std::to_string(i) + " '" + printable(m) +
                    "' is not two symbols separated by a space");
    }
    std::string pre = f.get_string_opt("tokenizer.ggml.pre").value_or("gpt2");
    v.pre = (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") ? "llama3" : "gpt2";
    v.add_space_prefix = false;
    v.add_bos = false;
  }
  auto id = [&](const std::string& key, int32_t def) {
    auto i = f.get_int_opt(key);
    if (!i) return def;
    if (*i < 0 || *i >= int64_t(n))
      throw Error(f.path() + ": key '" + key + "': token id " + std::to_string(*i) +
                  " is outside the vocabulary (" + std::to_string(n) + ")");
    return int32_t(*i);
  };
  v.bos = id("tokenizer.ggml.bos_token_id", -1);
  v.eos = id("tokenizer.ggml.eos_token_id", -1);
  v.unk = id("tokenizer.ggml.unknown_token_id", -1);
  auto flag = [&](const std::string& key, bool def) {
    const Value* x = f.get(key);
    if (!x) return def;
    if (x->type != ValueType::boolean)
      throw Error(f.path() + ": key '" + key + "': expected a bool");
    return x->number != 0;
  };
  v.add_bos = flag("tokenizer.ggml.add_bos_token", v.model == "llama");
  v.add_space_prefix = flag("tokenizer.ggml.add_space_prefix", v.model == "llama");
  return v;
}

Tokenizer::Tokenizer(Vocab v) : v_(std::move(v)) {
  for (size_t i = 0; i < v_.tokens.size(); ++i) ids_.emplace(v_.tokens[i], int32_t(i));
  for (size_t i = 0; i < v_.merges.size(); ++i) ranks_.emplace(v_.merges[i], int32_t(i));
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    byte_ids_[b] = v_.model == "gpt2" ? find(byte_to_unicode()[size_t(b)]) : find(buf);
  }
}

int32_t Tokenizer::find(const std::string& s) const {
  auto it = ids_.find(s);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos && v_.bos >= 0) out.push_back(v_.bos);
  if (text.empty()) return out;
  if (v_.model == "gpt2")
    encode_bpe(text, out);
  else
    encode_spm(text, out);
  return out;
}

void Tokenizer::encode_spm(const std::string& raw, std::vector<int32_t>& out) const {
  std::string text = replace_all((v_.add_space_prefix ? " " : "") + raw, " ", kSpace);
  struct Symbol {
    int prev, next;
    size_t start, len;
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < text.size();) {
    size_t n = std::min(utf8_len(static_cast<unsigned char>(text[i])), text.size() - i);
    sym.push_back({int(sym.size()) - 1, int(sym.size()) + 1, i, n});
    i += n;
  }
  sym.back().next = -1;
  struct Bigram {
    int left, right;
    float score;
    size_t len;
    bool operator<(const Bigram& o) const {
      return score < o.score || (score == o.score && left > o.left);
    }
  };
  std::priority_queue<Bigram> queue;
  std::map<std::string, std::pair<int, int>> rev_merge;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    std::string s = text.substr(sym[size_t(l)].start, sym[size_t(l)].len + sym[size_t(r)].len);
    int32_t id = find(s);
    if (id < 0) return;
    queue.push({l, r, v_.scores[size_t(id)], s.size()});
    rev_merge[s] = {l, r};
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(int(i) - 1, int(i));
  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol &l = sym[size_t(b.left)], &r = sym[size_t(b.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  std::function<void(int)> resegment = [&](int i) {
    std::string s = text.substr(sym[size_t(i)].start, sym[size_t(i)].len);
    if (int32_t id = find(s); id >= 0) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge.find(s);
    if (it == rev_merge.end()) {
      for (unsigned char c : s)
        out.push_back(byte_ids_[c] >= 0 ? byte_ids_[c] : std::max(v_.unk, 0));
      return;
    }
    resegment(it->second.first);
    resegment(it->second.second);
  };
  for (int i = 0; i != -1; i = sym[size_t(i)].next) resegment(i);
}

void Tokenizer::encode_bpe(const std::string& text, std::vector<int32_t>& out) const {
  const auto& b2u = byte_to_unicode();
  for (const std::string& word :
       v_.pre == "llama3" ? pretokenize_llama3(text) : pretokenize_gpt2(text)) {
    std::vector<std::string> parts;
    for (unsigned char c : word) parts.push_back(b2u[c]);
    // Merge the lowest-ranked adjacent pair (leftmost on ties) until none is ranked.
    while (parts.size() > 1) {
      int best = -1;
      int32_t best_rank = INT32_MAX;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = ranks_.find(parts[i] + " " + parts[i + 1]);
        if (it != ranks_.end() && it->second < best_rank) best_rank = it->second, best = int(i);
      }
      if (best < 0) break;
      parts[size_t(best)] += parts[size_t(best) + 1];
      parts.erase(parts.begin() + best + 1);
    }
    for (const std::string& p : parts) {
      if (int32_t id = find(p); id >= 0) {
        out.push_back(id);
        continue;
      }
      for (const std::string& ch : split_chars(p)) {
        int32_t id = find(ch);
        out.push_back(id >= 0 ? id : std::max(v_.unk, 0));
      }
    }
  }
}

std::string Tokenizer::piece(int32_t id) const {
  if (id < 0 || size_t(id) >= v_.tokens.size()) return "";
  const std::string& t = v_.tokens[size_t(id)];
  int32_t type = v_.types.empty() ? kNormal : v_.types[size_t(id)];
  if (type == kControl || type == kUnused) return "";
  if (v_.model == "gpt2") {
    static const std::unordered_map<std::string, unsigned char> u2b = [] {
      std::unordered_map<std::string, unsigned char> m;
      for (int b = 0; b < 256; ++b) m[byte_to_unicode()[size_t(b)]] = static_cast<unsigned char>(b);
      return m;
    }();
    std::string s;
    for (const std::string& ch : split_chars(t)) {
      auto it = u2b.find(ch);
      s += it == u2b.end() ? ch : std::string(1, char(it->second));
    }
    return s;
  }
  if (type == kByte && t.size() == 6 && t.starts_with("<0x"))
    return std::string(1, char(std::stoi(t.substr(3, 2), nullptr, 16)));
  return replace_all(t, kSpace, " ");
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids) s += piece(id);
  return s;
}

}  // namespace lathe::gguf
