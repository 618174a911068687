#include "server/worker.h"

#include <boost/asio/post.hpp>
#include <vector>

#include "edge/http_session.h"

namespace kf {

Worker::Worker(const UpstreamConfig& upstream, asio::ssl::context& passthrough_tls,
               asio::ssl::context& own_tls, std::chrono::milliseconds dial_timeout,
               const UpstreamConfig* events)
    : guard_(asio::make_work_guard(ioc_)),
      pool_(ioc_, upstream, passthrough_tls, dial_timeout),
      own_pool_(ioc_, upstream, own_tls, dial_timeout) {
  if (events != nullptr) {
    events_pool_ = std::make_unique<UpstreamPool>(ioc_, *events, passthrough_tls, dial_timeout);
    events_own_pool_ = std::make_unique<UpstreamPool>(ioc_, *events, own_tls, dial_timeout);
  }
}

Worker::~Worker() {
  StopNow();
  Join();
}

void Worker::Start() {
  thread_ = std::thread([this] { ioc_.run(); });
}

void Worker::Release() { guard_.reset(); }

void Worker::StopNow() {
  guard_.reset();
  ioc_.stop();
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::StopSessions() {
  // Copy first: a session may unregister itself while being stopped.
  std::vector<HttpSession*> sessions(sessions_.begin(), sessions_.end());
  for (HttpSession* s : sessions) {
    if (sessions_.count(s) > 0) s->Stop();
  }
}

}  // namespace kf
