#include "common/api/json.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

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

}  // namespace

namespace {

// Calls `bracket(c, i)` for each brace or bracket of `json` from `begin` outside strings, until
// it returns true; returns that position, or npos.
template <typename F>
size_t ScanBrackets(std::string_view json, size_t begin, F bracket) {
  bool in_string = false;
  for (size_t i = begin; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if ((c == '{' || c == '[' || c == '}' || c == ']') && bracket(c, i)) {
      return i;
    }
  }
  return std::string_view::npos;
}

}  // namespace

size_t JsonDepth(std::string_view json, size_t limit) {
  size_t depth = 0, max = 0;
  ScanBrackets(json, 0, [&](char c, size_t) {
    if (c == '{' || c == '[') {
      if (++depth > max) max = depth;
      return max > limit;
    }
    if (depth > 0) --depth;
    return false;
  });
  return max;
}

size_t JsonValueEnd(std::string_view json, size_t begin) {
  size_t depth = 0;
  const size_t close = ScanBrackets(json, begin, [&](char c, size_t) {
    if (c == '{' || c == '[') {
      ++depth;
      return false;
    }
    return depth == 0 || --depth == 0;
  });
  return close == std::string_view::npos ? close : close + 1;
}

absl::Status ParseJson(std::string_view json, rapidjson::Document& doc, JsonLimits limits) {
  if (json.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON document of ", json.size(), " bytes exceeds ", limits.max_bytes));
  }
  if (JsonDepth(json, limits.max_depth) > limits.max_depth) {
    return absl::InvalidArgumentError("exceeded max depth");
  }
  // RapidJSON takes a NUL byte for the end of the input, so "{}\0junk" would pass; JSON text
  // never holds a raw NUL (not whitespace, and escaped in strings).
  if (const size_t nul = json.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON at offset ", nul));
  }
  doc.Parse<kJsonParseFlags>(json.data(), json.size());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON at offset ", doc.GetErrorOffset()));
  }
  return absl::OkStatus();
}

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
            out +=
                absl::StrCat("\\u00", std::string(1, kHex[c >> 4]), std::string(1, kHex[c & 15]));
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

}  // namespace kf
