// Admission: decides, for each request, whether kube-fanout serves it now, queues it, or answers
// 429 — in the spirit of the apiserver's API Priority and Fairness. A request is classified by
// the first matching flow schema (by precedence) into a flow (the schema plus the user's or
// namespace's name) and a priority level. A flow may have a token bucket (polling clients:
// GET/LIST above the rate get 429 at once). A level has a share of the seats; when they are
// taken, requests wait in shuffle-sharded queues (each flow is dealt a few of the level's
// queues and joins the shortest), served round robin, so one noisy flow fills its own queues
// and not everyone's; a full queue or a wait past the level's limit is a 429.
//
// No sockets. Thread-safe (one mutex); `done` callbacks run outside it, on the thread that
// decided (the caller's, a seat's releaser, or ExpireQueued's) and must only schedule work.
#ifndef KUBE_FANOUT_RATELIMIT_ADMISSION_H_
#define KUBE_FANOUT_RATELIMIT_ADMISSION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ratelimit/config.h"

namespace kf::ratelimit {

struct RequestAttributes {
  std::string user;  // Authenticated name; "" when unknown.
  std::vector<std::string> groups;
  std::string user_agent;
  std::string source;  // The client's address.
  bool resource_request = true;
  std::string verb;  // get list watch create ... (non-resource: the HTTP method, lower case).
  std::string api_group, resource, namespace_;
  std::string path;           // For non-resource requests.
  bool long_running = false;  // Watches: not metered by token buckets.
  // A GET or LIST the router sends to the cache: metered by its schema's cachedReadRateLimit
  // when it has one (the cache may still decline it: ChargePassthrough).
  bool cached_read = false;
  // What a ServiceAccount token bound to a pod names, from its TokenReview's extra (the
  // apiserver's word, never the client's): "node/NAME" (authentication.kubernetes.io/node-name),
  // else "pod/NAME" (.../pod-name); "" for any other identity. ByUser flows are keyed by it too.
  std::string bound_to;

  // Who the request is from, for ByUser flows: the user, else "<user agent>@<address>".
  std::string Identity() const;
};

struct Flow {
  std::string schema;
  std::string level;
  std::string key;                   // schema + "/" + distinguisher value.
  bool drop_managed_fields = false;  // The schema's dropManagedFields.
};

struct State;
struct Level;

// A seat held while a request is served; freed by Release() or on destruction, which lets the
// next queued request in.
class Seat {
 public:
  Seat() = default;
  Seat(std::shared_ptr<State> state, std::shared_ptr<Level> level);
  Seat(Seat&&) noexcept = default;
  Seat& operator=(Seat&& other) noexcept;
  ~Seat() { Release(); }
  void Release();
  bool held() const { return level_ != nullptr; }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Level> level_;
};

struct Decision {
  bool admitted = false;
  Flow flow;
  std::string reject_reason;  // "rate-limited", "queue-full", "time-out".
  int retry_after_seconds = 1;
  std::chrono::nanoseconds waited{0};
  Seat seat;
};

class Admission {
 public:
  using Clock = std::chrono::steady_clock;
  using Done = std::function<void(Decision)>;

  explicit Admission(Config config, std::function<Clock::time_point()> now = Clock::now);
  ~Admission();

  // Replaces the configuration for new requests; seats already held and requests already
  // queued finish under the old one.
  void Reconfigure(Config config);

  Flow Classify(const RequestAttributes& request) const;

  // Calls `done` exactly once: now (admitted or rejected), or later when a seat frees, the wait
  // limit passes (ExpireQueued) — unless Cancel() took the request out first. Returns the
  // ticket of a queued request (0 when decided at once).
  uint64_t Admit(const RequestAttributes& request, Done done);
  // A read admitted at the cache's price (RequestAttributes::cached_read, a schema with a
  // cachedReadRateLimit) that the cache declined: it passes through, so it pays its flow's
  // rateLimit too, at once (its seat is held: it is not queued again). Admitted (no seat), or
  // refused "rate-limited" with the seconds until a token.
  Decision ChargePassthrough(const Flow& flow);
  // Takes a queued request out (its client left); false when it was already decided.
  bool Cancel(uint64_t ticket);
  // Rejects queued requests that waited past their level's limit. Call every ~100 ms.
  void ExpireQueued();

  struct LevelStats {
    int seats = 0;  // 0 for exempt levels.
    int executing = 0;
    int queued = 0;
    uint64_t admitted = 0;
    uint64_t queued_total = 0;  // Admitted after waiting in a queue.
    double wait_seconds_sum = 0;
  };
  struct SchemaStats {
    std::string level;
    uint64_t admitted = 0;
    std::map<std::string, uint64_t> rejected;  // By reason.
  };
  std::map<std::string, LevelStats> LevelStatsSnapshot() const;
  std::map<std::string, SchemaStats> SchemaStatsSnapshot() const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace kf::ratelimit

#endif  // KUBE_FANOUT_RATELIMIT_ADMISSION_H_
