// libFuzzer target over the GGUF reader: any bytes must either parse (header, model
// metadata, vocabulary, every tensor dequantized) or raise lathe::Error; crashes,
// hangs, huge allocations and sanitizer reports are bugs.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "checkpoint/gguf_file.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/tokenizer.h"
#include "ir/assert.h"
#include "runtime/gguf_weights.h"

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
    for (const lathe::gguf::TensorInfo& t : f->tensors()) {
      if (t.elements() > (int64_t(1) << 20)) continue;
      std::vector<float> out(size_t(t.elements()));
      try {
        lathe::gguf_dequantize(*f, t, out.data());
      } catch (const lathe::Error&) {
      }
    }
  } catch (const lathe::Error&) {
  }
  return 0;
}
