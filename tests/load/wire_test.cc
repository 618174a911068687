#include "tests/load/wire.h"

#include <catch2/catch.hpp>

#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
#include "tests/load/list_scanner.h"

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

namespace kf::load {
namespace {

TEST_CASE("EventResourceVersion and EventErrorCode read protobuf watch events") {
  std::string meta, pod, status;
  AppendBytesField(&meta, 1, "p");
  AppendBytesField(&meta, 6, "77");
  AppendBytesField(&pod, 1, meta);
  const std::string event = WatchFrame("MODIFIED", WrapUnknown("v1", "Pod", pod)).substr(4);
  CHECK(EventResourceVersion(event) == 77u);
  CHECK(EventErrorCode(event) == std::nullopt);
  AppendBytesField(&status, 4, "Expired");
  AppendVarintField(&status, 6, 410);
  const std::string error = WatchFrame("ERROR", WrapUnknown("v1", "Status", status)).substr(4);
  CHECK(EventErrorCode(error) == 410);
  CHECK(EventResourceVersion(error) == std::nullopt);
  CHECK(EventResourceVersion(std::string("\x0a\x05"
                                         "ADDED",
                                         7)) == std::nullopt);
}

TEST_CASE("ListScanner reads a protobuf LIST at its end") {
  std::string meta_field, item_meta, item, raw;
  AppendBytesField(&meta_field, 1, EncodeListMeta("123", "tok", std::nullopt));
  AppendBytesField(&item_meta, 1, "a");
  AppendBytesField(&item, 1, item_meta);
  raw = meta_field;
  AppendBytesField(&raw, 2, item);
  AppendBytesField(&raw, 2, item);
  const std::string body = WrapUnknown("v1", "PodList", raw);
  ListScanner scanner;
  scanner.set_protobuf(true);
  REQUIRE(scanner.Feed(body.substr(0, 7)));
  REQUIRE(scanner.Feed(body.substr(7)));
  CHECK_FALSE(scanner.done());
  scanner.Finish();
  CHECK(scanner.done());
  CHECK(scanner.resource_version() == "123");
  CHECK(scanner.continue_token() == "tok");
  CHECK(scanner.items() == 2);
  ListScanner broken;
  broken.set_protobuf(true);
  broken.Feed(body.substr(0, body.size() - 6));
  broken.Finish();
  CHECK(broken.failed());
}

}  // namespace
}  // namespace kf::load
