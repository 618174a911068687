#include "proxy/serve/watch_return.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

using std::chrono::seconds;

TEST_CASE("A declined watch goes upstream with timeoutSeconds at most the cap") {
  struct Case {
    std::string_view target;
    std::optional<std::string_view> want;
  };
  const Case cases[] = {
      // Absent: appended.
      {"/api/v1/configmaps", "/api/v1/configmaps?timeoutSeconds=60"},
      {"/api/v1/configmaps?", "/api/v1/configmaps?timeoutSeconds=60"},
      {"/api/v1/configmaps?watch=1&resourceVersion=5",
       "/api/v1/configmaps?watch=1&resourceVersion=5&timeoutSeconds=60"},
      // client-go's 5-10 minutes: lowered in place, the rest byte for byte.
      {"/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dn1&"
       "resourceVersion=7&timeoutSeconds=417&watch=true",
       "/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dn1&"
       "resourceVersion=7&timeoutSeconds=60&watch=true"},
      // 0 is the apiserver's own default (30-60 minutes): lowered too.
      {"/api/v1/pods?watch=1&timeoutSeconds=0", "/api/v1/pods?watch=1&timeoutSeconds=60"},
      // Ends by then already, or negative (ends at once): as sent.
      {"/api/v1/pods?watch=1&timeoutSeconds=60", std::nullopt},
      {"/api/v1/pods?watch=1&timeoutSeconds=3", std::nullopt},
      {"/api/v1/pods?watch=1&timeoutSeconds=-1", std::nullopt},
      // What the apiserver answers as it is: a value that does not parse (its 400), two of
      // them, an escaped name that may decode to it.
      {"/api/v1/pods?watch=1&timeoutSeconds=soon", std::nullopt},
      {"/api/v1/pods?timeoutSeconds=+90&watch=1", std::nullopt},  // " 90"
      {"/api/v1/pods?timeoutSeconds=%3900&watch=1", std::nullopt},
      {"/api/v1/pods?watch=1&timeoutSeconds=", std::nullopt},
      {"/api/v1/pods?watch=1&timeoutSeconds", std::nullopt},
      {"/api/v1/pods?timeoutSeconds=600&timeoutSeconds=5", std::nullopt},
      {"/api/v1/pods?watch=1&timeout%53econds=600", std::nullopt},
      // Other names are not it.
      {"/api/v1/pods?xtimeoutSeconds=600", "/api/v1/pods?xtimeoutSeconds=600&timeoutSeconds=60"},
  };
  for (const Case& c : cases) {
    INFO(c.target);
    const std::optional<std::string> got = CappedWatchTarget(c.target, seconds(60));
    REQUIRE(got.has_value() == c.want.has_value());
    if (got) CHECK(*got == *c.want);
  }
}

TEST_CASE("A declined watch may stay upstream twice the negative review TTL, at least 5 s") {
  CHECK(WatchReturnCap(seconds(30)) == seconds(60));
  CHECK(WatchReturnCap(seconds(1)) == seconds(5));
  CHECK(WatchReturnCap(seconds(0)) == seconds(5));
}

}  // namespace
}  // namespace kf
