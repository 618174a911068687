#include "cache/continue_token.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/api/go_text.h"
#include "common/api/json.h"
#include "common/strings.h"

namespace kf {
namespace {

// path.Clean(key) == key, for a key starting with "/".
bool IsClean(std::string_view key) {
  if (key == "/") return true;
  if (key.size() > 1 && key.back() == '/') return false;
  for (absl::string_view part : absl::StrSplit(ToAbsl(key.substr(1)), '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

}  // namespace

std::string EncodeContinue(std::string_view start, int64_t resource_version) {
  const std::string json =
      absl::StrCat("{\"v\":\"meta.k8s.io/v1\",\"rv\":", resource_version,
                   ",\"start\":", GoJsonString(absl::StrCat("/", ToAbsl(start))), "}");
  std::string out;
  absl::WebSafeBase64Escape(json, &out);  // No padding, as base64.RawURLEncoding.
  return out;
}

absl::StatusOr<ContinueToken> DecodeContinue(std::string_view token) {
  std::string json;
  if (token.find('=') != std::string_view::npos ||
      !absl::WebSafeBase64Unescape(ToAbsl(token), &json)) {
    return absl::InvalidArgumentError("continue key is not valid");
  }
  // Untrusted: decoded before any access check. Bounded and iterative, as every parse of
  // client bytes (common/api/json.h); Go's decoder fails on the same depth.
  rapidjson::Document doc;
  if (!ParseJson(json, doc).ok() || !doc.IsObject()) {
    return absl::InvalidArgumentError("continue key is not valid");
  }
  auto v = doc.FindMember("v");
  auto rv = doc.FindMember("rv");
  auto start = doc.FindMember("start");
  const std::string version = v != doc.MemberEnd() && v->value.IsString()
                                  ? std::string(v->value.GetString(), v->value.GetStringLength())
                                  : "";
  if (version != "meta.k8s.io/v1") {
    return absl::InvalidArgumentError(
        "continue key is not valid: server does not recognize this encoded version");
  }
  ContinueToken t;
  if (rv != doc.MemberEnd()) {
    if (!rv->value.IsInt64()) return absl::InvalidArgumentError("continue key is not valid");
    t.resource_version = rv->value.GetInt64();
  }
  if (t.resource_version == 0) {
    return absl::InvalidArgumentError(
        "continue key is not valid: incorrect encoded start resourceVersion (version "
        "meta.k8s.io/v1)");
  }
  std::string key;
  if (start != doc.MemberEnd()) {
    if (!start->value.IsString()) return absl::InvalidArgumentError("continue key is not valid");
    // encoding/json decodes invalid UTF-8 as U+FFFD (and EncodeContinue writes it so).
    key = ValidUtf8(std::string_view(start->value.GetString(), start->value.GetStringLength()));
  }
  if (key.empty()) {
    return absl::InvalidArgumentError(
        "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)");
  }
  if (key[0] != '/') key.insert(key.begin(), '/');
  if (!IsClean(key)) return absl::InvalidArgumentError("continue key is not valid");
  t.start = key.substr(1);
  return t;
}

}  // namespace kf
