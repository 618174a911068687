// Continue tokens in the apiserver's own format (apiserver/pkg/storage/continue.go), so a client
// can page through kube-fanout and the apiserver interchangeably: base64url without padding of
// {"v":"meta.k8s.io/v1","rv":<rv>,"start":"<start>"}, where start is the next key relative to
// the listed prefix. The apiserver's cache writes it with a leading "/" ("/ns/name\u0000" for a
// cluster-wide list of a namespaced kind, "/name\u0000" within a namespace); etcd without.
#ifndef KUBE_FANOUT_CACHE_CONTINUE_TOKEN_H_
#define KUBE_FANOUT_CACHE_CONTINUE_TOKEN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/api/json.h"  // GoJsonString, used by the encoder.

namespace kf {

struct ContinueToken {
  int64_t resource_version = 0;  // < 0: "continue at the latest" (an inconsistent continuation).
  std::string start;             // Relative to the listed prefix, without its leading "/".
};

// `start` is relative to the listed prefix, e.g. "ns/name\0" (the key after the last item).
std::string EncodeContinue(std::string_view start, int64_t resource_version);

// Validates as DecodeContinue does (version, rv != 0, non-empty start, start path-clean);
// InvalidArgument with the apiserver's reason otherwise.
absl::StatusOr<ContinueToken> DecodeContinue(std::string_view token);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_CONTINUE_TOKEN_H_
