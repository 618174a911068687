// AccessAnswers: the SubjectAccessReview answers every worker thread's AccessReview shares, and
// the reviews on their way: a fleet's agents land on every thread, and one answer (or one
// review in flight) serves them all, where each thread asking for itself multiplied the
// apiserver's reviews by the threads. Bounded as one thread's cache was (evicting the entries
// nearest expiry first). Also holds the probe node that node identities' reviews are shared
// through (node_shape.h), when that is on.
//
// Thread-safe (one mutex, never held across an await or a call out). A waiter is woken on its
// own executor.
#ifndef KUBE_FANOUT_UPSTREAM_ACCESS_ANSWERS_H_
#define KUBE_FANOUT_UPSTREAM_ACCESS_ANSWERS_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/expiring_cache.h"

namespace kf {

// A review's answer for a cached read.
enum class Access {
  kAllowed,
  kDenied,       // Denied, or the review refused kube-fanout: the apiserver answers.
  kUnavailable,  // No answer in time: the client is answered 429.
};

class AccessAnswers {
 public:
  using Clock = std::chrono::steady_clock;

  // `probe_node`: the probe node's name (NewProbeNodeName); empty: node identities' reviews are
  // not shared (--authorization-share-node-reviews=false).
  AccessAnswers(size_t max_entries, std::string probe_node)
      : probe_node_(std::move(probe_node)), entries_(max_entries) {}

  // The answer kept for `key`, while fresh at `now` (an expired one is dropped).
  std::optional<bool> Find(const std::string& key, Clock::time_point now);
  void Put(const std::string& key, bool allowed, Clock::time_point expires);

  // `fetch`'s answer for `key`: run by the first caller; callers meanwhile, on any thread, wait
  // for that answer instead of asking again.
  boost::asio::awaitable<Access> Share(const std::string& key,
                                       std::function<boost::asio::awaitable<Access>()> fetch);

  const std::string& probe_node() const { return probe_node_; }
  size_t size() const;

 private:
  struct Waiter {
    boost::asio::any_io_executor executor;
    std::weak_ptr<boost::asio::steady_timer> timer;
  };
  struct Flight {
    std::optional<Access> result;
    std::vector<Waiter> waiters;
  };
  boost::asio::awaitable<Access> Wait(std::shared_ptr<Flight> flight,
                                      std::shared_ptr<boost::asio::steady_timer> timer);

  const std::string probe_node_;
  mutable absl::Mutex mu_;
  ExpiringCache<bool> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Flight>> flights_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_ACCESS_ANSWERS_H_
