// Request: one client request as every stage after the transport sees it: the head (method,
// target, fields), its description parsed once (RequestInfo), where it came from, and its body
// as a source to read from. HTTP/1.1 and HTTP/2 alike: nothing here names the transport.
//
// Owned by the session for the request's life; used on the session's thread only.
#ifndef KUBE_FANOUT_EDGE_REQUEST_H_
#define KUBE_FANOUT_EDGE_REQUEST_H_

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/api/request_info.h"

namespace kf {

namespace asio = boost::asio;
namespace beast = boost::beast;

// A request body must arrive whole within --request-timeout of its request's head, over either
// protocol: the apiserver's flag of that name (default 60 s), which covers reading the body. Past
// it the read under way (and every later one) fails with beast::error::timeout, and the request
// can still be answered (proxy/edge/http1_body.h, proxy/edge/http2_stream.h).
inline constexpr std::chrono::milliseconds kRequestBodyDeadline{std::chrono::seconds(60)};

// The request body, read in pieces by whoever forwards or inspects it.
class BodySource {
 public:
  virtual ~BodySource() = default;
  // True once the whole body has been read (at once for requests without one).
  virtual bool done() const = 0;
  // Framed by chunks on the wire (its length unknown in advance).
  virtual bool chunked() const = 0;
  // Reads the next piece into `into`; 0 bytes with no error is allowed before done().
  virtual asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(std::span<char> into) = 0;
  // The whole body's deadline (--request-timeout) passed before it was read.
  virtual bool timed_out() const { return false; }
};

// Who is asking, as the apiserver knows them (user.Info): learned from a verified client
// certificate, a trusted front proxy's fields or a TokenReview.
struct Identity {
  std::string username;
  std::vector<std::string> groups;
  std::string uid;
  std::vector<std::pair<std::string, std::vector<std::string>>> extra;  // Sorted by key.

  bool operator==(const Identity&) const = default;
};

// What a per-identity cap of open watches counts under: the user, and the pod a bound
// ServiceAccount token names (its TokenReview's `authentication.kubernetes.io/pod-uid` extra), so
// each pod of a DaemonSet, which all share one ServiceAccount, has a cap of its own.
std::string WatchCapKey(const Identity& user);

// The client certificate a TLS connection presented, read as the apiserver's x509 authenticator
// reads it (proxy/edge/client_cert.h). Fixed for the connection's life.
struct ClientCertificate {
  bool presented = false;
  // Chains to the --client-ca-file bundle, within its validity, usable for client auth.
  bool verified = false;
  Identity user;      // CN and O values, when verified.
  std::string error;  // Why not verified (or its subject refused), for the log.
  // Verified, but its CommonName or an Organization holds what an identity field cannot carry
  // (proxy/edge/field_syntax.h: a control byte, leading or trailing blanks): it authenticates no
  // one, and the request is refused (401) whatever else it carries, since the apiserver would have
  // taken the certificate's user over any bearer token.
  bool subject_refused = false;
  // A front proxy's (--requestheader-client-ca-file, an allowed name): its requests name
  // their user in request-header fields.
  bool front_proxy = false;

  // The certificate names a user: the apiserver authenticates the request as that user, before
  // and regardless of any bearer token (its x509 authenticator comes first in its chain).
  bool authenticates() const { return verified && !subject_refused && !user.username.empty(); }
  // Presented but not verifiable as a user's: the apiserver refuses the request (401) unless a
  // front proxy's fields or a bearer token authenticate it.
  bool rejected() const { return presented && !verified; }
};

struct Request {
  beast::http::verb method = beast::http::verb::unknown;
  std::string_view method_string;
  std::string_view target;
  unsigned version = 11;  // 10, 11 (HTTP/1.x); 20 for HTTP/2.
  bool keep_alive = true;
  const beast::http::fields& headers;
  RequestInfo info;
  std::string remote_ip;  // The client's address, for X-Forwarded-For and anonymous flows.
  BodySource& body;
  // The body, when a filter had to read it whole (the Event spam filter); later stages send
  // this instead of reading `body`.
  std::optional<std::string> whole_body;
  // The connection's client certificate (TLS listener with --client-ca-file), or null.
  const ClientCertificate* client_cert = nullptr;
  // The target to send upstream instead of `target`, when a stage changed it (a watch sent
  // with a shorter timeout: proxy/serve/watch_return.h).
  std::optional<std::string> upstream_target;
};

// The token of an `Authorization: Bearer <token>` field, as the apiserver's bearer-token
// authenticator reads it; empty when there is none.
std::string_view BearerToken(const beast::http::fields& headers);

// Reads the rest of the body whole; nullopt past `limit` bytes or on a read error (then in
// *error when given; beast::error::timeout for a body too slow).
asio::awaitable<std::optional<std::string>> ReadWholeBody(BodySource& body, size_t limit,
                                                          beast::error_code* error = nullptr);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_REQUEST_H_
