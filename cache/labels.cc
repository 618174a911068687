#include "cache/labels.h"

#include <algorithm>
#include <array>

#include "common/strings.h"

namespace kf {

namespace internal {

SortedStringPairs::SortedStringPairs(std::initializer_list<Pair> pairs)
    : SortedStringPairs(std::vector<Pair>(pairs)) {}

SortedStringPairs::SortedStringPairs(std::vector<Pair> pairs) {
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const Pair& a, const Pair& b) { return a.first < b.first; });
  pairs_.reserve(pairs.size());
  for (Pair& p : pairs) {
    if (!pairs_.empty() && pairs_.back().first == p.first) {
      pairs_.back().second = std::move(p.second);
    } else {
      pairs_.push_back(std::move(p));
    }
  }
}

const std::string* SortedStringPairs::Get(std::string_view key) const {
  auto it = std::lower_bound(pairs_.begin(), pairs_.end(), key,
                             [](const Pair& p, std::string_view k) { return p.first < k; });
  if (it == pairs_.end() || it->first != key) return nullptr;
  return &it->second;
}

}  // namespace internal

namespace {

std::vector<LabelSet::Pair> LabelPairs(const rapidjson::Value& labels) {
  std::vector<LabelSet::Pair> pairs;
  if (!labels.IsObject()) return pairs;
  pairs.reserve(labels.MemberCount());
  for (const auto& m : labels.GetObject()) {
    if (!m.value.IsString()) continue;
    pairs.emplace_back(std::string(m.name.GetString(), m.name.GetStringLength()),
                       std::string(m.value.GetString(), m.value.GetStringLength()));
  }
  return pairs;
}

}  // namespace

LabelSet::LabelSet(const rapidjson::Value& labels) : SortedStringPairs(LabelPairs(labels)) {}

// --- Validation: k8s.io/apimachinery/pkg/api/validate/content/{kube,dns,errors}.go -------------

namespace {

constexpr size_t kLabelKeyNameMaxLength = 63;
constexpr size_t kLabelValueMaxLength = 63;
constexpr size_t kDns1123SubdomainMaxLength = 253;

constexpr std::string_view kLabelKeyFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr std::string_view kLabelKeyErrMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
constexpr std::string_view kLabelValueFmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr std::string_view kLabelValueErrMsg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character";
constexpr std::string_view kDns1123SubdomainFmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr std::string_view kDns1123SubdomainErrMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character";

// content.RegexError. Go's loop appends "', " after each example and " or " before all but the
// first, hence the double space in "'MyName',  or 'my.name'".
std::string RegexError(std::string_view msg, std::string_view re,
                       std::initializer_list<std::string_view> examples) {
  std::string out(msg);
  out += " (e.g. ";
  bool first = true;
  for (std::string_view e : examples) {
    if (!first) out += " or ";
    first = false;
    out.append("'").append(e).append("', ");
  }
  out.append("regex used for validation is '").append(re).append("')");
  return out;
}

std::string MaxLenError(size_t length) {
  return "must be no more than " + std::to_string(length) + " bytes";
}

bool IsAsciiAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$
bool MatchesLabelKeyName(std::string_view s) {
  if (s.empty() || !IsAsciiAlnum(s.front()) || !IsAsciiAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAsciiAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
bool MatchesDns1123Subdomain(std::string_view s) {
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (label.empty() || !IsLowerAlnum(label.front()) || !IsLowerAlnum(label.back())) return false;
    if (!std::all_of(label.begin(), label.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '-'; })) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::string LabelKeyRegexError() {
  return RegexError(kLabelKeyErrMsg, kLabelKeyFmt, {"MyName", "my.name", "123-abc"});
}

void AppendPrefixErrors(std::string_view prefix, std::vector<std::string>* errs) {
  if (prefix.empty()) {
    errs->push_back("prefix part must be non-empty");
    return;
  }
  if (prefix.size() > kDns1123SubdomainMaxLength) {
    errs->push_back("prefix part " + MaxLenError(kDns1123SubdomainMaxLength));
  }
  if (!MatchesDns1123Subdomain(prefix)) {
    errs->push_back("prefix part " +
                    RegexError(kDns1123SubdomainErrMsg, kDns1123SubdomainFmt, {"example.com"}));
  }
}

}  // namespace

std::vector<std::string> LabelKeyErrors(std::string_view key) {
  std::vector<std::string> errs;
  const size_t slash = key.find('/');
  std::string_view name = key;
  if (slash != std::string_view::npos) {
    if (key.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back("a valid label key " + LabelKeyRegexError() +
                     " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
      return errs;
    }
    AppendPrefixErrors(key.substr(0, slash), &errs);
    name = key.substr(slash + 1);
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > kLabelKeyNameMaxLength) {
    errs.push_back("name part " + MaxLenError(kLabelKeyNameMaxLength));
  }
  if (!MatchesLabelKeyName(name)) errs.push_back("name part " + LabelKeyRegexError());
  return errs;
}

std::vector<std::string> LabelValueErrors(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kLabelValueMaxLength) errs.push_back(MaxLenError(kLabelValueMaxLength));
  if (!value.empty() && !MatchesLabelKeyName(value)) {
    errs.push_back(RegexError(kLabelValueErrMsg, kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

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
