#include "tests/proxy/edge/test_support.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kf::test {

bool RunUntil(asio::io_context& ioc, const std::function<bool()>& done,
              std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (ioc.stopped()) ioc.restart();
    ioc.run_for(std::chrono::milliseconds(10));
  }
  return true;
}

Spawned Spawn(asio::io_context& ioc, asio::awaitable<void> a) {
  Spawned s;
  asio::co_spawn(ioc, std::move(a), [done = s.done, error = s.error](std::exception_ptr e) {
    *error = e;
    *done = true;
  });
  return s;
}

void Run(asio::io_context& ioc, asio::awaitable<void> a, std::chrono::milliseconds limit) {
  const Spawned s = Spawn(ioc, std::move(a));
  const bool ended = RunUntil(
      ioc, [&s] { return s.finished(); }, limit);
  s.Rethrow();
  if (!ended) throw std::runtime_error("coroutine did not finish");
}

namespace {

asio::ip::tcp::socket Accepted(asio::io_context& ioc, asio::ip::tcp::socket& client) {
  asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  client.connect(acceptor.local_endpoint());
  return acceptor.accept();
}

}  // namespace

LoopbackPair::LoopbackPair(asio::io_context& ioc)
    : client(ioc), server(beast::tcp_stream(Accepted(ioc, client))) {}

std::string LoopbackPair::ReadAvailable() {
  std::string out;
  client.non_blocking(true);
  char buf[8192];
  for (;;) {
    beast::error_code ec;
    const size_t n = client.read_some(asio::buffer(buf), ec);
    out.append(buf, n);
    if (ec == asio::error::eof) closed = true;
    if (ec) break;  // would_block: nothing more now; eof: the server closed.
  }
  client.non_blocking(false);
  return out;
}

int ParsedResponse::FieldCount(std::string_view name) const {
  const size_t end_of_head = raw.find("\r\n\r\n");
  const std::string_view head = std::string_view(raw).substr(0, end_of_head);
  const std::string needle = "\r\n" + std::string(name) + ":";
  int count = 0;
  for (size_t at = head.find(needle); at != std::string_view::npos;
       at = head.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

ParsedResponse ParseResponse(std::string raw, bool head_request, bool eof) {
  ParsedResponse out;
  out.raw = std::move(raw);
  http::response_parser<http::string_body> parser;
  parser.eager(true);
  parser.skip(head_request);
  parser.body_limit(boost::none);
  out.consumed = parser.put(asio::buffer(out.raw), out.ec);
  if (!out.ec && !parser.is_done() && eof) parser.put_eof(out.ec);
  out.done = parser.is_done();
  if (parser.is_header_done()) out.message = parser.release();
  return out;
}

asio::awaitable<std::pair<beast::error_code, size_t>> FakeBody::ReadSome(std::span<char> into) {
  const size_t n = std::min({into.size(), piece, bytes_.size() - offset_});
  std::memcpy(into.data(), bytes_.data() + offset_, n);
  offset_ += n;
  co_return std::pair<beast::error_code, size_t>{beast::error_code{}, n};
}

TestRequest::TestRequest(http::verb method, std::string target, unsigned version)
    : target_storage(std::move(target)), request{method,         http::to_string(method),
                                                 target_storage, version,
                                                 true,           fields,
                                                 RequestInfo{},  "10.0.0.7",
                                                 body,           std::nullopt} {
  auto info = RequestInfo::Parse(request.method_string, request.target);
  if (!info.ok()) throw std::invalid_argument(std::string(info.status().message()));
  request.info = *std::move(info);
}

asio::awaitable<beast::error_code> RecordingResponse::WriteHead(ResponseHead h) {
  if (fail) co_return fail;
  head = std::move(h);
  co_return beast::error_code{};
}

asio::awaitable<beast::error_code> RecordingResponse::WriteBody(
    std::span<const asio::const_buffer> pieces) {
  if (fail) co_return fail;
  for (const auto& p : pieces) body.append(static_cast<const char*>(p.data()), p.size());
  co_return beast::error_code{};
}

asio::awaitable<beast::error_code> RecordingResponse::End() {
  if (fail) co_return fail;
  ended = true;
  co_return beast::error_code{};
}

asio::awaitable<bool> RecordingResponse::ClientGone() {
  asio::steady_timer never(co_await asio::this_coro::executor,
                           asio::steady_timer::time_point::max());
  co_await never.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return false;
}

void RecordingResponse::WatchClient(const asio::any_io_executor& executor,
                                    std::function<void(bool)> gone) {
  watch_executor = executor;
  watch_gone = std::move(gone);
}

void RecordingResponse::StopWatchingClient() {
  if (!watch_gone) return;
  asio::post(*watch_executor, [gone = std::move(watch_gone)] { gone(false); });
  watch_gone = nullptr;
}

asio::awaitable<beast::error_code> RecordingResponse::Continue() {
  ++continues;
  co_return fail;
}

namespace {

asio::awaitable<void> Reached(NextProbe* probe, Exchange& x) {
  ++probe->calls;
  if (probe->then) co_await probe->then(x);
}

}  // namespace

Next NextProbe::next() {
  return [this](Exchange& x) { return Reached(this, x); };
}

void CheckRefused(const FilterCall& call, int status, std::string_view retry_after,
                  std::string_view error) {
  CHECK(call.probe.calls == 0);
  CHECK(call.x.answer == Answer::kRejected);
  CHECK(call.x.error == error);
  REQUIRE(call.resp.head.has_value());
  CHECK(call.resp.head->status == status);
  CHECK(call.resp.head->fields[http::field::retry_after] == retry_after);
  CHECK(call.resp.head->fields[http::field::content_type] == "application/json");
  CHECK(call.resp.body.find("\"code\":" + std::to_string(status)) != std::string::npos);
  CHECK(call.resp.ended);
}

namespace {

UpstreamConfig PlainHttpTo(const asio::ip::tcp::acceptor& acceptor) {
  UpstreamConfig config;
  config.endpoints.push_back(
      UpstreamEndpoint{false, "127.0.0.1", acceptor.local_endpoint().port(), ""});
  return config;
}

}  // namespace

FakeUpstream::FakeUpstream(asio::io_context& ioc)
    : acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0}),
      config(PlainHttpTo(acceptor)),
      pool(ioc, config, tls, std::chrono::seconds(2), &stats) {}

