// libFuzzer target: the bytes of an HTTP/2 connection (proxy/edge/http2_session.h, nghttp2's server
// session and kube-fanout's callbacks). The input is what the client sent after its preface;
// then the client half-closes. Two readings of the input:
//  - first byte below 0x80: the bytes as they are (frames the fuzzer makes itself);
//  - otherwise a script of client frames, so that every input is mostly well-formed frames
//    that reach the session's bounds: request heads HPACK-encoded (long fields among them),
//    split into HEADERS and CONTINUATION sequences (some never ended), RST_STREAM right after a
//    stream's HEADERS, DATA on GETs and POSTs, WINDOW_UPDATE, PING, SETTINGS, raw frames.
// The session runs with small limits (a 50 ms header-block deadline, 5 resets at once, 64 KiB
// of heads per connection) so they are all met. Every stream's request body is read (bounded)
// and answered "ok", except /hold, which waits up to 20 ms for its client to reset it. The
// session must not crash, leak or overrun, and no exception may leave it; it runs for at most
// a second per input.
#include <nghttp2/nghttp2.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "proxy/edge/any_stream.h"
#include "proxy/edge/http2_session.h"
#include "proxy/edge/pipeline.h"
#include "proxy/edge/request.h"
#include "proxy/edge/response.h"
#include "tests/fuzz/connection_fixture.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

class Ok : public kf::Handler {
 public:
  asio::awaitable<bool> Serve(kf::Exchange& x) override {
    if (x.request.target == "/hold") {
      asio::steady_timer wait(co_await asio::this_coro::executor, std::chrono::milliseconds(20));
      x.stop.cancel_hook = [&wait] { wait.cancel(); };
      co_await wait.async_wait(asio::as_tuple(asio::use_awaitable));
      x.stop.cancel_hook = nullptr;
    }
    auto body = co_await kf::ReadWholeBody(x.request.body, 1 << 20);
    const std::string text = body ? "ok" : "too big";  // Named: GCC 12 and temporaries.
    co_await kf::WriteWhole(*x.response, 200, "text/plain", text);
    co_return true;
  }
};

// Reads the script: bytes taken from the front, zeros once it is spent.
class Script {
 public:
  Script(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - std::min(size_, at_));
    std::string out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  std::string f;
  const size_t n = std::min<size_t>(payload.size(), (1 << 24) - 1);
  f += {static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
  f += {static_cast<char>(type), static_cast<char>(flags)};
  f += {static_cast<char>(stream >> 24), static_cast<char>(stream >> 16),
        static_cast<char>(stream >> 8), static_cast<char>(stream)};
  f.append(payload.substr(0, n));
  return f;
}

// Turns a script into client frames; the HPACK encoder is the client's, so its dynamic table
// follows the blocks sent (a block cut short leaves the server's table behind: as an attacker
// would).
class Frames {
 public:
  Frames() { nghttp2_hd_deflate_new(&deflater_, 4096); }
  ~Frames() { nghttp2_hd_deflate_del(deflater_); }
  Frames(const Frames&) = delete;
  Frames& operator=(const Frames&) = delete;

  std::string Make(Script& in) {
    std::string out;
    while (!in.done() && out.size() < (4 << 20)) {
      const uint8_t op = in.Byte();
      switch (op % 8) {
        case 0:
        case 1:
          out += Headers(in, op);
          break;
        case 2:
          out += Frame(NGHTTP2_RST_STREAM, 0, Stream(in), Code(in));
          break;
        case 3:
          out += Frame(NGHTTP2_DATA, in.Byte() & NGHTTP2_FLAG_END_STREAM, Stream(in),
                       std::string(in.Byte() * 64u, 'd'));
          break;
        case 4:
          out += Frame(NGHTTP2_WINDOW_UPDATE, 0, in.Byte() % 2 ? Stream(in) : 0, Code(in));
          break;
        case 5:
          out += Frame(NGHTTP2_PING, in.Byte() & NGHTTP2_FLAG_ACK, 0, in.Bytes(8));
          break;
        case 6:
          out += Frame(NGHTTP2_SETTINGS, 0, 0, in.Bytes(6 * (in.Byte() % 4)));
          break;
        default: {
          const uint8_t type = in.Byte() % 10, flags = in.Byte();
          const uint32_t stream = Stream(in);
          out += Frame(type, flags, stream, in.Bytes(in.Byte()));
          break;
        }
      }
    }
    return out;
  }

