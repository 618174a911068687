// Shared by the fuzz targets that feed a client connection to a server session (http1_fuzz,
// http2_fuzz): a Pipeline whose every request goes to one handler, and a loopback TCP pair.
#ifndef KUBE_FANOUT_TESTS_FUZZ_CONNECTION_FIXTURE_H_
#define KUBE_FANOUT_TESTS_FUZZ_CONNECTION_FIXTURE_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <optional>
#include <string_view>

#include "common/log.h"
#include "proxy/edge/pipeline.h"

namespace kf::fuzz {

template <class H>
struct OneHandlerPipeline {
  OneHandlerPipeline() {
    PipelineStages stages;
    stages.routes.is_local = [](std::string_view) { return true; };
    stages.local = &handler;
    stages.relay = &handler;
    pipeline.emplace(std::move(stages), log, stats);
  }
  Logger log{2, Logger::Level::kError};
  RouteStats stats;
  H handler;
  std::optional<Pipeline> pipeline;
};

// A connected pair on 127.0.0.1: `client` for the input's bytes, `server` for the session.
struct LoopbackPair {
  explicit LoopbackPair(boost::asio::io_context& ioc)
      : acceptor(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0}), client(ioc) {
    client.connect(acceptor.local_endpoint());
  }
  boost::beast::tcp_stream Accept() { return boost::beast::tcp_stream(acceptor.accept()); }

  boost::asio::ip::tcp::acceptor acceptor;
  boost::asio::ip::tcp::socket client;
};

}  // namespace kf::fuzz

#endif  // KUBE_FANOUT_TESTS_FUZZ_CONNECTION_FIXTURE_H_
