// Which reads the cache answers, and with which filter. Anything it cannot answer exactly
// (another representation, paginated or Exact-RV forms the apiserver words its own errors
// for, invalid parameters, selector errors) is declined and passes through; the apiserver
// then answers it itself. Stateless.
#ifndef KUBE_FANOUT_SERVE_CACHEABLE_H_
#define KUBE_FANOUT_SERVE_CACHEABLE_H_

#include <boost/beast/http/fields.hpp>
#include <chrono>
#include <optional>

#include "cache/cacher.h"
#include "common/api/request_info.h"

namespace kf {

// The request's verb and query are ones the cache answers exactly as the apiserver would.
bool Cacheable(const RequestInfo& info, const boost::beast::http::fields& headers);

// The watch filter the request selects by (namespace, labels, fields renamed as the apiserver
// renames them, the object of a legacy single-object watch); nullopt: the apiserver's error
// to give.
std::optional<WatchFilter> FilterFor(const RequestInfo& info, const ResourceType& type);

// The same, with a LIST's or WATCH's shardSelector as `cacher`'s upstream reads it: matched when
// the upstream shards; ignored when it does not (an apiserver without the ShardedListAndWatch
// gate ignores the parameter); nullopt (the apiserver answers) while that is unknown, and for a
// selector ShardSelector::Parse leaves to the apiserver. An empty one is no selector, as there.
std::optional<WatchFilter> FilterFor(const RequestInfo& info, const Cacher& cacher);

// A read whose cache has not synced yet (kube-fanout just started, without a snapshot), as the
// apiserver answers one whose watch cache is still initializing (KEP-4568, GA in 1.34): true,
// the apiserver's 429 "storage is (re)initializing" (every watch; a LIST with a selector or
// without a limit, whose cost from storage is unbounded); false, the request goes to the
// apiserver, as the apiserver sends it to etcd (a GET, a LIST with a limit and no selector,
// a page after the first).
bool BusyWhileInitializing(const RequestInfo& info);

// The Retry-After the apiserver gives with that 429: e^(0.06 s⁻¹ × how long the cache has been
// initializing), between 1 and 30 s, in whole seconds.
int RetryAfterWhileInitializing(std::chrono::steady_clock::duration initializing_for);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_CACHEABLE_H_
