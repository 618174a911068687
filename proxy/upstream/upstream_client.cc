#include "proxy/upstream/upstream_client.h"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/api/json.h"
#include "common/api/watch_framing.h"
#include "common/strings.h"
#include "common/use_nothrow.h"
#include "proxy/edge/field_syntax.h"

namespace kf {
namespace {

http::request<http::string_body> MakeRequest(const UpstreamEndpoint& ep, http::verb method,
                                             const std::string& target,
                                             const std::string& authorization, std::string body,
                                             std::string_view accept = "application/json") {
  http::request<http::string_body> req(method, absl::StrCat(ep.base_path, target), 11);
  req.set(http::field::host, ep.HostHeader());
  req.set(http::field::user_agent, "kube-fanout");
  req.set(http::field::accept, accept);
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

template <class Fields>
std::optional<std::chrono::seconds> RetryAfterOf(const Fields& fields) {
  const auto it = fields.find(http::field::retry_after);
  if (it == fields.end()) return std::nullopt;
  return ParseRetryAfter(std::string_view(it->value().data(), it->value().size()));
}

}  // namespace

std::optional<std::chrono::seconds> ParseRetryAfter(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty() || value.size() > 9) return std::nullopt;
  int64_t n = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return std::chrono::seconds(n);
}

std::chrono::milliseconds RetryWait(std::optional<std::chrono::seconds> retry_after,
                                    std::chrono::milliseconds backoff,
                                    std::chrono::milliseconds cap) {
  if (!retry_after) return backoff;
  const std::chrono::milliseconds asked = std::min<std::chrono::milliseconds>(*retry_after, cap);
  return std::max(backoff, asked);
}

asio::awaitable<absl::StatusOr<UpstreamResponse>> UpstreamCall(
    UpstreamPool& pool, http::verb method, std::string target, std::string authorization,
    std::string body, std::chrono::milliseconds timeout, std::string_view accept) {
  // `timeout` bounds the whole call, a new connection's dial included.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int attempt = 0;; ++attempt) {
    auto lease = co_await pool.Acquire(/*allow_reuse=*/attempt == 0, deadline);
    if (!lease.ok()) co_return lease.status();
    AnyStream& s = *lease->stream;
    auto req =
        MakeRequest(pool.endpoint(lease->endpoint), method, target, authorization, body, accept);
    // Never written with bytes HTTP forbids (a credential file with a stray newline).
    if (absl::Status bad = CheckRequestHead(req.method_string(), req.target(), req.base());
        !bad.ok()) {
      pool.Release(*std::move(lease));
      co_return absl::InternalError(absl::StrCat("upstream request not sent: ", bad.message()));
    }
    s.tcp().expires_at(deadline);
    auto [wec, wn] = co_await http::async_write(s, req, use_nothrow);
    beast::flat_buffer buf;
    BoundedParser<false, http::string_body> parser;
    parser.body_limit(boost::none);
    beast::error_code ec = wec;
    if (!ec) {
      auto [rec, rn] = co_await http::async_read(s, buf, parser, use_nothrow);
      ec = rec;
    }
    if (ec) {
      if (lease->reused && attempt == 0) {  // A stale keep-alive connection.
        pool.FailedInUse();
        continue;
      }
      co_return absl::UnavailableError(
          absl::StrCat("upstream ", pool.endpoint(lease->endpoint).Url(), ": ", ec.message()));
    }
    auto& res = parser.get();
    UpstreamResponse out{static_cast<int>(res.result_int()), std::move(res.body()),
                         std::string(res[http::field::content_type]), RetryAfterOf(res)};
    if (res.keep_alive()) {
      s.tcp().expires_never();
      pool.Release(*std::move(lease));
    }
    co_return out;
  }
}

