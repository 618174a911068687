// Go's strconv number parsing where the apiserver's answers depend on it: a query parameter
// the apiserver reads with strconv and refuses (its 400) must not be read otherwise here.
// absl::SimpleAtoi takes what Go does not (leading and trailing spaces, a '+' for unsigned).
// Stateless.
#ifndef KUBE_FANOUT_COMMON_API_GO_STRCONV_H_
#define KUBE_FANOUT_COMMON_API_GO_STRCONV_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace kf {

// Go's strconv.ParseUint(s, 10, 64), as the apiserver reads resourceVersion (etcd3's
// APIObjectVersioner): one or more ASCII digits and nothing else (no sign, no spaces, no
// underscores; leading zeros allowed), at most 2^64-1.
std::optional<uint64_t> ParseGoUint(std::string_view s);

// Go's strconv.ParseInt(s, 10, 64), as the apiserver reads limit and timeoutSeconds: an
// optional '+' or '-', then ParseGoUint's digits, within int64.
std::optional<int64_t> ParseGoInt(std::string_view s);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_GO_STRCONV_H_
