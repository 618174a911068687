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
    std::string_view label =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
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
    errs.emplace_back("name part must be non-empty");
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

}  // namespace kf
