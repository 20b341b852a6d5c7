// The spec library compiled into the binary (generated from specs/ at build time).
#pragma once

#include <span>

namespace lathe {

struct EmbeddedSpec {
  const char* path;  // relative to specs/, e.g. "models/llama-3-8b.toml"
  const char* text;
};

std::span<const EmbeddedSpec> embedded_specs();

}  // namespace lathe
