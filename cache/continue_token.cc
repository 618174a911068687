#include "cache/continue_token.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "rapidjson/document.h"

namespace kf {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  uint32_t min = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

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

std::string GoJsonString(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '<':
        case '>':
        case '&':
          out += absl::StrCat("\\u00", std::string(1, kHex[c >> 4]), std::string(1, kHex[c & 15]));
          break;
        default:
          if (c < 0x20) {
            out += absl::StrCat("\\u00", std::string(1, kHex[c >> 4]),
                                std::string(1, kHex[c & 15]));
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    const size_t n = Utf8Length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    const std::string_view seq = s.substr(i, n);
    if (seq == "\xE2\x80\xA8") {
      out += "\\u2028";
    } else if (seq == "\xE2\x80\xA9") {
      out += "\\u2029";
    } else {
      out.append(seq);
    }
    i += n;
  }
  out += "\"";
  return out;
}

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
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
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
    key.assign(start->value.GetString(), start->value.GetStringLength());
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
