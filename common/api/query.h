// Query: the decoded query string of a request URL, with Go's net/url semantics.
//
// kube-apiserver reads parameters through Go's url.ParseQuery (as req.URL.Query(), which drops
// malformed pairs silently), so kube-fanout must agree with it on what a query says: '&'
// separates pairs, pairs containing ';' are dropped, '+' is a space, a bad %-escape drops the
// pair, and a repeated key keeps every value in order (readers use the first one).
// Value type; not thread-safe for writes.
#ifndef KUBE_FANOUT_COMMON_API_QUERY_H_
#define KUBE_FANOUT_COMMON_API_QUERY_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kf {

class Query {
 public:
  // Go's url.ParseQuery limit (defaultMaxParams): a query of more parameters reads as empty.
  static constexpr std::ptrdiff_t kMaxParams = 10000;

  // Parses the part of a request target after '?' (without the '?').
  static Query Parse(std::string_view raw);

  // The first value of `key`, if present (an empty value is present).
  std::optional<std::string_view> First(std::string_view key) const;
  bool Has(std::string_view key) const { return First(key).has_value(); }
  const std::vector<std::pair<std::string, std::string>>& pairs() const { return pairs_; }

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
};

// Go's url.QueryUnescape: '+' → ' ', %XX → byte. nullopt on a malformed escape.
std::optional<std::string> QueryUnescape(std::string_view s);

// Go's url.PathUnescape: %XX → byte ('+' stays). nullopt on a malformed escape.
std::optional<std::string> PathUnescape(std::string_view s);

// Go's strconv.ParseBool: 1 t T TRUE true True / 0 f F FALSE false False.
std::optional<bool> ParseGoBool(std::string_view s);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_QUERY_H_
