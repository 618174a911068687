#include "cache/partial_metadata.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/api/json.h"
#include "common/api/protowire.h"
#include "common/strings.h"

namespace kf {
namespace {

// The value of the object's top-level "metadata" member: the first such member (Go writes the
// TypeMeta's two strings before it, and a quote inside a string is escaped), to its matching
// brace.
bool MetadataValue(std::string_view json, std::string_view* out) {
  constexpr std::string_view kKey = "\"metadata\":{";
  const size_t at = json.find(kKey);
  if (at == std::string_view::npos) return false;
  const size_t begin = at + kKey.size() - 1;
  const size_t end = JsonValueEnd(json, begin);
  if (end == std::string_view::npos) return false;
  *out = json.substr(begin, end - begin);
  return true;
}

}  // namespace

absl::StatusOr<std::string> PartialMetadataJson(std::string_view object) {
  std::string_view meta;
  if (!MetadataValue(object, &meta)) return absl::InvalidArgumentError("object has no metadata");
  return absl::StrCat("{\"kind\":\"", ToAbsl(kPartialMetadataKind), "\",\"apiVersion\":\"",
                      ToAbsl(kPartialMetadataApiVersion), "\",\"metadata\":", ToAbsl(meta), "}");
}

absl::StatusOr<std::string> PartialMetadataProto(std::string_view message) {
  std::string_view meta;
  if (!FindBytesField(message, 1, &meta)) return absl::InvalidArgumentError("no metadata");
  std::string out;
  AppendBytesField(&out, 1, meta);
  return out;
}

}  // namespace kf
