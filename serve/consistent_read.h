// ConsistentRead: the resourceVersion a cached read must reflect, and the wait for the cache
// to reach it, as the apiserver's watch cache decides (waitUntilFreshAndBlock): "0" — what the
// cache has; N — at least N; "" (a consistent read) — at least the upstream's current RV,
// probed after the request arrived (the probe shared by concurrent readers). On a quiet
// resource the reflector is asked to prove progress. Bounded waits; past them the read passes
// through.
//
// Runs in a session's coroutine; the Cacher and Reflector are thread-safe.
#ifndef KUBE_FANOUT_SERVE_CONSISTENT_READ_H_
#define KUBE_FANOUT_SERVE_CONSISTENT_READ_H_

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <string_view>

#include "cache/cacher.h"
#include "sync/reflector.h"

namespace kf {

// How long a read waits for the cache to reach the resourceVersion it must reflect.
inline constexpr auto kFreshnessWait = std::chrono::milliseconds(3000);

// nullopt: the cache cannot promise the version in time; pass the request through.
boost::asio::awaitable<std::optional<uint64_t>> RequiredVersion(Cacher& cacher,
                                                                Reflector& reflector,
                                                                std::optional<std::string_view> rv);

// How long the first requests for a resource's protobuf cache wait for its first LIST. A large
// resource takes seconds to list (19,000 pods: 7 s on a busy two-core machine), and a fleet of
// client-go agents asks at once: passing them all through meanwhile would send the apiserver the
// very storm kube-fanout is there to absorb (it did, at 10,000 agents).
inline constexpr auto kProtobufStartWait = std::chrono::milliseconds(30000);

// Waits (up to `timeout`) for a cache that has just started to sync, while its reflector has
// not failed (then at once: e.g. the upstream serves no protobuf for it).
boost::asio::awaitable<bool> WaitSynced(Cacher& cacher, const Reflector& reflector,
                                        std::chrono::milliseconds timeout = kProtobufStartWait);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_CONSISTENT_READ_H_
