// libFuzzer target over the GGUF reader: any bytes must either parse (header, model
// metadata, vocabulary and tokenizer) or raise lathe::Error; crashes, hangs, huge
// allocations and sanitizer reports are bugs. Links lathe_checkpoint and lathe_ir only,
// so it builds in a minute (dequantization is covered by tests/gguf).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "checkpoint/gguf_file.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/tokenizer.h"
#include "ir/assert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = lathe::gguf::File::parse(data, size, "fuzz.gguf");
    try {
      lathe::gguf::model_spec(*f);
    } catch (const lathe::Error&) {
    }
    try {
      lathe::gguf::Tokenizer t(lathe::gguf::read_vocab(*f));
      t.decode(t.encode("Hello world, \xC3\xA9t\xC3\xA9 42!", true));
    } catch (const lathe::Error&) {
    }
  } catch (const lathe::Error&) {
  }
  return 0;
}
