// StartBeforeWindow: a cached WATCH from a resourceVersion older than its cache's event window,
// which the apiserver (a longer window) would still serve. First the resource's cache in the
// other encoding may vouch that nothing the watch would see happened in between (then it starts
// at the window's start); else, when the window begins at an upstream LIST, the reflector fills
// the missing history in from the upstream (Reflector::Backfill) and the watch starts from its
// own RV. Otherwise, or when the upstream no longer has that RV, the 410 stands (the
// upstream's own message when it gave one).
#ifndef KUBE_FANOUT_SERVE_WATCH_HISTORY_H_
#define KUBE_FANOUT_SERVE_WATCH_HISTORY_H_

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "cache/cacher.h"
#include "proxy/serve/serve_stats.h"
#include "proxy/sync/reflector.h"

namespace kf {

// The longest a watch waits for its history to be filled in before it gets its 410.
inline constexpr auto kBackfillWait = std::chrono::seconds(5);

using Registered = absl::StatusOr<std::shared_ptr<CacheWatcher>>;

// `expired`: the cache's 410 for a watch from `rv`; `start(from)` registers the watch from
// `from` (its RV or the window's start). On the request's coroutine.
boost::asio::awaitable<Registered> StartBeforeWindow(Cacher& cacher, Reflector& reflector,
                                                     const Cacher* witness,
                                                     const WatchFilter& filter, uint64_t rv,
                                                     absl::Status expired,
                                                     std::function<Registered(uint64_t)> start,
                                                     CacheServeStats& stats);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_WATCH_HISTORY_H_
