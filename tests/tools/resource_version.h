// resourceVersions as the churn and the load agents read them: decimal etcd revisions, compared
// as numbers (kube-fanout passes them through unchanged, and the load test checks exactly that).
#ifndef KUBE_FANOUT_TESTS_TOOLS_RESOURCE_VERSION_H_
#define KUBE_FANOUT_TESTS_TOOLS_RESOURCE_VERSION_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace kf::tools {

// A decimal resourceVersion; nullopt when empty, not all digits, with a leading zero, or too
// large.
std::optional<uint64_t> ParseResourceVersion(std::string_view s);

// The resourceVersion in an object's metadata (the body of a write's answer); nullopt if the
// body is not such an object.
std::optional<uint64_t> ObjectResourceVersion(std::string_view body);

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_RESOURCE_VERSION_H_
