#include "tests/load/completeness.h"

#include <catch2/catch.hpp>

namespace kf::load {
namespace {

int32_t KeyOf(Kind kind, uint32_t object) {
  // Pods 0..9 sit on node object % 3; nodes and configmaps are their own key.
  return kind == Kind::kPods ? static_cast<int32_t>(object % 3) : static_cast<int32_t>(object);
}

TEST_CASE("StreamRecord accepts increasing resourceVersions and resumes after the highest") {
  StreamRecord r(Kind::kPods, 1);
  r.OnList(100, false);
  CHECK(r.resume_rv() == 100);
  r.OnEvent(101);
  r.OnBookmark(105);
  CHECK(r.resume_rv() == 105);
  r.OnEvent(110);
  r.OnBookmark(110);  // Progress at the same revision is fine.
  CHECK(r.resume_rv() == 110);
  CHECK(r.out_of_order() == 0);
  CHECK(r.duplicates() == 0);
  CHECK(r.received() == std::vector<uint64_t>{101, 110});
}

TEST_CASE("StreamRecord counts repeats and events out of order") {
  StreamRecord r(Kind::kNodes, 0);
  r.OnList(100, false);
  r.OnEvent(100);  // Not above the list's revision.
  r.OnEvent(103);
  r.OnEvent(103);  // Repeat.
  r.OnEvent(102);  // Late: out of order, but received.
  r.OnBookmark(110);
  r.OnEvent(110);  // At the bookmark: the bookmark promised it was sent already.
  r.OnBookmark(104);
  CHECK(r.duplicates() == 1);
  CHECK(r.out_of_order() == 4);
  CHECK(r.received() == std::vector<uint64_t>{102, 103, 110});  // Late ones arrived all the same.
}

TEST_CASE("CheckCompleteness finds missing writes per selector above the start") {
  StreamRecord node0_pods(Kind::kPods, 0), node1_pods(Kind::kPods, 1);
  StreamRecord all_slices(Kind::kEndpointSlices, -1), node2(Kind::kNodes, 2);
  node0_pods.OnList(100, false);
  node1_pods.OnList(100, false);
  all_slices.OnList(105, false);
  node2.OnList(100, false);
  const std::vector<Write> writes = {
      {Kind::kPods, 0, 99},             // node 0, before the start: not expected.
      {Kind::kPods, 3, 101},            // node 0.
      {Kind::kPods, 4, 102},            // node 1: missing below.
      {Kind::kPods, 6, 103},            // node 0.
      {Kind::kEndpointSlices, 5, 104},  // Before the slices stream started.
      {Kind::kEndpointSlices, 1, 106},
      {Kind::kNodes, 2, 107},
      {Kind::kNodes, 1, 108},  // No stream for node 1.
  };
  node0_pods.OnEvent(101);
  node0_pods.OnEvent(103);
  all_slices.OnEvent(106);
  node2.OnEvent(107);
  const Completeness c =
      CheckCompleteness({&node0_pods, &node1_pods, &all_slices, &node2}, writes, KeyOf);
  CHECK(c.watch_streams == 4);
  CHECK(c.checked == 4);
  CHECK(c.complete == 3);
  CHECK(c.incomplete == 1);
  CHECK(c.missing_events == 1);
  CHECK(c.expected_events == 5);
  REQUIRE(c.samples.size() == 1);
  CHECK(c.samples[0].kind == Kind::kPods);
  CHECK(c.samples[0].key == 1);
  CHECK(c.samples[0].first_missing == std::vector<uint64_t>{102});
}

TEST_CASE("CheckCompleteness leaves out relisted and never listed streams") {
  StreamRecord relisted(Kind::kPods, 0), never(Kind::kPods, 0), dup(Kind::kPods, 0);
  relisted.OnList(100, false);
  relisted.OnList(200, true);
  dup.OnList(100, false);
  dup.OnEvent(101);
  dup.OnEvent(101);
  const std::vector<Write> writes = {{Kind::kPods, 0, 101}, {Kind::kPods, 3, 150}};
  const Completeness c = CheckCompleteness({&relisted, &never, &dup}, writes, KeyOf);
  CHECK(c.watch_streams == 3);
  CHECK(c.relisted_after_410 == 1);
  CHECK(c.never_listed == 1);
  CHECK(c.checked == 1);
  CHECK(c.incomplete == 1);  // The duplicate, and 150 missing.
  CHECK(c.duplicates == 1);
  CHECK(c.missing_events == 1);
}

}  // namespace
}  // namespace kf::load
