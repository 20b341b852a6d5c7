// Golden-file comparison with an update mode (LATHE_UPDATE_GOLDEN=1) and a readable
// diff on failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace lathe::testing {

inline std::string golden_path(const std::string& rel) { return std::string(LATHE_SOURCE_DIR) + "/tests/golden/" + rel; }

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline bool updating_golden() {
  const char* v = std::getenv("LATHE_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

// First differing lines with context, for failure messages.
inline std::string first_diff(const std::string& want, const std::string& got) {
  auto lines = [](const std::string& s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  };
  auto a = lines(want), b = lines(got);
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  std::string out = "first difference at line " + std::to_string(i + 1) + ":\n";
  for (size_t k = i; k < i + 3 && k < std::max(a.size(), b.size()); ++k) {
    if (k < a.size()) out += "- " + a[k] + "\n";
    if (k < b.size()) out += "+ " + b[k] + "\n";
  }
  return out;
}

// Compares `got` with the golden file (or rewrites it in update mode).
inline void expect_golden(const std::string& rel, const std::string& got) {
  std::string path = golden_path(rel);
  if (updating_golden()) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << got;
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " missing; run with LATHE_UPDATE_GOLDEN=1 to create it";
  std::string want = read_text(path);
  EXPECT_TRUE(want == got) << rel << " differs from the golden file (LATHE_UPDATE_GOLDEN=1 rewrites it)\n"
                           << first_diff(want, got);
}

}  // namespace lathe::testing