asio::awaitable<void> FakeUpstream::ServeOne(FakeUpstream* up) {
  constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
  auto [aec, socket] = co_await up->acceptor.async_accept(use_nothrow);
  if (aec) co_return;
  beast::flat_buffer buffer;
  auto [rec, rn] = co_await http::async_read(socket, buffer, up->request, use_nothrow);
  if (rec) co_return;
  auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(up->answer), use_nothrow);
  if (wec) co_return;
  if (up->hold.count() > 0) {
    asio::steady_timer timer(socket.get_executor());
    timer.expires_after(up->hold);
    co_await timer.async_wait(use_nothrow);
  }
  beast::error_code ignored;
  socket.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> ServeEach(Filter& filter, std::vector<FilterCall*> calls) {
  for (FilterCall* call : calls) co_await filter.Serve(call->x, call->next);
}

namespace {

// The files WriteSelfSigned wrote, removed when the test process exits (a test that fails half
// way leaves none behind in the shared temporary directory either).
class WrittenFiles {
 public:
  void Add(std::string path) {
    std::lock_guard lock(mutex_);
    paths_.push_back(std::move(path));
  }
  ~WrittenFiles() {
    for (const std::string& path : paths_) {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> paths_;
};

WrittenFiles& Written() {
  static WrittenFiles files;
  return files;
}

}  // namespace

std::pair<std::string, std::string> WriteSelfSigned(const std::string& name) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  REQUIRE((key != nullptr && cert != nullptr));
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, X509_get_subject_name(cert));
  X509_set_pubkey(cert, key);
  REQUIRE(X509_sign(cert, key, EVP_sha256()) > 0);
  // Per process: ctest -j runs the test cases that write the same name side by side.
  const auto dir = std::filesystem::temp_directory_path();
  const std::string file = absl::StrCat(name, "-", getpid());
  const std::string crt_path = (dir / (file + ".crt")).string();
  const std::string key_path = (dir / (file + ".key")).string();
  Written().Add(crt_path);
  Written().Add(key_path);
  FILE* f = std::fopen(crt_path.c_str(), "w");
  REQUIRE(f != nullptr);
  PEM_write_X509(f, cert);
  std::fclose(f);
  f = std::fopen(key_path.c_str(), "w");
  REQUIRE(f != nullptr);
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(cert);
  EVP_PKEY_free(key);
  return {crt_path, key_path};
}

}  // namespace kf::test
