// ReadinessProbe: the load test's stand-in for a Service's view of its endpoints' readiness.
// Each replica's /readyz (its metrics listener, plain HTTP) is asked every `interval` on a
// thread of its own. A replica is ready after a 200; not ready after any other answer (it says
// so: a terminating or still loading pod) or a refused connection (no process: no endpoint);
// a replica too busy to answer within a second stays as it was until three probes in a row went
// unanswered, as a kubelet's probe (timeoutSeconds 1, failureThreshold 3). kube-proxy sends new
// connections only to ready endpoints, and a terminating pod's endpoint stops being ready within
// about a second; the AgentPool asks Ready(i) for each new connection, and Alive(i) (answered at
// all, or not refused) when none is ready (docs/load.md: what this models and what not).
//
// Thread contract: Start once; Ready from any thread; the destructor stops the polling.
#ifndef KUBE_FANOUT_TESTS_LOAD_READINESS_H_
#define KUBE_FANOUT_TESTS_LOAD_READINESS_H_

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "tests/tools/api_client.h"

namespace kf::load {

class ReadinessProbe {
 public:
  // `readyz`: one plain-HTTP endpoint per replica, in the order of the replicas' addresses.
  ReadinessProbe(std::vector<tools::Endpoint> readyz, std::chrono::milliseconds interval);
  ~ReadinessProbe();
  ReadinessProbe(const ReadinessProbe&) = delete;
  ReadinessProbe& operator=(const ReadinessProbe&) = delete;

  // Resolves the endpoints and starts polling; every replica counts as ready until answered.
  absl::Status Start();
  bool Ready(size_t replica) const;
  bool Alive(size_t replica) const;
  size_t size() const { return readyz_.size(); }
  // Times a replica went from ready to not ready, and back (over all replicas).
  uint64_t went_unready() const { return went_unready_.load(std::memory_order_relaxed); }
  uint64_t went_ready() const { return went_ready_.load(std::memory_order_relaxed); }

 private:
  boost::asio::awaitable<void> Poll(size_t replica);
  enum class Answer { kReady, kNotReady, kRefused, kNone };
  boost::asio::awaitable<Answer> Probe(const boost::asio::ip::tcp::endpoint& address,
                                       const std::string& request);

  const std::vector<tools::Endpoint> readyz_;
  const std::chrono::milliseconds interval_;
  std::vector<boost::asio::ip::tcp::endpoint> addresses_;
  std::unique_ptr<std::atomic<bool>[]> ready_, alive_;
  std::atomic<uint64_t> went_unready_{0}, went_ready_{0};
  boost::asio::io_context ioc_{1};
  std::thread thread_;
};

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_READINESS_H_
