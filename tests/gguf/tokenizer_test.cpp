// GGUF vocabularies: the SentencePiece (llama) and byte-level BPE (gpt2) tokenizers.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <unistd.h>

#include "checkpoint/gguf_file.h"
#include "checkpoint/tokenizer.h"
#include "ir/assert.h"

namespace lathe::gguf {
namespace {

int32_t id_of(const Vocab& v, const std::string& s) {
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == s) return int32_t(i);
  return -1;
}

TEST(Tokenizer, SyntheticVocabularyIsWellFormed) {
  Vocab v = synthetic_vocab(512);
  ASSERT_EQ(v.tokens.size(), 512u);
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_EQ(v.tokens[258], "<0xFF>");
  EXPECT_EQ(v.types[10], kByte);
  std::set<std::string> seen(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(seen.size(), v.tokens.size()) << "duplicate tokens";
  EXPECT_EQ(synthetic_vocab(32000).tokens.size(), 32000u);
  EXPECT_THROW(synthetic_vocab(100), Error);
}

TEST(Tokenizer, SpmMergesByScoreWithSpacePrefixAndByteFallback) {
  Vocab v = synthetic_vocab(512);
  Tokenizer t(v);
  const std::string sp = "\xE2\x96\x81";
  EXPECT_EQ(t.encode("hi", false), (std::vector<int32_t>{id_of(v, sp + "h"), id_of(v, "i")}));
  EXPECT_EQ(t.encode("hi", true).front(), 1);
  // é is two bytes that are not tokens: <0xC3> <0xA9>.
  std::vector<int32_t> e = t.encode("\xC3\xA9", false);
  EXPECT_EQ(e, (std::vector<int32_t>{id_of(v, sp), 3 + 0xC3, 3 + 0xA9}));
  for (std::string s : {"hello world", "A b  c!", "\xC3\xA9t\xC3\xA9 ok", "x\ny"})
    EXPECT_EQ(t.decode(t.encode(s, true)), " " + s) << s;
}

TEST(Tokenizer, BpeMergesByRank) {
  Vocab v;
  v.model = "gpt2";
  v.add_space_prefix = false;
  v.add_bos = false;
  v.tokens = {"h",         "e",  "l",           "o",  "\xC4\xA0",      "w",
              "r",         "d",  "he",          "ll", "llo",           "hello",
              "\xC4\xA0w", "or", "\xC4\xA0wor", "ld", "\xC4\xA0world", "!"};
  v.types.assign(v.tokens.size(), kNormal);
  v.merges = {"h e", "l l",          "ll o", "he llo",        "\xC4\xA0 w",
              "o r", "\xC4\xA0w or", "l d",  "\xC4\xA0wor ld"};
  Tokenizer t(v);
  EXPECT_EQ(t.encode("hello world", false), (std::vector<int32_t>{11, 16}));
  EXPECT_EQ(t.encode("hello world!", false), (std::vector<int32_t>{11, 16, 17}));
  EXPECT_EQ(t.encode("hold", false), (std::vector<int32_t>{0, 3, 15}));
  EXPECT_EQ(t.decode({11, 16, 17}), "hello world!");
}

// A gpt2 merge that is not two symbols and one space never matched a pair: the file
// loaded and the merge was silently dead.
TEST(Tokenizer, MalformedBpeMergeIsAnError) {
  const std::string path = ::testing::TempDir() + "/lathe-bad-merges-" + std::to_string(::getpid()) + ".gguf";
  for (const std::string bad : {"he", " h", "h ", "", " "}) {
    Writer w;
    w.add_string("general.architecture", "llama");
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_strings("tokenizer.ggml.tokens", {"h", "e", "he"});
    w.add_strings("tokenizer.ggml.merges", {"h e", bad});
    w.write(path);
    auto f = File::open(path);
    try {
      (void)read_vocab(*f);
      ADD_FAILURE() << "merge '" << bad << "' accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("entry 1 '" + bad + "' is not two symbols separated by a space"),
                std::string::npos)
          << e.what();
    }
  }
  Writer w;  // well-formed pairs load, split as llama.cpp splits them (at the first space after the first byte)
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_strings("tokenizer.ggml.tokens", {"h", "e", "he"});
  w.add_strings("tokenizer.ggml.merges", {"h e", "h  e", "  e"});
  w.write(path);
  EXPECT_EQ(read_vocab(*File::open(path)).merges.size(), 3u);
  std::remove(path.c_str());
}

// Expected ids from llama.cpp's tokenizer (bench/gguf_parity.py writes the fixture).
TEST(Tokenizer, MatchesLlamaCppFixture) {
  std::ifstream in(std::string(LATHE_SOURCE_DIR) + "/tests/gguf/fixtures/tokenize.txt");
  if (!in) GTEST_SKIP() << "no fixture";
  // Lines: vocab-file TAB text (C-escaped) TAB ids (comma separated)
  std::map<std::string, std::unique_ptr<Tokenizer>> toks;
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string file, text, ids;
    std::getline(ls, file, '\t');
    std::getline(ls, text, '\t');
    std::getline(ls, ids, '\t');
    std::string unescaped;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] == 'x') {
        unescaped += char(std::stoi(text.substr(i + 2, 2), nullptr, 16));
        i += 3;
      } else {
        unescaped += text[i];
      }
    }
    if (!toks.count(file)) {
      auto f = File::open(std::string(LATHE_SOURCE_DIR) + "/tests/gguf/fixtures/" + file);
      toks[file] = std::make_unique<Tokenizer>(read_vocab(*f));
    }
    std::vector<int32_t> want;
    std::istringstream is(ids);
    for (std::string x; std::getline(is, x, ',');)
      if (!x.empty()) want.push_back(std::stoi(x));
    EXPECT_EQ(toks[file]->encode(unescaped, false), want) << file << ": '" << text << "'";
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace lathe::gguf
