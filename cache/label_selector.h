// LabelSelector: a parsed labelSelector query parameter, with the apiserver's grammar, validation,
// error messages and matching semantics (k8s.io/apimachinery/pkg/labels/selector.go, v0.36).
//
//   selector    := "" | requirement ("," requirement)*        (comma is AND)
//   requirement := ["!"] key | key ("="|"=="|"!=") value | key (">"|"<") integer
//                | key ("in"|"notin") "(" value ("," value)* ")"
//
// Value type: immutable after Parse, safe to share between threads. A default-constructed
// selector is empty and matches everything.
#ifndef KUBE_FANOUT_CACHE_LABEL_SELECTOR_H_
#define KUBE_FANOUT_CACHE_LABEL_SELECTOR_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/labels.h"

namespace kf {

enum class LabelOperator {
  kExists,        // k
  kDoesNotExist,  // !k
  kEquals,        // k=v
  kDoubleEquals,  // k==v
  kNotEquals,     // k!=v
  kIn,            // k in (a,b)
  kNotIn,         // k notin (a,b)
  kGreaterThan,   // k>1
  kLessThan,      // k<1
};

// One term of a selector (labels.Requirement).
class LabelRequirement {
 public:
  LabelRequirement(std::string key, LabelOperator op, std::vector<std::string> values)
      : key_(std::move(key)), op_(op), values_(std::move(values)) {}

  const std::string& key() const { return key_; }
  LabelOperator op() const { return op_; }
  // Sorted and without duplicates for in/notin; one value for =, ==, !=, >, <; none otherwise.
  const std::vector<std::string>& values() const { return values_; }

  // in, =, == need the key with a listed value; notin, != match when the key is absent too;
  // >, < need the key with an integer value; exists and !exists test presence only.
  bool Matches(const LabelSet& labels) const;
  // As labels.Requirement.String(): "!k", "k=v", "k in (a,b)", ...
  std::string String() const;

  friend bool operator==(const LabelRequirement&, const LabelRequirement&) = default;

 private:
  std::string key_;
  LabelOperator op_;
  std::vector<std::string> values_;
};

class LabelSelector {
 public:
  LabelSelector() = default;  // Everything.

  // labels.Parse. On a malformed selector returns InvalidArgument whose message is exactly the
  // message of the apiserver's 400 BadRequest Status for that labelSelector.
  static absl::StatusOr<LabelSelector> Parse(std::string_view selector);

  // True when the selector does not restrict anything (no requirements).
  bool Empty() const { return requirements_.empty(); }
  bool Matches(const LabelSet& labels) const;

  // The value `key` must have, if the selector pins it: the first requirement on `key` (in key
  // order) is =, == or an in with a single value. As labels.Selector.RequiresExactMatch.
  std::optional<std::string> RequiresExactMatch(std::string_view key) const;

  // Sorted by key (ties keep their order in the input).
  const std::vector<LabelRequirement>& Requirements() const { return requirements_; }
  // Canonical form, as labels.Selector.String(): requirements in key order, joined by ",".
  std::string String() const;

  friend bool operator==(const LabelSelector&, const LabelSelector&) = default;

 private:
  explicit LabelSelector(std::vector<LabelRequirement> requirements)
      : requirements_(std::move(requirements)) {}

  std::vector<LabelRequirement> requirements_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_LABEL_SELECTOR_H_
