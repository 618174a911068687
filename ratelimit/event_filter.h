// EventSpamFilter: Event writes past a per-source, per-object budget are refused, in the spirit
// of client-go's event spam filter (tools/record/events_cache.go: a token bucket per key of
// source component + host + involved object kind/namespace/name/uid/apiVersion; 25 events at
// once, then one per 5 minutes). client-go drops such events silently on the client; kube-fanout
// protects the upstream from clients that do not, and answers 429.
//
// Keys are per authenticated user: the body's source fields are the client's word, so a bucket
// is only ever spent by the identity that sent the events (nobody can silence another user's
// events by claiming its source). Callers judge only requests whose user is known.
//
// No sockets. Thread-safe. Bounded: when the table is full, refilled buckets are dropped, then
// the fullest ones (those that forget least); a bucket that is holding a source back is never
// reset by others filling the table.
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

  // How an Event body is encoded: its request's Content-Type.
  enum class Encoding { kJson, kProtobuf };

  // The spam key of an Event body (core/v1: source + involvedObject; events.k8s.io/v1:
  // reportingController + reportingInstance + regarding), the same for either encoding of the
  // same Event. Protobuf bodies (kubelet's default) are read from the apiserver's envelope
  // ("k8s\0", kind and apiVersion, then the Event's message) as Go's generated decoder reads
  // them: a repeated string field's last value wins, a repeated message field's occurrences
  // merge. nullopt: not an Event we can read.
  static std::optional<std::string> SpamKey(std::string_view body,
                                            Encoding encoding = Encoding::kJson);

  // True when the event `user` sends may pass (takes a token). Unreadable bodies pass: the
  // apiserver judges them.
  bool Allow(std::string_view user, std::string_view body, Clock::time_point now,
             Encoding encoding = Encoding::kJson);

  uint64_t allowed() const;
  uint64_t rejected() const;

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  double TokensAt(const Bucket& b, Clock::time_point now) const;
  void MakeRoomLocked(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Options options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  uint64_t allowed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kf::ratelimit

#endif  // KUBE_FANOUT_RATELIMIT_EVENT_FILTER_H_
