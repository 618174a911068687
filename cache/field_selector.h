// FieldSelector: a parsed fieldSelector query parameter, with the apiserver's grammar, escapes,
// error messages and matching semantics (k8s.io/apimachinery/pkg/fields/selector.go, v0.36).
//
//   selector := term ("," term)*         terms split on unescaped ','; empty terms are ignored
//   term     := field ("=" | "==" | "!=") value
//   value    := text with "\\", "\,", "\=" escapes
//
// Field names are not checked here: which fields a resource supports, and how request field
// names map to the names objects are matched on, is per resource (selectable_fields.h). A parsed
// selector must go through SelectableFields::Convert before matching objects.
//
// Value type: immutable after Parse, safe to share between threads. A default-constructed
// selector is empty and matches everything.
#ifndef KUBE_FANOUT_CACHE_FIELD_SELECTOR_H_
#define KUBE_FANOUT_CACHE_FIELD_SELECTOR_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/labels.h"

namespace kf {

// "=" and "==" are the same term (fields.hasTerm); "!=" is fields.notHasTerm.
enum class FieldOperator { kEquals, kNotEquals };

struct FieldTerm {
  std::string field;
  FieldOperator op;
  std::string value;  // Unescaped.

  friend bool operator==(const FieldTerm&, const FieldTerm&) = default;
};

class FieldSelector {
 public:
  FieldSelector() = default;  // Everything.

  // fields.ParseSelector. On a malformed selector returns InvalidArgument whose message is exactly
  // the message of the apiserver's 400 BadRequest Status for that fieldSelector. Terms are
  // handled in sorted order of their text, so the error names the first bad term in that order.
  // A term with an empty field and an empty value ("=", "!=") selects everything and is dropped.
  static absl::StatusOr<FieldSelector> Parse(std::string_view selector);

  // Terms taken as they are (no sorting, no validation), e.g. after a field-name conversion.
  static FieldSelector FromTerms(std::vector<FieldTerm> terms);

  bool Empty() const { return terms_.empty(); }
  // Every term holds; a field absent from `fields` compares as "".
  bool Matches(const FieldSet& fields) const;
  // The value of the first "=" term on `field`, as fields.Selector.RequiresExactMatch.
  std::optional<std::string> RequiresExactMatch(std::string_view field) const;

  const std::vector<FieldTerm>& Terms() const { return terms_; }
  // As fields.Selector.String(): "f=v" / "f!=v" with values escaped, joined by ",".
  std::string String() const;

  friend bool operator==(const FieldSelector&, const FieldSelector&) = default;

 private:
  explicit FieldSelector(std::vector<FieldTerm> terms) : terms_(std::move(terms)) {}

  std::vector<FieldTerm> terms_;
};

// fields.EscapeValue: "\" → "\\", "," → "\,", "=" → "\=".
std::string EscapeFieldValue(std::string_view value);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_FIELD_SELECTOR_H_
