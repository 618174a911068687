// Passthrough: forwards one client request to the upstream and streams the answer back, both
// bodies in bounded pieces (never held whole), the response flushed as it arrives so a watch's
// events reach the client one by one. Carries the client's own credentials and adds none;
// drops hop-by-hop fields (RFC 9110 §7.6.1); tunnels protocol upgrades (kubectl exec, attach,
// port-forward) byte for byte once the upstream answers 101.
//
// Runs inside the owning HttpSession's coroutine on its worker thread.
#ifndef KUBE_FANOUT_PASSTHROUGH_PASSTHROUGH_H_
#define KUBE_FANOUT_PASSTHROUGH_PASSTHROUGH_H_

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <functional>
#include <string>

#include "common/any_stream.h"
#include "passthrough/coalescer.h"
#include "edge/request_info.h"
#include "edge/request_parser.h"
#include "upstream/upstream_pool.h"

namespace kf {

namespace http = beast::http;

struct RelayOutcome {
  int status = 0;                // HTTP status sent to the client; 0 if nothing was sent.
  uint64_t bytes_out = 0;        // Response body bytes sent to the client.
  bool client_reusable = false;  // The client connection may serve another request.
  bool upgraded = false;         // A tunnel ran after a 101.
  std::string upstream;          // Endpoint URL used.
  std::string error;             // Why the relay ended early, if it did.
};

struct RelayRequest {
  AnyStream& client;
  beast::flat_buffer& client_buffer;
  RequestParser& parser;  // Header read, body not yet.
  const RequestInfo& info;
  std::string remote_ip;
  UpstreamPool& pool;
  // Set while relaying: what HttpSession::Stop() calls to end a watch at the next event
  // boundary. Reset before Relay returns.
  std::function<void()>& stop_hook;
  const bool& stopping;
  // The body, already read whole from the client (the parser is done); null: stream it.
  const std::string* body = nullptr;
  // When set, the response relayed is also kept here (up to its limit) for coalesced readers.
  CapturedResponse* capture = nullptr;
};

// Relays the request. Errors before the response header went out are answered by the caller
// (outcome.status == 0, outcome.error set); later errors end the client connection.
asio::awaitable<RelayOutcome> Relay(RelayRequest& request);

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_PASSTHROUGH_H_
