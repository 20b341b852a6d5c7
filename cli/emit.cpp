#include "cli/emit.h"

#include "ir/assert.h"

namespace lathe::cli {

void add_emitted_kernels(const Plan& plan, const std::string& backend, std::map<std::string, std::string>& files) {
  (void)plan;
  (void)files;
  throw Error("--emit " + backend + ": kernel emitters are not part of this build yet");
}

}  // namespace lathe::cli
