#include "proxy/passthrough/upstream_request.h"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "common/use_nothrow.h"
#include "proxy/edge/deadlines.h"
#include "proxy/edge/field_syntax.h"
#include "proxy/edge/hop_by_hop.h"

namespace kf {
namespace {

namespace http = beast::http;

// One step of the serializer; Beast asks for the next buffer with need_buffer, not an error.
asio::awaitable<beast::error_code> WriteStep(AnyStream& up,
                                             http::request_serializer<http::buffer_body>& sr) {
  up.tcp().expires_after(kWriteTimeout);
  auto [ec, n] = co_await http::async_write(up, sr, use_nothrow);
  if (ec == http::error::need_buffer) ec = {};
  co_return ec;
}

}  // namespace

std::string ForwardedFor(const http::fields& fields, std::string_view remote_ip) {
  std::string prior;
  for (const auto& f : fields) {
    if (!absl::EqualsIgnoreCase(ToAbsl(f.name_string()), "X-Forwarded-For")) continue;
    absl::StrAppend(&prior, prior.empty() ? "" : ", ", ToAbsl(f.value()));
  }
  if (prior.empty()) return std::string(remote_ip);
  const size_t room = kMaxForwardedForBytes - std::min(kMaxForwardedForBytes, remote_ip.size() + 2);
  std::string_view kept(prior);
  while (kept.size() > room) {
    const size_t comma = kept.find(',');
    if (comma == std::string_view::npos) {
      kept = {};
      break;
    }
    kept.remove_prefix(comma + 1);
    while (!kept.empty() && (kept.front() == ' ' || kept.front() == '\t')) kept.remove_prefix(1);
  }
  if (kept.empty()) return std::string(remote_ip);
  return absl::StrCat(ToAbsl(kept), ", ", ToAbsl(remote_ip));
}

absl::StatusOr<http::request<http::buffer_body>> UpstreamRequestHead(
    const Request& r, const UpstreamEndpoint& ep, bool upgrade, const RequestHeaderNames& names,
    const Identity* as_user) {
  http::request<http::buffer_body> out;
  out.method_string(r.method_string);
  out.target(absl::StrCat(ep.base_path,
                          r.upstream_target ? ToAbsl(*r.upstream_target) : ToAbsl(r.target)));
  out.version(11);
  CopyEndToEndFields(r.headers, out.base());
  names.Strip(out.base());
  // The client's own fields first: what is wrong there is the client's (400).
  out.set(http::field::host, ep.HostHeader());
  out.set("X-Forwarded-For", ForwardedFor(r.headers, r.remote_ip));
  if (upgrade) {
    out.set(http::field::connection, "Upgrade");
    out.set(http::field::upgrade, r.headers[http::field::upgrade]);
  }
  if (absl::Status s = CheckRequestHead(out.method_string(), out.target(), out.base()); !s.ok()) {
    return s;
  }
  if (as_user != nullptr) {
    if (absl::Status s = names.Assert(*as_user, out.base()); !s.ok()) {
      return absl::InternalError(absl::StrCat("cannot assert the user upstream: ", s.message()));
    }
    // Assert checked its own fields; the whole head once more, as it will go.
    if (absl::Status s = CheckFields(out.base()); !s.ok()) return absl::InternalError(s.message());
  }
  if (r.body.chunked()) out.chunked(true);
  return out;
}

absl::StatusOr<Http2HeaderList> Http2RequestHead(const http::request<http::buffer_body>& head,
                                                 bool tls) {
  Http2HeaderList out;
  out.reserve(std::distance(head.begin(), head.end()) + 4);
  out.emplace_back(":method", std::string(head.method_string()));
  out.emplace_back(":scheme", tls ? "https" : "http");
  out.emplace_back(":authority", std::string(head[http::field::host]));
  out.emplace_back(":path", std::string(head.target()));
  for (const auto& f : head) {
    std::string name = absl::AsciiStrToLower(ToAbsl(f.name_string()));
    const std::string_view value = f.value();
    if (name == "host" || name == "connection" || name == "keep-alive" ||
        name == "proxy-connection" || name == "transfer-encoding" || name == "upgrade" ||
        (name == "te" && !absl::EqualsIgnoreCase(ToAbsl(value), "trailers"))) {
      continue;
    }
    if (!IsFieldName(name) || !IsFieldValue(value) || value.size() > kMaxFieldBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid header field ", LogEscaped(name), " for HTTP/2"));
    }
    out.emplace_back(std::move(name), std::string(value));
  }
  for (size_t i = 0; i < 4; ++i) {
    if (out[i].second.empty() || !IsFieldValue(out[i].second)) {
      return absl::InvalidArgumentError(absl::StrCat("invalid ", out[i].first, " for HTTP/2"));
    }
  }
  return out;
}

asio::awaitable<beast::error_code> SendRequest(Request& r, AnyStream& up,
                                               http::request<http::buffer_body>& req,
                                               bool* body_write_failed) {
  *body_write_failed = false;
  http::request_serializer<http::buffer_body> sr(req);
  const bool whole = r.whole_body && !r.whole_body->empty();
  req.body().data = nullptr;
  req.body().more = !r.body.done() || whole;
  up.tcp().expires_after(kWriteTimeout);
  auto [hec, hn] = co_await http::async_write_header(up, sr, use_nothrow);
  if (hec) co_return hec;
  const auto failed = [body_write_failed](beast::error_code ec) {
    *body_write_failed = true;
    return ec;
  };
  if (whole) {
    req.body().data = r.whole_body->data();
    req.body().size = r.whole_body->size();
    req.body().more = false;
    if (auto ec = co_await WriteStep(up, sr)) co_return failed(ec);
  }
  std::array<char, kRelayPiece> buf;
  while (!r.body.done()) {
    auto [rec, n] = co_await r.body.ReadSome(buf);
    if (rec) co_return rec;
    req.body().more = !r.body.done();
    if (n == 0 && req.body().more) continue;
    req.body().data = n == 0 ? nullptr : buf.data();
    req.body().size = n;
    if (auto ec = co_await WriteStep(up, sr)) co_return failed(ec);
  }
  if (!sr.is_done()) {
    req.body().data = nullptr;
    req.body().more = false;
    if (auto ec = co_await WriteStep(up, sr)) co_return failed(ec);
  }
  co_return beast::error_code{};
}

}  // namespace kf
