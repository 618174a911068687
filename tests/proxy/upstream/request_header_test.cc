#include "proxy/upstream/request_header.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

using Extra = std::vector<std::pair<std::string, std::vector<std::string>>>;

// Fields in the order given (names repeated as given).
boost::beast::http::fields Fields(
    std::initializer_list<std::pair<std::string_view, std::string_view>> list) {
  boost::beast::http::fields f;
  for (const auto& [name, value] : list) f.insert(name, value);
  return f;
}

std::vector<std::string> ValuesOf(const boost::beast::http::fields& f, std::string_view name) {
  std::vector<std::string> out;
  for (const auto& field : f) {
    if (boost::beast::iequals(field.name_string(), name)) out.emplace_back(field.value());
  }
  return out;
}

TEST_CASE("RequestHeaderNames strip every identity field and assert one user") {
  RequestHeaderNames names;
  names.username = {"X-Remote-User", "X-Other-User"};
  boost::beast::http::fields f;
  f.set("x-remote-user", "a");
  f.set("X-Other-User", "b");
  f.set("X-Remote-Extra-Foo", "c");
  f.set("X-Remote-Group", "d");
  f.set("Accept", "application/json");
  names.Strip(f);
  CHECK(f.count("X-Remote-User") == 0);
  CHECK(f.count("X-Other-User") == 0);
  CHECK(f.count("X-Remote-Extra-Foo") == 0);
  CHECK(f.count("X-Remote-Group") == 0);
  CHECK(f["Accept"] == "application/json");

  REQUIRE(
      names.Assert(Identity{"u", {"g1", "g2"}, "id", {{"scopes.example.com/a b", {"x"}}}}, f).ok());
  CHECK(f["X-Remote-User"] == "u");
  CHECK(ValuesOf(f, "X-Remote-Group") == std::vector<std::string>{"g1", "g2"});
  CHECK(f["X-Remote-Uid"] == "id");
  CHECK(f["X-Remote-Extra-scopes.example.com%2Fa%20b"] == "x");
}

TEST_CASE("RequestHeaderNames assert replaces identity fields already present") {
  RequestHeaderNames names;
  boost::beast::http::fields f;
  f.insert("X-Remote-Group", "system:masters");
  f.insert("X-Remote-User", "system:admin");
  REQUIRE(names.Assert(Identity{"u", {"g"}}, f).ok());
  CHECK(ValuesOf(f, "X-Remote-User") == std::vector<std::string>{"u"});
  CHECK(ValuesOf(f, "X-Remote-Group") == std::vector<std::string>{"g"});
}

TEST_CASE("RequestHeaderNames assert nothing for an identity a field cannot carry") {
  RequestHeaderNames names;
  const Identity good{"u", {"g"}, "id", {{"k", {"v"}}}};
  for (auto bad :
       {Identity{"x\r\nX-Remote-Group: system:masters", {}}, Identity{"system:node:victim ", {}},
        Identity{"u", {"g\n"}}, Identity{"u", {}, std::string("i\0d", 3)},
        Identity{"u", {}, "", {{"k", {"\x7f"}}}}, Identity{"", {"g"}},
        Identity{std::string(70000, 'a'), {}}}) {
    boost::beast::http::fields f;
    f.insert("Accept", "*/*");
    const absl::Status s = names.Assert(bad, f);
    INFO(s);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::distance(f.begin(), f.end()) == 1);  // Nothing written.
  }
  // An extra key whose escaped field name Beast could not hold.
  boost::beast::http::fields f;
  CHECK_FALSE(names.Assert(Identity{"u", {}, "", {{std::string(30000, '/'), {"v"}}}}, f).ok());
  CHECK(f.begin() == f.end());
  CHECK(names.Assert(good, f).ok());
}

TEST_CASE("RequestHeaderNames read the user and uid from each name's first value only") {
  // requestheader.go's headerValue: h.Get(name) for each name in order; first non-empty wins.
  RequestHeaderNames names;
  names.username = {"X-Remote-User", "X-Other-User"};
  const auto f = Fields({{"X-Remote-User", ""},
                         {"X-Remote-User", "second-value-never-read"},
                         {"X-Other-User", "bob"},
                         {"X-Other-User", "carol"},
                         {"X-Remote-Uid", ""},
                         {"x-remote-uid", "uid-never-read"}});
  auto user = names.Read(f);
  REQUIRE(user.has_value());
  CHECK(user->username == "bob");
  CHECK(user->uid.empty());

  const auto only_second = Fields({{"X-Remote-User", ""}, {"x-remote-user", "alice"}});
  CHECK_FALSE(names.Read(only_second).has_value());  // No user: not authenticated this way.
  CHECK_FALSE(names.Read(boost::beast::http::fields()).has_value());
}

TEST_CASE("RequestHeaderNames read groups name by name, empty values skipped") {
  RequestHeaderNames names;
  names.group = {"X-Remote-Group", "X-Other-Group"};
  const auto f = Fields({{"X-Remote-User", "u"},
                         {"X-Other-Group", "o1"},
                         {"x-remote-group", "g1"},
                         {"X-Remote-Group", ""},
                         {"X-Other-Group", ""},
                         {"X-REMOTE-GROUP", "g2"}});
  auto user = names.Read(f);
  REQUIRE(user.has_value());
  // Every X-Remote-Group value (any case) before any X-Other-Group one, as allHeaderValues.
  CHECK(user->groups == std::vector<std::string>{"g1", "g2", "o1"});
}

TEST_CASE("RequestHeaderNames read extra keys lowercased, then unescaped, with every value") {
  RequestHeaderNames names;
  const auto f = Fields({
      {"X-Remote-User", "u"},
      {"X-Remote-Extra-Scopes", "a"},
      {"x-remote-extra-scopes", ""},  // Empty values are kept.
      {"X-Remote-Extra-Example.com%2Fkey", "c"},
      // Lowercased first: %2F and %2f are one escape; an escaped upper-case letter stays upper.
      {"X-Remote-Extra-%41b", "d"},
      // A malformed escape keeps the lowercased, still-escaped key (never dropped).
      {"X-Remote-Extra-Bad%zZ", "e"},
      {"X-Remote-Extra-Trail%4", "f"},
  });
  auto user = names.Read(f);
  REQUIRE(user.has_value());
  CHECK(user->extra == Extra{{"Ab", {"d"}},
                             {"bad%zz", {"e"}},
                             {"example.com/key", {"c"}},
                             {"scopes", {"a", ""}},
                             {"trail%4", {"f"}}});
}

TEST_CASE("RequestHeaderNames read back exactly what they assert, upper-case extra keys too") {
  RequestHeaderNames names;
  names.username = {"X-Remote-User", "X-Other-User"};
  const Identity user{"system:node:n1",
                      {"system:nodes", "g2"},
                      "u-1",
                      {{"Example.com/Key", {"c", ""}}, {"a:b@c=d", {"x"}}, {"scopes", {"a", "b"}}}};
  boost::beast::http::fields out;
  REQUIRE(names.Assert(user, out).ok());
  auto back = names.Read(out);
  REQUIRE(back.has_value());
  Identity sorted = user;
  std::sort(sorted.extra.begin(), sorted.extra.end());
  CHECK(*back == sorted);
}

}  // namespace
}  // namespace kf
