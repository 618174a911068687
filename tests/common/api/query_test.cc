#include "common/api/query.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

TEST_CASE("Query decodes pairs as Go's url.ParseQuery does") {
  const Query q = Query::Parse("a=1&b=x+y&c=%41%42&a=2&flag&d=&bad=%zz&semi=1;2&=v");
  CHECK(q.First("a") == "1");
  CHECK(q.First("b") == "x y");
  CHECK(q.First("c") == "AB");
  CHECK(q.First("flag") == "");
  CHECK(q.First("d") == "");
  CHECK_FALSE(q.Has("bad"));   // A bad escape drops the pair.
  CHECK_FALSE(q.Has("semi"));  // So does a semicolon.
  CHECK(q.First("") == "v");
  CHECK_FALSE(q.Has("missing"));
  CHECK(q.pairs().size() == 7);
}

TEST_CASE("Query unescape rejects truncated escapes and keeps '+' in paths") {
  CHECK_FALSE(QueryUnescape("%4").has_value());
  CHECK_FALSE(QueryUnescape("%").has_value());
  CHECK(QueryUnescape("a%2Bb") == "a+b");
  CHECK(PathUnescape("a+b%20c") == "a+b c");
}

TEST_CASE("ParseGoBool accepts exactly strconv.ParseBool's spellings") {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) CHECK(ParseGoBool(t) == true);
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) CHECK(ParseGoBool(f) == false);
  for (const char* bad : {"", "yes", "tRUE", "2"}) CHECK_FALSE(ParseGoBool(bad).has_value());
}

TEST_CASE("Query of more than 10,000 parameters reads as empty, as Go's url.ParseQuery") {
  std::string raw = "labelSelector=a%3Db";
  for (int i = 1; i < 10000; ++i) raw += "&p=1";
  CHECK(Query::Parse(raw).pairs().size() == 10000);
  CHECK(Query::Parse(raw).First("labelSelector") == "a=b");
  raw += "&q=1";
  CHECK(Query::Parse(raw).pairs().empty());
  CHECK_FALSE(Query::Parse(raw).Has("labelSelector"));
}

}  // namespace
}  // namespace kf
