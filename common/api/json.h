// JSON at the edge of trust: one bounded parse for every document kube-fanout reads off the
// network or from a file, and Go's string encoding for every JSON string kube-fanout writes
// itself (so hand-built bodies are byte-identical to the apiserver's and nothing a client sends
// can break out of a string).
//
// ParseJson never recurses (RapidJSON's iterative parser) and refuses documents past a size or
// nesting limit before building anything; Go's encoding/json refuses nesting past 10,000, so
// that is the default. Free functions; thread-safe.
#ifndef KUBE_FANOUT_COMMON_API_JSON_H_
#define KUBE_FANOUT_COMMON_API_JSON_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "rapidjson/document.h"
#include "rapidjson/reader.h"

namespace kf {

struct JsonLimits {
  size_t max_bytes = 64u << 20;
  // encoding/json's maxNestingDepth: deeper documents are errors in the apiserver too.
  size_t max_depth = 10000;
};

// The RapidJSON flags every parse of untrusted bytes uses: no recursion.
inline constexpr unsigned kJsonParseFlags = rapidjson::kParseIterativeFlag;

// Nesting depth of the JSON text `json` (objects and arrays; strings skipped), stopping early
// once it exceeds `limit`. Does not validate.
size_t JsonDepth(std::string_view json, size_t limit);

// The end (one past the closing brace or bracket) of the object or array that starts at `begin`
// in JSON text, strings skipped; npos when it does not close. Does not validate.
size_t JsonValueEnd(std::string_view json, size_t begin);

// Parses `json` into `doc`. InvalidArgument when it is too large, too deep or not JSON.
absl::Status ParseJson(std::string_view json, rapidjson::Document& doc, JsonLimits limits = {});

// Go's encoding/json string encoding (quotes included): escapes ", \, control characters,
// <, >, &, U+2028 and U+2029; invalid UTF-8 becomes U+FFFD.
std::string GoJsonString(std::string_view s);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_JSON_H_
