// Coalescer: identical concurrent passthrough reads (same request, same credentials) share one
// upstream call. Only safe if every answer still reflects a read that started after its own
// request arrived (a consistent read must see writes that finished before it): so a request
// never joins a call already on its way upstream. It joins the *next* one, which starts when
// the current one ends and answers everyone who arrived meanwhile. N identical concurrent
// reads cost at most two upstream calls at a time instead of N.
//
// Thread-safe: flights are shared across worker threads; callbacks run on the completing
// thread and must only schedule work.
#ifndef KUBE_FANOUT_PASSTHROUGH_COALESCER_H_
#define KUBE_FANOUT_PASSTHROUGH_COALESCER_H_

#include <boost/beast/http/fields.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace kf {

// A response as relayed to the leader's client: status, end-to-end fields, the whole body.
struct CapturedResponse {
  unsigned status = 0;
  std::string reason;
  boost::beast::http::fields fields;  // Without Content-Length/Transfer-Encoding/Connection.
  std::string body;
  bool complete = false;  // The whole response arrived and fit the limit.
  size_t limit = 8u << 20;
};
using CapturedPtr = std::shared_ptr<const CapturedResponse>;

// The request's part of what coalescing keys on (the filter adds who is asking, as vouched:
// coalescing_filter.h): two requests share an answer only if their keys are equal. Method, request
// target (path and query, as sent) and every request field, names lower-cased and sorted (values of
// one name in order), except those that cannot change the apiserver's answer: hop-by-hop fields,
// Host, Content-Length, X-Forwarded-For, and User-Agent, which counts only as whether the apiserver
// pretty-prints for it. Everything else (credentials, Accept, Accept-Encoding, Impersonate-*,
// Audit-Id the apiserver echoes, ...) is part of the key: a field we do not know may change the
// answer.
std::string CoalesceKey(std::string_view method, std::string_view target,
                        const boost::beast::http::fields& fields);

class Coalescer {
 public:
  struct Flight;
  struct Ticket {
    bool leader = false;
    std::shared_ptr<Flight> flight;
    std::shared_ptr<Flight> wait_for;  // A leader of the next call starts after this one.
  };

  Ticket Join(const std::string& key);
  // The leader of a next call, its wait over, is now the call on its way.
  void Start(const std::string& key, const std::shared_ptr<Flight>& flight);
  // The leader's call ended; `result` may be null or incomplete (followers then go upstream
  // themselves).
  void Complete(const std::string& key, const std::shared_ptr<Flight>& flight,
                const CapturedPtr& result);
  // Calls `done` with the flight's result when it ends (now if it has).
  static void OnDone(const std::shared_ptr<Flight>& flight, std::function<void(CapturedPtr)> done);

  uint64_t coalesced() const;
  void CountCoalesced();

 private:
  struct Entry {
    std::shared_ptr<Flight> running, next;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t coalesced_ ABSL_GUARDED_BY(mu_) = 0;
};

struct Coalescer::Flight {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  CapturedPtr result ABSL_GUARDED_BY(mu);
  std::vector<std::function<void(CapturedPtr)>> waiters ABSL_GUARDED_BY(mu);
};

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_COALESCER_H_
