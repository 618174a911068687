// CacheServeStats: what the cache's request side answered, for /metrics. Shared by every
// worker; atomic counters.
#ifndef KUBE_FANOUT_SERVE_SERVE_STATS_H_
#define KUBE_FANOUT_SERVE_SERVE_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "common/histogram.h"
#include "proxy/serve/pass_reason.h"

namespace kf {

struct CacheServeStats {
  std::atomic<uint64_t> lists{0}, gets{0}, watches{0}, declined{0};
  // `declined` by why (PassReason).
  std::array<std::atomic<uint64_t>, kPassReasons> passed{};
  // Declined watches sent upstream with a shorter timeout, to come back to the cache when it
  // can answer them (watch_return.h).
  std::atomic<uint64_t> watches_sent_back{0};
  std::atomic<uint64_t> bytes_written{0}, events_written{0};
  std::atomic<int64_t> open_watches{0};
  std::atomic<uint64_t> protobuf{0};  // Reads of the above answered in protobuf.
  std::atomic<uint64_t> cbor{0};      // Reads of the above answered in CBOR.
  // Watches from before their cache's window, started at the window's start because the
  // resource's other cache (JSON or protobuf) proved nothing they would see happened between.
  std::atomic<uint64_t> watches_vouched{0};
  // Reads refused with the apiserver's 429 "storage is (re)initializing": their cache had not
  // synced yet (BusyWhileInitializing).
  std::atomic<uint64_t> initializing{0};
  // Reads refused because their cache did not become fresh enough in time (RequiredVersion):
  // an RV it did not reach (504 "Too large resource version"), or a consistent read it could not
  // prove current (429), instead of passing them through.
  std::atomic<uint64_t> unfresh_too_large{0}, unfresh_unproven{0};
  // Watch writes by how they went out: straight from the wake-up (Response::TryWriteBody took
  // them whole), or by the watch's loop (the first, TLS, HTTP/2, a client behind).
  std::atomic<uint64_t> watch_writes_direct{0}, watch_writes_loop{0};
  // Per watch write carrying events: from the arrival of its oldest event from the upstream to
  // the write (a direct write's: the end of its thread's round of wake-ups, when the round's
  // sends have gone out).
  metrics::Histogram watch_delay;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_SERVE_STATS_H_