asio::awaitable<absl::StatusOr<std::variant<std::unique_ptr<UpstreamWatch>, UpstreamResponse>>>
UpstreamWatch::Open(UpstreamPool& pool, std::string target, std::string authorization,
                    std::chrono::milliseconds idle_timeout, std::string_view accept,
                    bool progress_request, std::string_view accept_encoding) {
  // A watch holds its connection for minutes: always a fresh one, never returned to the pool.
  auto lease = co_await pool.Acquire(/*allow_reuse=*/false);
  if (!lease.ok()) co_return lease.status();
  auto watch =
      std::unique_ptr<UpstreamWatch>(new UpstreamWatch(std::move(lease->stream), idle_timeout));
  AnyStream& s = *watch->stream_;
  auto req = MakeRequest(pool.endpoint(lease->endpoint), http::verb::get, target, authorization, "",
                         accept);
  if (progress_request) req.set(std::string(kProgressRequestHeader), "1");
  if (!accept_encoding.empty()) req.set(http::field::accept_encoding, accept_encoding);
  if (absl::Status bad = CheckRequestHead(req.method_string(), req.target(), req.base());
      !bad.ok()) {
    co_return absl::InternalError(absl::StrCat("upstream watch not sent: ", bad.message()));
  }
  s.tcp().expires_after(std::chrono::seconds(30));
  auto [wec, wn] = co_await http::async_write(s, req, use_nothrow);
  if (wec) co_return absl::UnavailableError(absl::StrCat("upstream watch: ", wec.message()));
  watch->parser_.body_limit(boost::none);
  auto [hec, hn] = co_await http::async_read_header(s, watch->buffer_, watch->parser_, use_nothrow);
  if (hec) co_return absl::UnavailableError(absl::StrCat("upstream watch: ", hec.message()));
  const int status = static_cast<int>(watch->parser_.get().result_int());
  if (status != 200) {
    // Read the (small) error body.
    UpstreamResponse res{status, "", std::string(watch->parser_.get()[http::field::content_type]),
                         RetryAfterOf(watch->parser_.get())};
    for (int i = 0; i < 64; ++i) {
      auto line = co_await watch->NextLine();
      if (!line.ok()) break;
      absl::StrAppend(&res.body, *line, "\n");
    }
    absl::StrAppend(&res.body, watch->pending_);
    co_return res;
  }
  co_return std::move(watch);
}

asio::awaitable<absl::StatusOr<std::string>> UpstreamWatch::NextLine() {
  size_t scanned = 0;  // No newline in pending_[0, scanned).
  for (;;) {
    const auto line = WatchFraming::Cut(WatchFraming::Format::kJsonLines, pending_, scanned);
    if (line.complete) {
      std::string out(line.bytes);
      pending_.erase(0, line.consumed);
      co_return out;
    }
    scanned = pending_.size();
    // One event is one object; nothing the apiserver stores comes near this.
    if (line.size > JsonLimits{}.max_bytes) {
      co_return absl::DataLossError("upstream watch: event larger than the JSON size limit");
    }
    const absl::Status more = co_await ReadMore();
    if (!more.ok()) co_return more;
  }
}

asio::awaitable<absl::StatusOr<std::string>> UpstreamWatch::NextFrame() {
  for (;;) {
    const auto frame = WatchFraming::Cut(WatchFraming::Format::kLengthPrefixed, pending_);
    // The same bound as a JSON event: one object.
    if (frame.size > JsonLimits{}.max_bytes) {
      co_return absl::DataLossError("upstream watch: frame larger than the size limit");
    }
    if (frame.complete) {
      std::string out(frame.bytes);
      pending_.erase(0, frame.consumed);
      co_return out;
    }
    const absl::Status more = co_await ReadMore();
    if (!more.ok()) co_return more;
  }
}

asio::awaitable<absl::StatusOr<std::string>> UpstreamWatch::NextEvent(bool protobuf) {
  if (protobuf) co_return co_await NextFrame();
  co_return co_await NextLine();
}

asio::awaitable<absl::Status> UpstreamWatch::ReadMore() {
  std::array<char, 16 * 1024> buf;
  if (parser_.is_done()) co_return absl::NotFoundError("watch ended");
  parser_.get().body().data = buf.data();
  parser_.get().body().size = buf.size();
  stream_->tcp().expires_after(idle_);
  auto [ec, n] = co_await http::async_read_some(*stream_, buffer_, parser_, use_nothrow);
  if (ec == http::error::need_buffer) ec = {};
  if (ec == beast::error::timeout) {
    co_return absl::DeadlineExceededError(absl::StrCat(
        "upstream watch: nothing received for ", absl::FormatDuration(absl::FromChrono(idle_))));
  }
  if (ec) co_return absl::UnavailableError(absl::StrCat("upstream watch: ", ec.message()));
  pending_.append(buf.data(), buf.size() - parser_.get().body().size);
  co_return absl::OkStatus();
}

}  // namespace kf
