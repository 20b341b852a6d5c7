// The vocabularies stored in GGUF files and their tokenizers.
//
//  - "llama" (SentencePiece, as llama.cpp's SPM tokenizer): a space is prepended
//    (tokenizer.ggml.add_space_prefix, default true), spaces become U+2581 "▁", the
//    text is split into UTF-8 characters, and the adjacent pair whose concatenation
//    is a token with the highest score is merged until none is left (ties: the
//    leftmost pair). Characters that are not tokens become byte tokens <0xXX>
//    (byte fallback), or <unk> when the vocabulary has none.
//  - "gpt2" (byte-level BPE, as in Llama-3 files): the text is pre-tokenized, each
//    piece's bytes are mapped to characters by GPT-2's byte-to-unicode table, and
//    pairs are merged by rank (tokenizer.ggml.merges, lowest first). The pre-tokenizer
//    is GPT-2's regex ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
//    \s+(?!\S)|\s+), or Llama-3's when tokenizer.ggml.pre is llama-bpe (case-insensitive
//    contractions, one leading non-letter joins a word, digits in groups of up to 3,
//    newlines split apart), both written by hand with simplified classes: letters =
//    ASCII letters and every non-ASCII byte, digits = ASCII digits, whitespace = ASCII.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/gguf_file.h"

namespace lathe::gguf {

enum TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct Vocab {
  std::string model = "llama";  // tokenizer.ggml.model: llama or gpt2
  std::vector<std::string> tokens;
  std::vector<float> scores;        // llama
  std::vector<int32_t> types;       // TokenType per token
  std::vector<std::string> merges;  // gpt2: "a b" in rank order
  std::string pre = "gpt2";  // gpt2 pre-tokenizer: gpt2, or llama3 (tokenizer.ggml.pre llama-bpe)
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_bos = true;
  bool add_space_prefix = true;
};

// A SentencePiece-style vocabulary of `size` tokens: <unk> <s> </s>, the 256 byte
// tokens <0x00>..<0xFF>, then printable ASCII characters, "▁", "▁x" and ever longer
// letter strings, each reachable by merging two earlier tokens (higher score = earlier).
// Needs size >= 262.
Vocab synthetic_vocab(int64_t size);
void add_vocab(Writer& w, const Vocab& v);
// Whether the file has a vocabulary (tokenizer.ggml.model present and not llama.cpp's
// "no_vocab" / "none" marker of a model without one).
bool has_vocab(const File& f);
// The vocabulary of a file (tokenizer.ggml.*); throws lathe::Error naming the key.
Vocab read_vocab(const File& f);

class Tokenizer {
 public:
  explicit Tokenizer(Vocab v);
  const Vocab& vocab() const { return v_; }
  // Token ids of `text`, with BOS first when `add_bos` and the vocabulary has one.
  std::vector<int32_t> encode(const std::string& text, bool add_bos) const;
  // The text of `ids` (control tokens dropped, byte tokens as bytes).
  std::string decode(const std::vector<int32_t>& ids) const;
  // The text of one token as it appears in decoded output.
  std::string piece(int32_t id) const;

 private:
  void encode_spm(const std::string& text, std::vector<int32_t>& out) const;
  void encode_bpe(const std::string& text, std::vector<int32_t>& out) const;
  int32_t find(const std::string& s) const;
  Vocab v_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int32_t> ranks_;  // gpt2 merges
  int32_t byte_ids_[256];
};

}  // namespace lathe::gguf
