#include "ir/assert.h"

#include <cstdio>
#include <cstdlib>

namespace lathe {

std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 || c == '\n' || c == '\t') {
      out += char(c);
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
  return out;
}

std::string json_error_text(const std::string& what) {
  const size_t end = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? what.substr(end + 2) : what;
}

void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "lathe: internal error at %s:%d: %s (%s)\n", file, line, msg.c_str(), cond);
  std::fflush(stderr);
  std::abort();
}

}  // namespace lathe
