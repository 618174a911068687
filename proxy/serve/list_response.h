// The answers to a cached LIST and GET, encoded as the apiserver encodes them: the list's
// head and the items' own bytes (shared, never copied: the response gathers them), the
// continue token and remainingItemCount of a page, the NotFound Status of a missing object.
//
// Runs in a session's coroutine; reads the Cacher (thread-safe). A large list is built and
// compressed in the list pool (list_pool.h), its compressed bytes shared by the answers with
// the same identity (gzip_cache.h).
#ifndef KUBE_FANOUT_SERVE_LIST_RESPONSE_H_
#define KUBE_FANOUT_SERVE_LIST_RESPONSE_H_

#include <optional>
#include <string>

#include "cache/cacher.h"
#include "proxy/edge/exchange.h"
#include "proxy/serve/gzip_cache.h"
#include "proxy/serve/list_pool.h"
#include "proxy/serve/serve_stats.h"

namespace kf {

// How a LIST is answered, as the apiserver's watch cache decides (waitUntilFreshAndList).
struct ListPlan {
  std::optional<std::string> rv;  // The RV the list must reflect (RequiredVersion's input).
  bool exact = false;             // The state at exactly that RV, else the latest.
  Cacher::PageRequest page;
};
ListPlan PlanList(const RequestInfo& info, const WatchFilter& filter, const ResourceType& type);

// Where lists are built and compressed. Null: on the session's thread, and compressed anew.
struct ListBuilding {
  // Lists from a cache of at least this many objects are built in the pool (a selector is
  // matched against each), and any list to compress is compressed there.
  static constexpr size_t kPoolObjects = 1000;
  ListBuilds* builds = nullptr;
  GzipCache* gzip = nullptr;
};

// False: the state at that RV has left the window (declined; the apiserver has it).
asio::awaitable<bool> WriteList(Exchange& x, Cacher& cacher, const WatchFilter& filter,
                                const ListPlan& plan, uint64_t at_rv, CacheServeStats& stats,
                                ListBuilding building = {});
// A GET's object in the form `form` says (PartialObjectMetadata, CBOR; null: the cache's own),
// or its NotFound Status. False (nothing written) when the object is not cached and
// `miss_is_upstreams`: an RV=0 GET, which the apiserver answers from its own watch cache,
// usually ahead of this one (a Node its kubelet has just registered).
asio::awaitable<bool> WriteObject(Exchange& x, Cacher& cacher, CacheServeStats& stats,
                                  const WatchFilter* form = nullptr,
                                  bool miss_is_upstreams = false);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_LIST_RESPONSE_H_
