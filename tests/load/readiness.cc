#include "tests/load/readiness.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kf::load {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
// An answer slower than this is no answer (kubelet probes default to 1 s too).
constexpr auto kProbeTimeout = std::chrono::seconds(1);
// Unanswered probes in a row before a replica that answered is taken as not ready (kubelet's).
constexpr int kFailureThreshold = 3;

}  // namespace

ReadinessProbe::ReadinessProbe(std::vector<tools::Endpoint> readyz,
                               std::chrono::milliseconds interval)
    : readyz_(std::move(readyz)),
      interval_(interval),
      ready_(std::make_unique<std::atomic<bool>[]>(readyz_.size())),
      alive_(std::make_unique<std::atomic<bool>[]>(readyz_.size())) {
  for (size_t i = 0; i < readyz_.size(); ++i) {
    ready_[i].store(true);
    alive_[i].store(true);
  }
}

ReadinessProbe::~ReadinessProbe() {
  ioc_.stop();
  if (thread_.joinable()) thread_.join();
}

absl::Status ReadinessProbe::Start() {
  tcp::resolver resolver(ioc_);
  for (const tools::Endpoint& e : readyz_) {
    if (e.tls) return absl::InvalidArgumentError("readiness is asked over plain HTTP");
    boost::system::error_code ec;
    auto results = resolver.resolve(e.host, e.port, ec);
    if (ec || results.empty()) {
      return absl::UnavailableError(absl::StrCat("resolve ", e.host, ":", e.port));
    }
    addresses_.push_back(results.begin()->endpoint());
  }
  for (size_t i = 0; i < readyz_.size(); ++i) {
    asio::co_spawn(ioc_, Poll(i), asio::detached);
  }
  thread_ = std::thread([this] { ioc_.run(); });
  return absl::OkStatus();
}

bool ReadinessProbe::Ready(size_t replica) const {
  return ready_[replica].load(std::memory_order_relaxed);
}

bool ReadinessProbe::Alive(size_t replica) const {
  return alive_[replica].load(std::memory_order_relaxed);
}

// Until the destructor stops the io_context: one probe, then a wait of `interval_`.
asio::awaitable<void> ReadinessProbe::Poll(size_t replica) {
  const std::string request =
      absl::StrCat("GET /readyz HTTP/1.1\r\nHost: ", readyz_[replica].host, ":",
                   readyz_[replica].port, "\r\nConnection: close\r\n\r\n");
  asio::steady_timer wait(ioc_);
  int unanswered = 0;
  for (;;) {
    const Answer answer = co_await Probe(addresses_[replica], request);
    unanswered = answer == Answer::kNone ? unanswered + 1 : 0;
    bool ready = ready_[replica].load(std::memory_order_relaxed);
    if (answer != Answer::kNone || unanswered >= kFailureThreshold) {
      ready = answer == Answer::kReady;
      alive_[replica].store(answer != Answer::kRefused, std::memory_order_relaxed);
    }
    const bool was = ready_[replica].exchange(ready, std::memory_order_relaxed);
    if (was && !ready) went_unready_.fetch_add(1, std::memory_order_relaxed);
    if (!was && ready) went_ready_.fetch_add(1, std::memory_order_relaxed);
    wait.expires_after(interval_);
    co_await wait.async_wait(use_nothrow);
  }
}

asio::awaitable<ReadinessProbe::Answer> ReadinessProbe::Probe(const tcp::endpoint& address,
                                                              const std::string& request) {
  // Shared with the deadline's handler, which may run after this returns.
  auto owned = std::make_shared<tcp::socket>(ioc_);
  tcp::socket& socket = *owned;
  asio::steady_timer deadline(ioc_);
  deadline.expires_after(kProbeTimeout);
  deadline.async_wait([owned](boost::system::error_code ec) {
    if (!ec) owned->close(ec);  // Ends the connect, write or read below.
  });
  auto [cec] = co_await socket.async_connect(address, use_nothrow);
  Answer answer = cec == asio::error::connection_refused ? Answer::kRefused : Answer::kNone;
  if (!cec) {
    auto [wec, written] = co_await asio::async_write(socket, asio::buffer(request), use_nothrow);
    std::string text;
    if (!wec) {  // To EOF (or the cap).
      co_await asio::async_read(socket, asio::dynamic_buffer(text, 4096), use_nothrow);
    }
    if (absl::StartsWith(text, "HTTP/1.1 200 ") || absl::StartsWith(text, "HTTP/1.0 200 ")) {
      answer = Answer::kReady;
    } else if (absl::StartsWith(text, "HTTP/1.")) {
      answer = Answer::kNotReady;
    }
  }
  deadline.cancel();
  co_return answer;
}

}  // namespace kf::load
