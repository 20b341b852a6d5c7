// Reading JSON fields strictly, naming the field in errors: nlohmann's own type errors
// say only "type must be number, but is string", and get<int64_t>() reads 1.5 as 1
// and 2^63 as a negative. Header-only: included by the files that read JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ir/assert.h"

namespace lathe {

// Parses JSON text as nlohmann::json::parse does (its parse_error for malformed text),
// and throws "SOURCE: key "K" appears twice in one object" for a repeated key, which
// nlohmann reads as the last value without a word (a config.json with two hidden_size
// entries took the second; TOML and GGUF files with a repeated key are errors).
template <class It>
nlohmann::json parse_json_unique_keys(It begin, It end, const std::string& source) {
  std::vector<std::set<std::string>> keys;  // per open object
  std::string twice;
  auto seen = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start) {
      keys.emplace_back();
    } else if (ev == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == E::key && !keys.empty() && twice.empty() && parsed.is_string() &&
               !keys.back().insert(parsed.get<std::string>()).second) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(begin, end, seen);
  if (!twice.empty()) throw Error(source + ": key \"" + twice + "\" appears twice in one object");
  return j;
}

// j[key], or "WHAT: missing" when j is not an object or lacks it.
inline const nlohmann::json& json_field(const nlohmann::json& j, const char* key, const std::string& what) {
  if (!j.is_object() || !j.contains(key)) throw Error(what + ": missing");
  return j[key];
}

// A JSON integer as written: 1.5, 1e300 or 2^63 is an error, not 1, 0 or a negative.
inline int64_t json_integer(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    throw Error(what + ": " + v.dump() + " is not an integer");
  return v.get<int64_t>();
}

inline double json_number(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number()) throw Error(what + ": " + v.dump() + " is not a number");
  return v.get<double>();
}

inline std::string json_string(const nlohmann::json& v, const std::string& what) {
  if (!v.is_string()) throw Error(what + ": " + v.dump() + " is not a string");
  return v.get<std::string>();
}

inline bool json_bool(const nlohmann::json& v, const std::string& what) {
  if (!v.is_boolean()) throw Error(what + ": " + v.dump() + " is not true or false");
  return v.get<bool>();
}

// j[key] read by type: "WHAT: missing" or "WHAT: <value> is not a ...".
inline std::string json_string_at(const nlohmann::json& j, const char* key, const std::string& what) {
  return json_string(json_field(j, key, what), what);
}
inline double json_number_at(const nlohmann::json& j, const char* key, const std::string& what) {
  return json_number(json_field(j, key, what), what);
}
inline int64_t json_integer_at(const nlohmann::json& j, const char* key, const std::string& what) {
  return json_integer(json_field(j, key, what), what);
}
inline bool json_bool_at(const nlohmann::json& j, const char* key, const std::string& what) {
  return json_bool(json_field(j, key, what), what);
}

}  // namespace lathe