 private:
  // A stream id: a new one (the next odd), or one of the last few.
  uint32_t Stream(Script& in) {
    const uint8_t b = in.Byte();
    if (b % 4 == 0 || last_ < 1) {
      last_ += 2;
      return static_cast<uint32_t>(last_);
    }
    return std::max<int32_t>(1, last_ - 2 * (b % 8));
  }
  static std::string Code(Script& in) { return in.Bytes(4); }

  std::string Headers(Script& in, uint8_t op) {
    static constexpr const char* kPaths[] = {"/", "/hold", "/api/v1/pods?watch=1", "/x"};
    static constexpr const char* kMethods[] = {"GET", "POST", "HEAD", "DELETE"};
    const uint8_t shape = in.Byte();
    std::vector<std::pair<std::string, std::string>> h = {{":method", kMethods[shape % 4]},
                                                          {":path", kPaths[(shape >> 2) % 4]},
                                                          {":scheme", "http"},
                                                          {":authority", "x"}};
    const uint8_t fields = in.Byte() % 4;
    for (uint8_t i = 0; i < fields; ++i) {
      // Up to 70,000 bytes: past the 65,533 a head can hold and nghttp2's 65,536.
      const size_t size =
          (static_cast<size_t>(in.Byte()) << 8 | in.Byte()) + (op & 0x80 ? 4466 : 0);
      h.emplace_back("x-f" + std::to_string(i), std::string(std::min<size_t>(size, 70000), 'v'));
    }
    std::vector<nghttp2_nv> nv;
    for (auto& [n, v] : h) {
      nv.push_back({reinterpret_cast<uint8_t*>(n.data()), reinterpret_cast<uint8_t*>(v.data()),
                    n.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    }
    std::string block(nghttp2_hd_deflate_bound(deflater_, nv.data(), nv.size()), '\0');
    const ssize_t n = nghttp2_hd_deflate_hd(deflater_, reinterpret_cast<uint8_t*>(block.data()),
                                            block.size(), nv.data(), nv.size());
    block.resize(n > 0 ? static_cast<size_t>(n) : 0);
    const uint32_t stream = Stream(in);
    const uint8_t split = in.Byte();
    const uint8_t end_stream = split & 0x80 ? NGHTTP2_FLAG_END_STREAM : 0;
    // Into HEADERS and up to 15 CONTINUATIONs; with bit 6 the last one lacks END_HEADERS.
    const size_t continuations = split & 0x0f;
    const bool unfinished = split & 0x40;
    const size_t piece = block.size() / (continuations + 1) + 1;
    std::string out;
    for (size_t i = 0, at = 0; i <= continuations; ++i, at += piece) {
      const bool last = i == continuations;
      uint8_t flags = last && !unfinished ? NGHTTP2_FLAG_END_HEADERS : 0;
      if (i == 0) flags |= end_stream;
      const std::string_view part =
          at < block.size() ? std::string_view(block).substr(at, piece) : std::string_view();
      out += Frame(i == 0 ? NGHTTP2_HEADERS : NGHTTP2_CONTINUATION, flags, stream, part);
    }
    if (split & 0x20) out += Frame(NGHTTP2_RST_STREAM, 0, stream, std::string("\0\0\0\x8", 4));
    return out;
  }

  nghttp2_hd_deflater* deflater_ = nullptr;
  int32_t last_ = -1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* fixture = new kf::fuzz::OneHandlerPipeline<Ok>();
  asio::io_context ioc;
  kf::fuzz::LoopbackPair pair(ioc);
  kf::AnyStream stream(pair.Accept());
  std::string received(kf::kHttp2Preface);
  if (size > 0 && data[0] >= 0x80) {
    Script script(data + 1, size - 1);
    Frames frames;
    received += Frame(NGHTTP2_SETTINGS, 0, 0, "");
    received += frames.Make(script);
  } else {
    received.append(reinterpret_cast<const char*>(data), size);
  }
  pair.client.shutdown(asio::ip::tcp::socket::shutdown_send);
  kf::Http2Limits limits;
  limits.header_block_timeout = std::chrono::milliseconds(50);
  limits.stream_reset_burst = 5;
  limits.stream_reset_rate = 1;
  limits.max_header_bytes_per_connection = 64 * 1024;
  auto session =
      std::make_shared<kf::Http2Session>(stream, "fuzz", "127.0.0.1", *fixture->pipeline,
                                         fixture->stats.transport, kf::ClientCertificate{}, limits);
  asio::co_spawn(
      ioc, [session, received]() mutable { return session->Run(std::move(received)); },
      asio::detached);
  session.reset();
  ioc.run_for(std::chrono::seconds(1));
  return 0;
}
