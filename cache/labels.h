// LabelSet and FieldSet: the label and selectable-field values of one object, as selectors see
// them (labels.Set and fields.Set in k8s.io/apimachinery). Both are small sorted vectors of string
// pairs: objects carry a handful of labels and fields, and a sorted vector is cheaper to build,
// copy and search than a map at that size.
//
// Values: immutable after construction, safe to share between threads.
//
// Also here: the label key and value validation of k8s.io/apimachinery (content.IsLabelKey,
// content.IsLabelValue) and Go's %q quoting, which the selector parsers need to reproduce the
// apiserver's error messages byte for byte.
#ifndef KUBE_FANOUT_CACHE_LABELS_H_
#define KUBE_FANOUT_CACHE_LABELS_H_

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/api/go_text.h"
#include "rapidjson/document.h"

namespace kf {

namespace internal {

// Sorted by key, keys unique. On duplicate keys in the input the last one wins, as with repeated
// assignment to a Go map.
class SortedStringPairs {
 public:
  using Pair = std::pair<std::string, std::string>;

  SortedStringPairs() = default;
  SortedStringPairs(std::initializer_list<Pair> pairs);
  explicit SortedStringPairs(std::vector<Pair> pairs);

  // The value for `key`, or nullptr if absent.
  const std::string* Get(std::string_view key) const;
  bool Has(std::string_view key) const { return Get(key) != nullptr; }

  size_t size() const { return pairs_.size(); }
  bool empty() const { return pairs_.empty(); }
  std::vector<Pair>::const_iterator begin() const { return pairs_.begin(); }
  std::vector<Pair>::const_iterator end() const { return pairs_.end(); }

  friend bool operator==(const SortedStringPairs&, const SortedStringPairs&) = default;

 private:
  std::vector<Pair> pairs_;
};

}  // namespace internal

// An object's metadata.labels.
class LabelSet : public internal::SortedStringPairs {
 public:
  using SortedStringPairs::SortedStringPairs;
  LabelSet() = default;
  // From the JSON value of metadata.labels. Anything but an object gives the empty set; members
  // whose value is not a string are skipped (the apiserver never sends them).
  explicit LabelSet(const rapidjson::Value& labels);
};

// An object's selectable fields: field path ("spec.nodeName") → value rendered as the apiserver
// renders it for matching (see selectable_fields.h). A field selector treats an absent field as "".
class FieldSet : public internal::SortedStringPairs {
 public:
  using SortedStringPairs::SortedStringPairs;
};

// content.IsLabelKey: a qualified name with an optional DNS-1123 subdomain prefix ("prefix/name").
// Returns the apiserver's list of problems, empty when `key` is valid.
std::vector<std::string> LabelKeyErrors(std::string_view key);

// content.IsLabelValue: empty, or at most 63 of [-A-Za-z0-9_.] starting and ending alphanumeric.
std::vector<std::string> LabelValueErrors(std::string_view value);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_LABELS_H_
