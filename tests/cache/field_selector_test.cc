#include "cache/field_selector.h"

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "cache/selectable_fields.h"
#include "common/strings.h"

namespace kf {
namespace {

using namespace std::string_view_literals;

// Parse, then check the fields as the apiserver does for pods (its syntax errors come first).
std::string PodSelectorError(std::string_view selector) {
  absl::StatusOr<FieldSelector> s = FieldSelector::Parse(selector);
  if (s.ok()) s = ConvertFieldSelector("", "pods", *s);
  if (s.ok()) return "<accepted: " + s->String() + ">";
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(ToStd(s.status().message()));
}

struct ErrorCase {
  std::string_view selector;
  std::string_view message;
};

// Every pair was captured from kube-apiserver v1.36.3:
//   GET /api/v1/pods?fieldSelector=<selector> → 400, Status.message = <message>.
// Terms are handled in sorted order of their text, so the first bad term in that order is named.
constexpr ErrorCase kErrorCases[] = {
    {"a~b", "invalid selector: 'a~b'; can't understand 'a~b'"},
    {"a~b,zzz", "invalid selector: 'a~b,zzz'; can't understand 'a~b'"},
    {"zzz,a~b", "invalid selector: 'zzz,a~b'; can't understand 'a~b'"},
    {"b~b,a~a", "invalid selector: 'b~b,a~a'; can't understand 'a~a'"},
    {"a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"},
    {"spec.nodeName=a,b", "invalid selector: 'spec.nodeName=a,b'; can't understand 'b'"},
    {"a=b=c", "invalid field selector: unescaped character in value: 61"},
    {"x=a=", "invalid field selector: unescaped character in value: 61"},
    {"a\\=b=c", "invalid field selector: unescaped character in value: 61"},
    {"a=b\\", "invalid field selector: invalid escape sequence: \\"},
    {"a=b\\x", "invalid field selector: invalid escape sequence: \\x"},
    {"metadata.name=\303\251\\\303\251",
     "invalid field selector: invalid escape sequence: \\\303\251"},
    {"metadata.name=\\\377,a=b\\,=c", "invalid field selector: unescaped character in value: 61"},
    {"=x", "field label not supported: "},
    {" spec.nodeName = a", "field label not supported:  spec.nodeName "},
    {"a\\,b=c", "field label not supported: a\\,b"},
    {"foo=bar", "field label not supported: foo"},
    {"metadata.name=x,foo=bar", "field label not supported: foo"},
    {"status.phase=Running,b=x,a=y", "field label not supported: a"},
    {"a=\\\377", "invalid field selector: invalid escape sequence: \\\357\277\275"},
    {"a=x\\\377", "invalid field selector: invalid escape sequence: \\\357\277\275"},
};

TEST_CASE("FieldSelector rejects malformed selectors with the apiserver's exact 400 message") {
  for (const ErrorCase& c : kErrorCases) {
    INFO("selector: " << c.selector);
    CHECK(PodSelectorError(c.selector) == c.message);
  }
}

TEST_CASE("FieldSelector accepts what the apiserver accepts for pods") {
  // Each of these gave 200 on /api/v1/pods.
  for (std::string_view s : {"", ",", "=", "!=", "metadata.name=x,,", "spec.host=n1",
                             "status.podIPs=", "status.podIPs!=", "spec.nodeName==n1"}) {
    INFO("selector: " << s);
    CHECK(PodSelectorError(s).starts_with("<accepted"));
  }
}

TEST_CASE("FieldSelector parses =, == and != and orders terms by their text") {
  absl::StatusOr<FieldSelector> s = FieldSelector::Parse("b=2,a==1,c!=3,a!b=4");
  REQUIRE(s.ok());
  // Sorted as text: "a!b=4" < "a==1" < "b=2" < "c!=3".
  const std::vector<FieldTerm> expected = {
      {"a!b", FieldOperator::kEquals, "4"},  // The first operator from the left splits.
      {"a", FieldOperator::kEquals, "1"},
      {"b", FieldOperator::kEquals, "2"},
      {"c", FieldOperator::kNotEquals, "3"},
  };
  CHECK(s->Terms() == expected);
  CHECK(s->String() == "a!b=4,a=1,b=2,c!=3");
}

TEST_CASE("FieldSelector drops empty terms and terms with neither field nor value") {
  for (std::string_view text : {"", ",", ",,", "=", "!=", "==", "=,!="}) {
    absl::StatusOr<FieldSelector> s = FieldSelector::Parse(text);
    REQUIRE(s.ok());
    CHECK(s->Empty());
  }
  absl::StatusOr<FieldSelector> s = FieldSelector::Parse(",a=b,,=,");
  REQUIRE(s.ok());
  CHECK(s->String() == "a=b");
}

TEST_CASE("FieldSelector unescapes values and keeps whitespace") {
  absl::StatusOr<FieldSelector> s = FieldSelector::Parse(R"(a=x\,y\=z\\, b = c )");
  REQUIRE(s.ok());
  REQUIRE(s->Terms().size() == 2);
  CHECK(s->Terms()[0] == FieldTerm{" b ", FieldOperator::kEquals, " c "});
  CHECK(s->Terms()[1] == FieldTerm{"a", FieldOperator::kEquals, R"(x,y=z\)"});
  CHECK(s->String() == R"( b = c ,a=x\,y\=z\\)");
  CHECK(EscapeFieldValue(R"(\,=)") == R"(\\\,\=)");
}

TEST_CASE("FieldSelector turns invalid UTF-8 into U+FFFD only in values it unescapes") {
  absl::StatusOr<FieldSelector> raw = FieldSelector::Parse("a=\xff");
  REQUIRE(raw.ok());
  CHECK(raw->Terms()[0].value == "\xff");
  absl::StatusOr<FieldSelector> unescaped = FieldSelector::Parse("a=\xff\\=");
  REQUIRE(unescaped.ok());
  CHECK(unescaped->Terms()[0].value == "\xef\xbf\xbd=");
}

TEST_CASE("FieldSelector compares a missing field as the empty string") {
  struct Case {
    std::string_view selector;
    FieldSet fields;
    bool matches;
  };
  const Case kCases[] = {
      {"a=", {}, true},
      {"a!=", {}, false},
      {"a=x", {}, false},
      {"a!=x", {}, true},
      {"a=x", {{"a", "x"}}, true},
      {"a==x", {{"a", "x"}}, true},
      {"a!=x", {{"a", "x"}}, false},
      {"a=x,b!=y", {{"a", "x"}, {"b", "z"}}, true},
      {"a=x,b!=y", {{"a", "x"}, {"b", "y"}}, false},
      {"", {{"a", "x"}}, true},
  };
  for (const Case& c : kCases) {
    INFO("selector: " << c.selector);
    absl::StatusOr<FieldSelector> s = FieldSelector::Parse(c.selector);
    REQUIRE(s.ok());
    CHECK(s->Matches(c.fields) == c.matches);
  }
}

TEST_CASE("FieldSelector RequiresExactMatch reports the first = term on the field") {
  struct Case {
    std::string_view selector;
    std::optional<std::string> value;
  };
  const Case kCases[] = {
      {"f=v", "v"},          {"f==v", "v"}, {"f!=v", std::nullopt}, {"f!=x,f=y", "y"},
      {"g=v", std::nullopt}, {"f=", ""},    {"", std::nullopt},     {"f=a,f=b", "a"},
  };
  for (const Case& c : kCases) {
    INFO("selector: " << c.selector);
    absl::StatusOr<FieldSelector> s = FieldSelector::Parse(c.selector);
    REQUIRE(s.ok());
    CHECK(s->RequiresExactMatch("f") == c.value);
  }
}

TEST_CASE("FieldSelector FromTerms keeps terms as given") {
  const FieldSelector s = FieldSelector::FromTerms(
      {{"z", FieldOperator::kEquals, "1"}, {"a", FieldOperator::kNotEquals, "2"}});
  CHECK(s.String() == "z=1,a!=2");
  CHECK(FieldSelector().Empty());
  CHECK(FieldSelector().Matches(FieldSet{{"a", "b"}}));
}

}  // namespace
}  // namespace kf
