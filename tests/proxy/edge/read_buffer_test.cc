#include "proxy/edge/read_buffer.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

TEST_CASE("ReadBuffer reads into its small buffer until a read fills it") {
  ReadBuffer<16, 256> in;
  CHECK(in.size() == 16);
  CHECK_FALSE(in.large());
  in.Consumed(0);  // A peer that went away, an empty read.
  in.Consumed(15);
  CHECK(in.size() == 16);
  CHECK_FALSE(in.large());
  const char* small = in.data();
  in.Consumed(16);  // Full: more is likely waiting.
  REQUIRE(in.large());
  CHECK(in.size() == 256);
  CHECK(in.data() != small);
}

TEST_CASE("ReadBuffer keeps its large buffer while reads fill it and frees it after one does not") {
  ReadBuffer<16, 256> in;
  in.Consumed(16);
  REQUIRE(in.large());
  const char* large = in.data();
  in.Consumed(256);
  REQUIRE(in.large());
  CHECK(in.data() == large);  // The same allocation through a burst.
  in.Consumed(255);
  CHECK_FALSE(in.large());
  CHECK(in.size() == 16);
  // The next burst allocates again.
  in.Consumed(16);
  CHECK(in.large());
  in.Consumed(0);
  CHECK_FALSE(in.large());
}

}  // namespace
}  // namespace kf
