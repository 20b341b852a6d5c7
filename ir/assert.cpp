#include "ir/assert.h"

#include <cstdio>
#include <cstdlib>

namespace lathe {

void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "lathe: internal error at %s:%d: %s (%s)\n", file, line, msg.c_str(), cond);
  std::fflush(stderr);
  std::abort();
}

}  // namespace lathe
