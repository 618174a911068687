// ConsistentRead: the resourceVersion a cached read must reflect, and the wait for the cache
// to reach it, as the apiserver's watch cache decides (waitUntilFreshAndBlock): "0" — what the
// cache has; N — at least N; "" (a consistent read) — at least the upstream's current RV,
// read by a proof that started after the request arrived (Reflector::ProbeUpstreamVersion: one
// proof shared by every read waiting when it starts; a small cache holding what the proof's
// list holds is current at its RV at once). A quiet cache the proof could not vouch for asks
// the reflector to prove progress (a bookmark, 1-2 s). Bounded waits; past them the read is
// refused as the apiserver refuses it (504 "Too large resource version" for an RV the cache did
// not reach; 429 for a consistent read the cache could not prove current), never passed through:
// a kube-fanout too busy to keep up must not turn its load into the apiserver's. Passed through,
// for the apiserver's own answer: a read whose probe the upstream failed, and one the upstream
// cannot prove (a resource it sends no bookmarks for, e.g. Events; or not yet told apart) that
// the cache has not reached.
//
// Runs in a session's coroutine; the Cacher and Reflector are thread-safe.
#ifndef KUBE_FANOUT_SERVE_CONSISTENT_READ_H_
#define KUBE_FANOUT_SERVE_CONSISTENT_READ_H_

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <string_view>

#include "cache/cacher.h"
#include "common/api/status_response.h"
#include "proxy/edge/exchange.h"
#include "proxy/serve/serve_stats.h"
#include "proxy/sync/reflector.h"

namespace kf {

// How long a read waits for the cache to reach the resourceVersion it must reflect: the
// apiserver's own wait (3 s, for etcd) plus its bookmark timer's, which a quiet resource's proof
// waits for (a bookmark 1-2.25 s after the progress watch opens). At 3 s a loaded two-core CI
// machine refused reads the apiserver had just answered.
inline constexpr auto kFreshnessWait = std::chrono::milliseconds(5000);

// What a cached read may serve.
struct Freshness {
  enum class Verdict {
    kServe,  // The cache has reached `rv`, the version the read must reflect.
    // The upstream answers: it failed the probe of its current version, or it cannot prove
    // this resource current (UpstreamBookmarks other than kSent) and the cache is behind.
    kPassThrough,
    kTooLarge,  // The cache did not reach the asked `rv` in time (`current`: where it is).
    kUnproven,  // A consistent read: the probe or the cache did not answer in time.
  };
  Verdict verdict = Verdict::kServe;
  uint64_t rv = 0;       // kServe: the RV served at; kTooLarge and kUnproven: the RV waited for.
  uint64_t current = 0;  // kTooLarge and kUnproven after a wait: the cache's RV when it ended.
};

boost::asio::awaitable<Freshness> RequiredVersion(Cacher& cacher, Reflector& reflector,
                                                  std::optional<std::string_view> rv);

// The apiserver's answer to a read its cache could not serve fresh in time, for kTooLarge and
// kUnproven (kServe and kPassThrough have none).
// kTooLarge (storage.NewTooLargeResourceVersionError): 504 Timeout, "Timeout: Too large resource
// version: N, current: C", cause ResourceVersionTooLarge, retryAfterSeconds 1.
// kUnproven: its overload answer (APF), 429 with Retry-After: 1.
KubeStatus UnfreshStatus(const Freshness& freshness);

// Answers a read with UnfreshStatus, counted in `stats`.
boost::asio::awaitable<void> RefuseUnfresh(Exchange& x, const Freshness& freshness,
                                           CacheServeStats& stats);

// How long the first requests for a resource's protobuf cache wait for its first LIST. A large
// resource takes seconds to list (19,000 pods: 7 s on a busy two-core machine), and a fleet of
// client-go agents asks at once: passing them all through meanwhile would send the apiserver the
// very storm kube-fanout is there to absorb (it did, at 10,000 agents).
inline constexpr auto kProtobufStartWait = std::chrono::milliseconds(30000);

// How long a read of a cached resource waits for the cache to start (its snapshots read: seconds
// for a large one) before it is passed through.
inline constexpr auto kCacheStartWait = std::chrono::milliseconds(30000);

// Waits (up to `timeout`) for a cache that has just started to sync, while its reflector has
// not failed (then at once: e.g. the upstream serves no protobuf for it).
boost::asio::awaitable<bool> WaitSynced(Cacher& cacher, const Reflector& reflector,
                                        std::chrono::milliseconds timeout = kProtobufStartWait);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_CONSISTENT_READ_H_
