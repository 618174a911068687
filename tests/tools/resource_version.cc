#include "tests/tools/resource_version.h"

#include "rapidjson/document.h"

namespace kf::tools {

std::optional<uint64_t> ParseResourceVersion(std::string_view s) {
  // At most 19 digits always fit in uint64_t; "0" is the only one that starts with a zero.
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s.front() == '0')) return std::nullopt;
  uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::optional<uint64_t> ObjectResourceVersion(std::string_view body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;
  auto meta = doc.FindMember("metadata");
  if (meta == doc.MemberEnd() || !meta->value.IsObject()) return std::nullopt;
  auto rv = meta->value.FindMember("resourceVersion");
  if (rv == meta->value.MemberEnd() || !rv->value.IsString()) return std::nullopt;
  return ParseResourceVersion(std::string_view(rv->value.GetString(), rv->value.GetStringLength()));
}

}  // namespace kf::tools
