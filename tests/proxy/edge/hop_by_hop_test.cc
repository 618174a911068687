#include "proxy/edge/hop_by_hop.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {
namespace http = boost::beast::http;

TEST_CASE("Hop-by-hop fields and the fields Connection names are not forwarded") {
  http::fields in;
  in.set(http::field::authorization, "Bearer client-token");
  in.set(http::field::accept, "application/json");
  in.set(http::field::connection, "keep-alive, X-Hop");
  in.set("X-Hop", "1");
  in.set(http::field::keep_alive, "timeout=5");
  in.set("Proxy-Connection", "keep-alive");
  in.set(http::field::proxy_authorization, "Basic x");
  in.set(http::field::te, "trailers");
  in.set(http::field::trailer, "X-T");
  in.set(http::field::transfer_encoding, "chunked");
  in.set(http::field::upgrade, "websocket");
  in.set(http::field::content_length, "12");
  in.set(http::field::expect, "100-continue");
  in.set("Impersonate-User", "bob");

  http::fields out;
  CopyEndToEndFields(in, out);
  CHECK(out[http::field::authorization] == "Bearer client-token");
  CHECK(out[http::field::accept] == "application/json");
  CHECK(out[http::field::content_length] == "12");
  CHECK(out["Impersonate-User"] == "bob");
  for (const char* dropped :
       {"Connection", "X-Hop", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "TE",
        "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}) {
    INFO(dropped);
    CHECK(out.count(dropped) == 0);
  }
}

TEST_CASE("Upgrade requests need both Connection: upgrade and an Upgrade field") {
  http::fields f;
  f.set(http::field::upgrade, "SPDY/3.1");
  CHECK_FALSE(IsUpgradeRequest(f));
  f.set(http::field::connection, "keep-alive, Upgrade");
  CHECK(IsUpgradeRequest(f));
  http::fields no_upgrade_field;
  no_upgrade_field.set(http::field::connection, "upgrade");
  CHECK_FALSE(IsUpgradeRequest(no_upgrade_field));
}

}  // namespace
}  // namespace kf
