#include "tests/load/wire.h"

#include <catch2/catch.hpp>

namespace kf::load {
namespace {

TEST_CASE("Query spells selectors as client-go does") {
  CHECK(QueryEscape("spec.nodeName=node-7") == "spec.nodeName%3Dnode-7");
  CHECK(QueryEscape("!service.kubernetes.io/headless,!a b~") ==
        "%21service.kubernetes.io%2Fheadless%2C%21a+b~");
  CHECK(Query({{"watch", "true"},
               {"labelSelector", ""},
               {"allowWatchBookmarks", "true"},
               {"resourceVersion", "42"}}) ==
        "?allowWatchBookmarks=true&resourceVersion=42&watch=true");
  CHECK(Query({{"labelSelector", ""}}).empty());
}

TEST_CASE("EventResourceVersion reads the object's own resourceVersion") {
  CHECK(EventResourceVersion(
            R"({"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"p","namespace":"n",)"
            R"("uid":"u","resourceVersion":"123","annotations":{"a":"b"}},"spec":{}}})") == 123u);
  CHECK(
      EventResourceVersion(
          R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":)"
          R"({"resourceVersion":"9876543210","annotations":{"k8s.io/initial-events-end":"true"}}}})") ==
      9876543210u);
  CHECK_FALSE(EventResourceVersion(R"({"type":"ADDED","object":{"metadata":{"name":"x"}}})"));
  CHECK_FALSE(
      EventResourceVersion(R"({"type":"ADDED","object":{"metadata":{"resourceVersion":"12x"}}})"));
  CHECK_FALSE(EventResourceVersion(R"({"type":"ADDED"})"));
}

TEST_CASE("EventErrorCode reads the Status code or an expired reason") {
  CHECK(EventErrorCode(R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1",)"
                       R"("metadata":{},"status":"Failure","message":"too old resource version:)"
                       R"j( 1 (2)","reason":"Expired","code":410}})j") == 410);
  CHECK(EventErrorCode(R"({"type":"ERROR","object":{"kind":"Status","reason":"Gone"}})") == 410);
  CHECK(EventErrorCode(R"({"type":"ERROR","object":{"kind":"Status","message":"\"code\":1",)"
                       R"("code":500}})") == 500);
  CHECK_FALSE(EventErrorCode(R"({"type":"ERROR","object":{}})"));
}

TEST_CASE("BackoffDelay doubles from 800ms to a 30s cap and jitter stretches it below double") {
  using std::chrono::milliseconds;
  CHECK(BackoffDelay(0, 0) == milliseconds(800));
  CHECK(BackoffDelay(1, 0) == milliseconds(1600));
  CHECK(BackoffDelay(0, 0.5) == milliseconds(1200));
  CHECK(BackoffDelay(10, 0) == milliseconds(30000));
  CHECK(BackoffDelay(1000, 0.99) <= milliseconds(60000));
  CHECK(BackoffDelay(-3, 0) == milliseconds(800));
}

}  // namespace
}  // namespace kf::load
