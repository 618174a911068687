// libFuzzer target: the identity path, from the bytes a client controls to the request head
// kube-fanout writes upstream. A certificate subject (CN and O values, as a CA might have
// signed them) read by kf::ReadSubjectUser, and request fields (as a front proxy, or any client,
// sent them) go through kf::Vouch and kf::UpstreamRequestHead, the one writer of passthrough
// heads. Invariants: no written field name or value holds a byte HTTP forbids; the head, put on
// the wire and parsed back, has the same fields; a user asserted upstream reads back from that
// head, as the apiserver's request-header authenticator reads it, as exactly the user vouched
// for; nothing throws.
//
// Input: a flags byte (bit 0: the certificate is a trusted front proxy's; bit 1: a verified
// user's; bit 2: a bearer token), then pieces, each a 2-byte big-endian length (at most 4096)
// and its bytes: CN, the number of O values (first byte) and each, then field name and value
// pairs to the end.
#include <openssl/x509.h>

#include <algorithm>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/write.hpp>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/edge/client_cert.h"
#include "proxy/edge/field_syntax.h"
#include "proxy/passthrough/upstream_request.h"
#include "proxy/upstream/vouched.h"

namespace {

namespace http = boost::beast::http;

struct Reader {
  std::string_view in;
  bool Next(std::string_view* piece) {
    if (in.size() < 2) return false;
    size_t n = (static_cast<unsigned char>(in[0]) << 8) | static_cast<unsigned char>(in[1]);
    if (n > 4096) n = 4096;
    in.remove_prefix(2);
    n = std::min(n, in.size());
    *piece = in.substr(0, n);
    in.remove_prefix(n);
    return true;
  }
};

class NoBody : public kf::BodySource {
 public:
  bool done() const override { return true; }
  bool chunked() const override { return false; }
  boost::asio::awaitable<std::pair<boost::beast::error_code, size_t>> ReadSome(
      std::span<char>) override {
    co_return std::pair<boost::beast::error_code, size_t>{};
  }
};

void Require(bool ok) {
  if (!ok) __builtin_trap();
}

// A subject entry holding `value` as a UTF8String, unconverted.
void Add(X509_NAME* name, int nid, std::string_view value) {
  X509_NAME_add_entry_by_NID(name, nid, V_ASN1_UTF8STRING,
                             reinterpret_cast<const unsigned char*>(value.data()),
                             static_cast<int>(value.size()), -1, 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const unsigned flags = data[0];
  Reader in{std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1)};

  kf::ClientCertificate cert;
  cert.presented = true;
  cert.front_proxy = (flags & 1) != 0;
  cert.verified = (flags & 2) != 0;
  X509_NAME* subject = X509_NAME_new();
  std::string_view piece;
  if (in.Next(&piece)) Add(subject, NID_commonName, piece);
  if (in.Next(&piece) && !piece.empty()) {
    for (int orgs = static_cast<unsigned char>(piece[0]) % 8; orgs > 0 && in.Next(&piece); --orgs) {
      Add(subject, NID_organizationName, piece);
    }
  }
  if (cert.verified) {
    kf::ReadSubjectUser(subject, cert);
    // A refused subject never authenticates; an accepted one is a valid identity.
    Require(!cert.subject_refused || !cert.authenticates());
    Require(cert.subject_refused || kf::CheckIdentity(cert.user).ok());
  }
  X509_NAME_free(subject);

  http::fields fields;
  std::string_view name, value;
  while (in.Next(&name) && in.Next(&value)) {
    // Beast's own limits (16-bit offsets) hold here: pieces are at most 4096 bytes.
    fields.insert(name, value);
  }
  if ((flags & 4) != 0) fields.set(http::field::authorization, "Bearer fuzz-token");

  NoBody body;
  kf::Request request{.method = http::verb::get,
                      .method_string = "GET",
                      .target = "/api/v1/namespaces/kube-system/secrets",
                      .headers = fields,
                      .remote_ip = "10.0.0.7",
                      .body = body,
                      .client_cert = &cert};
  const kf::RequestHeaderNames names;
  const kf::Vouched who = kf::Vouch(request, names);
  kf::UpstreamEndpoint endpoint;
  endpoint.host = "apiserver.invalid";
  auto head = kf::UpstreamRequestHead(request, endpoint, /*upgrade=*/false, names,
                                      who.asserted() ? &who.user : nullptr);
  // An asserted identity was checked when vouched: only the client's own bytes can fail.
  if (!head.ok()) {
    Require(head.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  size_t written = 0;
  for (const auto& f : head->base()) {
    Require(kf::IsFieldName(f.name_string()) && kf::IsFieldValue(f.value()));
    ++written;
  }
  // On the wire and back: the same fields, none more (nothing spliced in).
  std::ostringstream wire;
  wire << head->base();
  http::request_parser<http::empty_body> parser;
  parser.header_limit(8u << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  const std::string bytes = wire.str();
  parser.put(boost::asio::buffer(bytes), ec);
  Require(!ec && parser.is_header_done());
  const auto& parsed = parser.get();
  Require(static_cast<size_t>(std::distance(parsed.begin(), parsed.end())) == written);
  if (who.asserted()) {
    // The apiserver reads back the user vouched for (empty groups it skips, as Go does).
    auto back = names.Read(parsed);
    Require(back.has_value());
    kf::Identity want = who.user;
    std::erase(want.groups, std::string());
    std::sort(want.extra.begin(), want.extra.end());
    Require(*back == want);
  } else {
    Require(!names.Read(parsed).has_value());  // A client's own X-Remote-* never goes up.
  }
  return 0;
}
