// EventSpamFilter: Event writes past a per-source, per-object budget are refused, in the spirit
// of client-go's event spam filter (tools/record/events_cache.go: a token bucket per key of
// source component + host + involved object kind/namespace/name/uid/apiVersion; 25 events at
// once, then one per 5 minutes). client-go drops such events silently on the client; kube-fanout
// protects the upstream from clients that do not, and answers 429.
//
// No sockets. Thread-safe. Bounded: idle (full) buckets are dropped when the map grows.
#ifndef KUBE_FANOUT_RATELIMIT_EVENT_FILTER_H_
#define KUBE_FANOUT_RATELIMIT_EVENT_FILTER_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace kf::ratelimit {

class EventSpamFilter {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    double qps = 1.0 / 300;
    double burst = 25;
    size_t max_keys = 100000;
  };
  explicit EventSpamFilter(Options options) : options_(options) {}

  // The spam key of an Event body (core/v1: source + involvedObject; events.k8s.io/v1:
  // reportingController + reportingInstance + regarding). nullopt: not an Event we can read.
  static std::optional<std::string> SpamKey(std::string_view json);

  // True when the event may pass (takes a token). Unreadable bodies pass: the apiserver judges.
  bool Allow(std::string_view json, Clock::time_point now);

  uint64_t allowed() const;
  uint64_t rejected() const;

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  const Options options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  uint64_t allowed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kf::ratelimit

#endif  // KUBE_FANOUT_RATELIMIT_EVENT_FILTER_H_
