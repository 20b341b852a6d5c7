// libFuzzer target over the Hugging Face checkpoint readers: the safetensors header
// and data (every tensor is converted to f32) and config.json import. Any input must
// either load or raise lathe::Error; crashes, hangs and sanitizer reports are bugs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/hf_config.h"
#include "frontend/specs.h"
#include "ir/assert.h"
#include "runtime/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the reader so one corpus covers both.
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      auto f = lathe::SafetensorsFile::from_bytes(bytes, "fuzz.safetensors");
      for (const auto& [name, t] : f->tensors()) {
        if (t.elements() > (int64_t(1) << 20)) continue;
        std::vector<float> out(size_t(t.elements()));
        try {
          f->read_f32(name, 0, t.elements(), out.data());
        } catch (const lathe::Error&) {
        }
      }
    } else {
      lathe::HfConfig c = lathe::parse_hf_config(bytes, "config.json");
      std::string toml = lathe::hf_model_to_toml(c);
      try {
        lathe::parse_model_toml(toml, "model.toml");
      } catch (const lathe::Error&) {
        __builtin_trap();  // an accepted config must give a TOML that reads back
      }
    }
  } catch (const lathe::Error&) {
  }
  return 0;
}
