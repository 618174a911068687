// Worker: one I/O thread with its own io_context, and what lives on that thread only: its
// sessions and its pool of upstream connections. Connections are handed to a worker when
// accepted and stay on it for life, so per-connection state needs no locks or strands.
#ifndef KUBE_FANOUT_SERVER_WORKER_H_
#define KUBE_FANOUT_SERVER_WORKER_H_

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_set>

#include "upstream/access_review.h"
#include "upstream/identity.h"
#include "upstream/upstream_pool.h"
#include "serve/wakeups.h"

namespace kf {

class HttpSession;

class Worker {
 public:
  // `events`: a separate upstream for Events (--events-upstream), or null.
  Worker(const UpstreamConfig& upstream, asio::ssl::context& passthrough_tls,
         asio::ssl::context& own_tls, std::chrono::milliseconds dial_timeout,
         const UpstreamConfig* events = nullptr);
  ~Worker();

  void Start();    // Runs the io_context on a new thread.
  void Release();  // Lets run() return once the work is done.
  void StopNow();  // Abandons outstanding work.
  void Join();

  asio::io_context& ioc() { return ioc_; }
  UpstreamPool& upstream_pool() { return pool_; }  // No identity: passthrough.
  UpstreamPool& own_pool() { return own_pool_; }   // kube-fanout's identity.
  // The pools for Events: the events upstream's when there is one, else the main ones.
  UpstreamPool& events_pool() { return events_pool_ ? *events_pool_ : pool_; }
  UpstreamPool& events_own_pool() { return events_own_pool_ ? *events_own_pool_ : own_pool_; }
  AccessReview& access_review() { return access_; }
  Wakeups& wakeups() { return wakeups_; }
  WhoAmI& who_am_i() { return who_am_i_; }  // Watchers on this thread, woken by the cache.

  // Session registry; called on this worker's thread only. Unregister also ends the count of
  // connections assigned here (AddConnection, by the acceptor).
  void Register(HttpSession* s) { sessions_.insert(s); }
  void Unregister(HttpSession* s) {
    sessions_.erase(s);
    RemoveConnection();
  }
  void AddConnection() { connections_.fetch_add(1, std::memory_order_relaxed); }
  void RemoveConnection() { connections_.fetch_sub(1, std::memory_order_relaxed); }
  int64_t connections() const { return connections_.load(std::memory_order_relaxed); }
  // Asks every session to finish (see HttpSession::Stop). Posted to this thread.
  void StopSessions();

 private:
  asio::io_context ioc_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  UpstreamPool pool_;
  UpstreamPool own_pool_;
  std::unique_ptr<UpstreamPool> events_pool_, events_own_pool_;
  AccessReview access_{std::chrono::seconds(10), std::chrono::seconds(5), 10000};
  Wakeups wakeups_{ioc_.get_executor()};
  WhoAmI who_am_i_{std::chrono::seconds(60), std::chrono::seconds(10), 10000};
  std::unordered_set<HttpSession*> sessions_;
  std::atomic<int64_t> connections_{0};
  std::thread thread_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_WORKER_H_
