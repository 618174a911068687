// A scripted apiserver stand-in for reflector tests (reflector_test.cc, reflector_stop_test.cc).
#ifndef KUBE_FANOUT_TESTS_PROXY_SYNC_SCRIPTED_UPSTREAM_H_
#define KUBE_FANOUT_TESTS_PROXY_SYNC_SCRIPTED_UPSTREAM_H_

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {

inline constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

inline std::string PodList(uint64_t rv, const std::vector<std::string>& items) {
  std::string out = absl::StrCat(R"({"kind":"PodList","apiVersion":"v1","metadata":{)",
                                 R"("resourceVersion":")", rv, R"("},"items":[)");
  for (size_t i = 0; i < items.size(); ++i) absl::StrAppend(&out, i ? "," : "", items[i]);
  return out + "]}";
}

inline std::string Line(std::string_view type, const std::string& object) {
  return absl::StrCat(R"({"type":")", std::string(type), R"(","object":)", object, "}\n");
}

inline std::string Bookmark(uint64_t rv) {
  return Line("BOOKMARK", absl::StrCat(R"({"kind":"Pod","apiVersion":"v1","metadata":)",
                                       R"({"resourceVersion":")", rv, R"("}})"));
}

inline std::string Chunk(std::string_view data) {
  std::string out = absl::StrCat(absl::Hex(data.size()), "\r\n");
  absl::StrAppend(&out, std::string(data), "\r\n");
  return out;
}

// One main watch's answer: its lines, then either the stream's end or silence until the
// reflector leaves.
struct WatchScript {
  std::vector<std::string> lines;
  bool end = false;
};

// An apiserver stand-in: no bookmark template (404), the LIST answers in order (the last one
// again once they run out), the WATCH answers in order (then silence). Records every target.
struct ScriptedUpstream {
  explicit ScriptedUpstream(asio::io_context& ioc) : up(ioc) {}
  FakeUpstream up;
  std::deque<std::string> lists;
  std::deque<WatchScript> watches;
  std::vector<std::string> list_targets;
  std::vector<std::string> watch_targets;
  // While true, a WATCH's answer waits (the request read, nothing sent yet).
  bool hold_watches = false;
  // Fixed answers by exact target (discovery documents), before the rules above: status, body.
  std::map<std::string, std::pair<int, std::string>> documents;
  std::vector<std::string> document_targets;
  std::vector<std::string> document_bodies;  // What was sent with each (a review's body).
  // When set, answers a document's request in its place from what was sent (a review's body).
  std::function<std::pair<int, std::string>(const std::string& target, const std::string& body)>
      respond;

  static asio::awaitable<void> Serve(ScriptedUpstream* s) {
    for (;;) {
      auto [aec, socket] = co_await s->up.acceptor.async_accept(use_nothrow);
      if (aec) co_return;
      asio::co_spawn(s->up.acceptor.get_executor(), Connection(s, std::move(socket)),
                     asio::detached);
    }
  }

  static asio::awaitable<void> Watch(ScriptedUpstream* s, asio::ip::tcp::socket& socket) {
    asio::steady_timer timer(socket.get_executor());
    while (s->hold_watches) {
      timer.expires_after(std::chrono::milliseconds(5));
      co_await timer.async_wait(use_nothrow);
    }
    WatchScript script;
    if (!s->watches.empty()) {
      script = std::move(s->watches.front());
      s->watches.pop_front();
    }
    std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const std::string& line : script.lines) answer += Chunk(line);
    if (script.end) answer += "0\r\n\r\n";
    (void)co_await asio::async_write(socket, asio::buffer(answer), use_nothrow);
    if (script.end) co_return;
    std::string rest;  // Open and silent until the client leaves.
    (void)co_await asio::async_read_until(socket, asio::dynamic_buffer(rest), "\n", use_nothrow);
  }

  static asio::awaitable<void> Connection(ScriptedUpstream* s, asio::ip::tcp::socket socket) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      auto [rec, rn] = co_await http::async_read(socket, buffer, req, use_nothrow);
      if (rec) co_return;
      const std::string target(req.target());
      std::string answer;
      if (auto d = s->documents.find(target); d != s->documents.end()) {
        s->document_targets.push_back(target);
        s->document_bodies.push_back(req.body());
        const auto [status, body] = s->respond ? s->respond(target, req.body()) : d->second;
        answer = absl::StrCat("HTTP/1.1 ", status, " X\r\nContent-Type: application/json\r\n",
                              "Content-Length: ", body.size(), "\r\n\r\n", body);
      } else if (target.find("metadata.name%3D-") != std::string::npos) {
        answer = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
      } else if (target.find("watch=true") != std::string::npos) {
        s->watch_targets.push_back(target);
        co_await Watch(s, socket);
        co_return;
      } else {
        s->list_targets.push_back(target);
        const std::string list = s->lists.front();
        if (s->lists.size() > 1) s->lists.pop_front();
        answer = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n",
                              "Content-Length: ", list.size(), "\r\n\r\n", list);
      }
      auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(answer), use_nothrow);
      if (wec) co_return;
    }
  }
};

}  // namespace kf::test

#endif  // KUBE_FANOUT_TESTS_PROXY_SYNC_SCRIPTED_UPSTREAM_H_
