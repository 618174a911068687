#include "cache/field_selector.h"

#include <algorithm>

#include "absl/status/status.h"
#include "common/strings.h"

namespace kf {

namespace {

// splitTerms: split on ',' not preceded by an unescaped '\'. Go walks runes; walking bytes is the
// same, as '\' and ',' never occur inside a multi-byte UTF-8 sequence.
std::vector<std::string_view> SplitTerms(std::string_view selector) {
  std::vector<std::string_view> terms;
  if (selector.empty()) return terms;
  size_t start = 0;
  bool in_slash = false;
  for (size_t i = 0; i < selector.size(); ++i) {
    if (in_slash) {
      in_slash = false;
    } else if (selector[i] == '\\') {
      in_slash = true;
    } else if (selector[i] == ',') {
      terms.push_back(selector.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.push_back(selector.substr(start));
  return terms;
}

struct SplitTerm {
  std::string_view lhs;
  FieldOperator op;
  std::string_view rhs;
};

// splitTerm: the operator is the first "!=", "==" or "=" from the left, so "a!b=c" has the
// field "a!b" and "a==b" is "a" == "b".
std::optional<SplitTerm> SplitOnOperator(std::string_view term) {
  for (size_t i = 0; i < term.size(); ++i) {
    std::string_view rest = term.substr(i);
    if (rest.starts_with("!="))
      return SplitTerm{term.substr(0, i), FieldOperator::kNotEquals, rest.substr(2)};
    if (rest.starts_with("=="))
      return SplitTerm{term.substr(0, i), FieldOperator::kEquals, rest.substr(2)};
    if (rest.starts_with("="))
      return SplitTerm{term.substr(0, i), FieldOperator::kEquals, rest.substr(1)};
  }
  return std::nullopt;
}

absl::Status InvalidEscape(std::string_view sequence) {
  return absl::InvalidArgumentError("invalid field selector: invalid escape sequence: " +
                                    std::string(sequence));
}

// fields.UnescapeValue. Go walks runes and writes them back, so on this path (only taken when
// the value contains '\', ',' or '=') invalid UTF-8 comes out as U+FFFD, as it does in Go.
absl::StatusOr<std::string> UnescapeValue(std::string_view s) {
  if (s.find_first_of("\\,=") == std::string_view::npos) return std::string(s);
  std::string out;
  out.reserve(s.size());
  bool in_slash = false;
  while (!s.empty()) {
    const auto [r, width] = DecodeRune(s);
    s.remove_prefix(width);
    if (in_slash) {
      if (r != '\\' && r != ',' && r != '=') {
        std::string sequence = "\\";
        AppendRune(r, &sequence);
        return InvalidEscape(sequence);
      }
      out.push_back(static_cast<char>(r));
      in_slash = false;
    } else if (r == '\\') {
      in_slash = true;
    } else if (r == ',' || r == '=') {
      // UnescapedRune formats the rune with %v, i.e. as a number: "61" for '='.
      return absl::InvalidArgumentError("invalid field selector: unescaped character in value: " +
                                        std::to_string(static_cast<int>(r)));
    } else {
      AppendRune(r, &out);
    }
  }
  if (in_slash) return InvalidEscape("\\");
  return out;
}

absl::StatusOr<std::vector<FieldTerm>> ParseTerms(std::string_view selector) {
  std::vector<std::string_view> parts = SplitTerms(selector);
  std::sort(parts.begin(), parts.end());
  std::vector<FieldTerm> terms;
  for (std::string_view part : parts) {
    if (part.empty()) continue;
    std::optional<SplitTerm> split = SplitOnOperator(part);
    if (!split) {
      return absl::InvalidArgumentError("invalid selector: '" + std::string(selector) +
                                        "'; can't understand '" + std::string(part) + "'");
    }
    absl::StatusOr<std::string> value = UnescapeValue(split->rhs);
    if (!value.ok()) return value.status();
    // ParseSelector ends with Transform(identity), which turns a term with an empty field and
    // an empty value into Everything().
    if (split->lhs.empty() && value->empty()) continue;
    terms.push_back(FieldTerm{std::string(split->lhs), split->op, *std::move(value)});
  }
  return terms;
}

}  // namespace

absl::StatusOr<FieldSelector> FieldSelector::Parse(std::string_view selector) {
  absl::StatusOr<std::vector<FieldTerm>> terms = ParseTerms(selector);
  if (!terms.ok()) return StatusMessageError(ToStd(terms.status().message()));
  return FieldSelector(*std::move(terms));
}

FieldSelector FieldSelector::FromTerms(std::vector<FieldTerm> terms) {
  return FieldSelector(std::move(terms));
}

bool FieldSelector::Matches(const FieldSet& fields) const {
  return std::all_of(terms_.begin(), terms_.end(), [&fields](const FieldTerm& t) {
    const std::string* v = fields.Get(t.field);
    const std::string_view have = v != nullptr ? std::string_view(*v) : std::string_view();
    return (have == t.value) == (t.op == FieldOperator::kEquals);
  });
}

std::optional<std::string> FieldSelector::RequiresExactMatch(std::string_view field) const {
  for (const FieldTerm& t : terms_) {
    if (t.op == FieldOperator::kEquals && t.field == field) return t.value;
  }
  return std::nullopt;
}

std::string FieldSelector::String() const {
  std::string out;
  for (const FieldTerm& t : terms_) {
    if (!out.empty()) out.push_back(',');
    out += t.field;
    out += t.op == FieldOperator::kEquals ? "=" : "!=";
    out += EscapeFieldValue(t.value);
  }
  return out;
}

std::string EscapeFieldValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\' || c == ',' || c == '=') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace kf
