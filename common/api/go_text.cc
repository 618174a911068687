#include "common/api/go_text.h"

#include <algorithm>
#include <array>

#include "common/strings.h"

namespace kf {

// --- Go text: unicode/utf8 and strconv.Quote -----------------------------------------------

std::pair<char32_t, size_t> DecodeRune(std::string_view s) {
  constexpr std::pair<char32_t, size_t> kError{0xFFFD, 1};
  const auto b = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = b(0);
  if (b0 < 0x80) return {b0, 1};
  size_t width = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // Accepted range of the second byte.
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    width = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    width = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // Surrogates are not valid runes.
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    width = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return kError;
  }
  if (s.size() < width || b(1) < lo || b(1) > hi) return kError;
  char32_t r = b0 & (0x7F >> width);
  for (size_t i = 1; i < width; ++i) {
    if (b(i) < 0x80 || b(i) > 0xBF) return kError;
    r = (r << 6) | (b(i) & 0x3F);
  }
  return {r, width};
}

void AppendRune(char32_t r, std::string* out) {
  if (r < 0x80) {
    out->push_back(static_cast<char>(r));
  } else if (r < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (r >> 6)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else if (r < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (r >> 12)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (r >> 18)));
    out->push_back(static_cast<char>(0x80 | ((r >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3F)));
  }
}

std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const auto [r, width] = DecodeRune(s);
    if (r == 0xFFFD && width == 1) {
      AppendRune(r, &out);
    } else {
      out.append(s.substr(0, width));
    }
    s.remove_prefix(width);
  }
  return out;
}

absl::Status StatusMessageError(std::string_view message) {
  return absl::InvalidArgumentError(ToAbsl(ValidUtf8(message)));
}

namespace {

// Non-ASCII runes that Go's unicode.IsPrint rejects: controls (Cc), spaces other than U+0020
// (Zs, Zl, Zp), format characters (Cf), private use (Co) and the noncharacters U+FFFE/U+FFFF.
constexpr std::array<std::pair<char32_t, char32_t>, 25> kNonPrintable = {{
    {0x0080, 0x00A0},    {0x00AD, 0x00AD},   {0x0600, 0x0605},   {0x061C, 0x061C},
    {0x06DD, 0x06DD},    {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},
    {0x1680, 0x1680},    {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},
    {0x205F, 0x206F},    {0x3000, 0x3000},   {0xE000, 0xF8FF},   {0xFEFF, 0xFEFF},
    {0xFFF9, 0xFFFB},    {0xFFFE, 0xFFFF},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
    {0x13430, 0x1343F},  {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE007F},
    {0xF0000, 0x10FFFF},
}};

bool IsGoPrintable(char32_t r) {
  if (r < 0x80) return r >= 0x20 && r < 0x7F;
  return std::none_of(kNonPrintable.begin(), kNonPrintable.end(),
                      [r](const auto& range) { return r >= range.first && r <= range.second; });
}

void AppendHex(uint32_t v, int digits, std::string* out) {
  constexpr char kHex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) out->push_back(kHex[(v >> (4 * i)) & 0xF]);
}

void AppendEscapedRune(char32_t r, std::string* out) {
  switch (r) {
    case '\a':
      *out += "\\a";
      return;
    case '\b':
      *out += "\\b";
      return;
    case '\f':
      *out += "\\f";
      return;
    case '\n':
      *out += "\\n";
      return;
    case '\r':
      *out += "\\r";
      return;
    case '\t':
      *out += "\\t";
      return;
    case '\v':
      *out += "\\v";
      return;
    default:
      break;
  }
  if (r < 0x20 || r == 0x7F) {
    *out += "\\x";
    AppendHex(r, 2, out);
  } else if (r < 0x10000) {
    *out += "\\u";
    AppendHex(r, 4, out);
  } else {
    *out += "\\U";
    AppendHex(r, 8, out);
  }
}

}  // namespace

std::string GoQuote(std::string_view s) {
  std::string out = "\"";
  while (!s.empty()) {
    auto [r, width] = DecodeRune(s);
    if (r == 0xFFFD && width == 1) {
      out += "\\x";
      AppendHex(static_cast<unsigned char>(s[0]), 2, &out);
    } else if (r == '"' || r == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(r));
    } else if (IsGoPrintable(r)) {
      out.append(s.substr(0, width));
    } else {
      AppendEscapedRune(r, &out);
    }
    s.remove_prefix(width);
  }
  out.push_back('"');
  return out;
}

}  // namespace kf
