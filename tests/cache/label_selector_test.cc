#include "cache/label_selector.h"

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "absl/strings/str_replace.h"
#include "common/strings.h"
#include "rapidjson/document.h"

namespace kf {
namespace {

using namespace std::string_view_literals;

// Long passages of the apiserver's messages, spelled out once. {KEY}, {VALUE} and {DNS} in the
// table below stand for them.
constexpr std::string_view kKeyRegexError =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
constexpr std::string_view kValueRegexError =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
constexpr std::string_view kDnsRegexError =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

std::string Expand(std::string_view message) {
  return absl::StrReplaceAll(ToAbsl(message), {{"{KEY}", ToAbsl(kKeyRegexError)},
                                               {"{VALUE}", ToAbsl(kValueRegexError)},
                                               {"{DNS}", ToAbsl(kDnsRegexError)}});
}

std::string ParseError(std::string_view selector) {
  absl::StatusOr<LabelSelector> s = LabelSelector::Parse(selector);
  if (s.ok()) return "<parsed: " + s->String() + ">";
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(ToStd(s.status().message()));
}

struct LabelErrorCase {
  std::string_view selector;
  std::string_view message;
};

// Every pair was captured from kube-apiserver v1.36.3:
//   GET /api/v1/pods?labelSelector=<selector> → 400, Status.message = <message>.
constexpr LabelErrorCase kLabelErrorCases[] = {
    {"k!", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"},
    {"k gt 1", "unable to parse requirement: found 'gt', expected: in, notin, =, ==, !=, gt, lt"},
    {"k)", "unable to parse requirement: found ')', expected: in, notin, =, ==, !=, gt, lt"},
    {"=v", "found '=', expected: !, identifier, or 'end of string'"},
    {",", "found ',', expected: !, identifier, or 'end of string'"},
    {"(k)", "found '(', expected: !, identifier, or 'end of string'"},
    {"k=v,", "found '', expected: identifier after ','"},
    {"k=v,,", "found ',', expected: identifier after ','"},
    {"k=v w", "found 'w', expected: ',' or 'end of string'"},
    {"k=a=b", "found '=', expected: ',' or 'end of string'"},
    {"k==v==", "found '==', expected: ',' or 'end of string'"},
    {"!k=v", "found '=', expected: ',' or 'end of string'"},
    {"!k in (a)", "found 'in', expected: ',' or 'end of string'"},
    {"k in (a),", "found '', expected: identifier after ','"},
    {"!", "unable to parse requirement: found '', expected: identifier"},
    {"!!k", "unable to parse requirement: found '!', expected: identifier"},
    {"k=(v)", "unable to parse requirement: found '(', expected: identifier"},
    {"k=)", "unable to parse requirement: found ')', expected: identifier"},
    {"k<>1", "unable to parse requirement: found '>', expected: identifier"},
    {"k in a", "unable to parse requirement: found 'a' expected: '('"},
    {"k notin", "unable to parse requirement: found '' expected: '('"},
    {"k in (a", "unable to parse requirement: found '', expected: ',' or ')'"},
    {"k in (a,", "unable to parse requirement: found '', expected: ',', or identifier"},
    {"k in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"},
    {"k in ((", "unable to parse requirement: found '(', expected: ',', ')' or identifier"},
    {"k in (a,(", "unable to parse requirement: found '(', expected: ',', or identifier"},
    {"a/b/c",
     "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key {KEY} "
     "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"},
    {"a//b",
     "unable to parse requirement: <nil>: Invalid value: \"a//b\": a valid label key {KEY} "
     "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"},
    {"/k",
     "unable to parse requirement: <nil>: Invalid value: \"/k\": prefix part must be "
     "non-empty"},
    {"p/",
     "unable to parse requirement: <nil>: Invalid value: \"p/\": name part must be "
     "non-empty; name part {KEY}"},
    {"Example.com/k",
     "unable to parse requirement: <nil>: Invalid value: \"Example.com/k\": prefix part "
     "{DNS}"},
    {"a_b/c", "unable to parse requirement: <nil>: Invalid value: \"a_b/c\": prefix part {DNS}"},
    {"k~", "unable to parse requirement: <nil>: Invalid value: \"k~\": name part {KEY}"},
    {"-k", "unable to parse requirement: <nil>: Invalid value: \"-k\": name part {KEY}"},
    {"k=vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",
     "unable to parse requirement: values[0][k]: Invalid value: "
     "\"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\": must be no more "
     "than 63 bytes"},
    {"k=vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv-",
     "unable to parse requirement: values[0][k]: Invalid value: "
     "\"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv-\": must be no "
     "more than 63 bytes; {VALUE}"},
    {"k=-v", "unable to parse requirement: values[0][k]: Invalid value: \"-v\": {VALUE}"},
    {"k in (-b,c~)",
     "unable to parse requirement: [values[0][k]: Invalid value: \"-b\": {VALUE}, "
     "values[1][k]: Invalid value: \"c~\": {VALUE}]"},
    {"k in (b,a,-c,-a)",
     "unable to parse requirement: [values[0][k]: Invalid value: \"-a\": {VALUE}, "
     "values[1][k]: Invalid value: \"-c\": {VALUE}]"},
    {"k>a",
     "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' "
     "operators, the value must be an integer"},
    {"k>",
     "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' "
     "operators, the value must be an integer"},
    {"k<1.5",
     "unable to parse requirement: values[0]: Invalid value: \"1.5\": for 'Gt', 'Lt' "
     "operators, the value must be an integer"},
    {"k>-1", "unable to parse requirement: values[0][k]: Invalid value: \"-1\": {VALUE}"},
    {"k>+5", "unable to parse requirement: values[0][k]: Invalid value: \"+5\": {VALUE}"},
    {"k>-a",
     "unable to parse requirement: [values[0]: Invalid value: \"-a\": for 'Gt', 'Lt' "
     "operators, the value must be an integer, values[0][k]: Invalid value: \"-a\": {VALUE}]"},
    {"k>99999999999999999999",
     "unable to parse requirement: values[0]: Invalid value: \"99999999999999999999\": for "
     "'Gt', 'Lt' operators, the value must be an integer"},
    {"k\001", "unable to parse requirement: <nil>: Invalid value: \"k\\x01\": name part {KEY}"},
    {"k\"q", "unable to parse requirement: <nil>: Invalid value: \"k\\\"q\": name part {KEY}"},
    {"k\\q", "unable to parse requirement: <nil>: Invalid value: \"k\\\\q\": name part {KEY}"},
    {"k\303\251",
     "unable to parse requirement: <nil>: Invalid value: \"k\303\251\": name part {KEY}"},
    {"k\177", "unable to parse requirement: <nil>: Invalid value: \"k\\x7f\": name part {KEY}"},
    {"k\302\240",
     "unable to parse requirement: <nil>: Invalid value: \"k\\u00a0\": name part {KEY}"},
    {"k\377", "unable to parse requirement: <nil>: Invalid value: \"k\\xff\": name part {KEY}"},
    {"k=v\000garbage"sv, "found 'garbage', expected: ',' or 'end of string'"},
    {"k=v,\000,x"sv, "found ',', expected: identifier after ','"},
};

TEST_CASE("LabelSelector rejects malformed selectors with the apiserver's exact 400 message") {
  for (const LabelErrorCase& c : kLabelErrorCases) {
    INFO("selector: " << c.selector);
    CHECK(ParseError(c.selector) == Expand(c.message));
  }
}

TEST_CASE("LabelSelector enforces the apiserver's length limits on keys, prefixes and values") {
  const std::string name63(63, 'a'), name64(64, 'a');
  const std::string prefix253(253, 'p'), prefix254(254, 'p');
  CHECK(LabelSelector::Parse(name63).ok());
  CHECK(LabelSelector::Parse(prefix253 + "/k").ok());
  CHECK(LabelSelector::Parse("k=" + std::string(63, 'v')).ok());
  CHECK(ParseError(name64) == "unable to parse requirement: <nil>: Invalid value: \"" + name64 +
                                  "\": name part must be no more than 63 bytes");
  CHECK(ParseError(prefix254 + "/k") == "unable to parse requirement: <nil>: Invalid value: \"" +
                                            prefix254 +
                                            "/k\": prefix part must be no more than 253 bytes");
  CHECK(ParseError("p/" + name64 + "~") ==
        Expand("unable to parse requirement: <nil>: Invalid value: \"p/" + name64 +
               "~\": name part must be no more than 63 bytes; name part {KEY}"));
}

TEST_CASE("LabelSelector accepts the whole grammar and renders it canonically") {
  struct Case {
    std::string_view selector;
    std::string_view canonical;
  };
  constexpr Case kCases[] = {
      {"", ""},
      {" \t\r\n", ""},
      {"\0k=v"sv, ""},  // A NUL ends the input while whitespace is skipped, as in Go.
      {"k\0=v"sv, "k=v"},
      {"k", "k"},
      {"!k", "!k"},
      {"k=v", "k=v"},
      {"k==v", "k==v"},
      {"k!=v", "k!=v"},
      {"k=", "k="},
      {"k!=", "k!="},
      {"k>1,k<10", "k>1,k<10"},
      {"k>007", "k>007"},
      {"  b = 2 ,  a  ", "a,b=2"},
      {"x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"},
      {"k in (b,a,b)", "k in (a,b)"},
      {"k in (,)", "k in ()"},
      {"k notin (a,)", "k notin (,a)"},
      {"in in (in),notin notin (notin)", "in in (in),notin notin (notin)"},
      {"example.com/k=v,!kubernetes.io/x", "example.com/k=v,!kubernetes.io/x"},
      {"k=a-b.c_d", "k=a-b.c_d"},
  };
  for (const Case& c : kCases) {
    INFO("selector: " << c.selector);
    absl::StatusOr<LabelSelector> s = LabelSelector::Parse(c.selector);
    REQUIRE(s.ok());
    CHECK(s->String() == c.canonical);
    CHECK(s->Empty() == c.canonical.empty());
  }
}

TEST_CASE("LabelSelector sorts requirements by key and keeps the input order of equal keys") {
  absl::StatusOr<LabelSelector> s = LabelSelector::Parse("b,k!=x,a,k=y");
  REQUIRE(s.ok());
  REQUIRE(s->Requirements().size() == 4);
  CHECK(s->Requirements()[2].op() == LabelOperator::kNotEquals);
  CHECK(s->Requirements()[3].op() == LabelOperator::kEquals);
  CHECK(s->String() == "a,b,k!=x,k=y");
}

struct MatchCase {
  std::string_view selector;
  LabelSet labels;
  bool matches;
};

void CheckMatches(const std::vector<MatchCase>& cases) {
  for (const MatchCase& c : cases) {
    absl::StatusOr<LabelSelector> s = LabelSelector::Parse(c.selector);
    REQUIRE(s.ok());
    INFO("selector: " << c.selector << ", labels: " << c.labels.size());
    CHECK(s->Matches(c.labels) == c.matches);
  }
}

TEST_CASE("LabelSelector treats != and notin as matching objects without the key") {
  CheckMatches({
      {"k!=v", {}, true},
      {"k!=v", {{"k", "w"}}, true},
      {"k!=v", {{"k", "v"}}, false},
      {"k!=", {{"k", ""}}, false},
      {"k notin (a,b)", {{"other", "a"}}, true},
      {"k notin (a,b)", {{"k", "c"}}, true},
      {"k notin (a,b)", {{"k", "b"}}, false},
      {"k notin ()", {{"k", ""}}, false},
  });
}

TEST_CASE("LabelSelector requires the key for =, == and in") {
  CheckMatches({
      {"k=v", {}, false},
      {"k=v", {{"k", "v"}}, true},
      {"k==v", {{"k", "v"}}, true},
      {"k=v", {{"k", "V"}}, false},
      {"k=", {}, false},
      {"k=", {{"k", ""}}, true},
      {"k in (a,b)", {{"k", "b"}}, true},
      {"k in (a,b)", {{"k", "c"}}, false},
      {"k in (a,b)", {}, false},
      {"k in ()", {{"k", ""}}, true},
  });
}

TEST_CASE("LabelSelector tests only presence for k and !k") {
  CheckMatches({
      {"k", {{"k", ""}}, true},
      {"k", {{"j", "k"}}, false},
      {"!k", {}, true},
      {"!k", {{"k", ""}}, false},
  });
}

TEST_CASE("LabelSelector compares > and < as 64-bit integers and skips non-integer labels") {
  CheckMatches({
      {"k>5", {{"k", "6"}}, true},
      {"k>5", {{"k", "5"}}, false},
      {"k>5", {{"k", "10"}}, true},  // Numeric, not lexical.
      {"k<5", {{"k", "05"}}, false},
      {"k<5", {{"k", "-3"}}, true},
      {"k>5", {{"k", "x"}}, false},
      {"k<5", {{"k", "x"}}, false},
      {"k<5", {}, false},
      {"k<5", {{"k", ""}}, false},
      {"k>0", {{"k", "9223372036854775807"}}, true},
      {"k>0", {{"k", "9223372036854775808"}}, false},  // Out of int64 range.
  });
}

TEST_CASE("LabelSelector ANDs its requirements and the empty selector matches everything") {
  CheckMatches({
      {"", {}, true},
      {"", {{"a", "b"}}, true},
      {"app=web,tier in (fe,be),!canary", {{"app", "web"}, {"tier", "fe"}}, true},
      {"app=web,tier in (fe,be),!canary", {{"app", "web"}, {"tier", "db"}}, false},
      {"app=web,tier in (fe,be),!canary",
       {{"app", "web"}, {"tier", "fe"}, {"canary", "true"}},
       false},
  });
}

TEST_CASE("LabelSelector RequiresExactMatch reports the first requirement on the key only") {
  struct Case {
    std::string_view selector;
    std::optional<std::string> value;
  };
  const Case kCases[] = {
      {"k=v", "v"},
      {"k==v", "v"},
      {"k in (v)", "v"},
      {"k in (a,b)", std::nullopt},
      {"k!=v", std::nullopt},
      {"k", std::nullopt},
      {"k>1", std::nullopt},
      {"j=v", std::nullopt},
      {"k=", ""},
      {"k!=x,k=y", std::nullopt},
      {"k=y,k!=x", "y"},
      {"", std::nullopt},
  };
  for (const Case& c : kCases) {
    INFO("selector: " << c.selector);
    absl::StatusOr<LabelSelector> s = LabelSelector::Parse(c.selector);
    REQUIRE(s.ok());
    CHECK(s->RequiresExactMatch("k") == c.value);
  }
}

TEST_CASE("LabelSet reads metadata.labels from JSON and skips non-string values") {
  rapidjson::Document doc;
  doc.Parse(R"({"b":"2","a":"1","n":3,"z":null,"e":""})");
  REQUIRE(!doc.HasParseError());
  const LabelSet labels(doc);
  CHECK(labels == LabelSet{{"a", "1"}, {"b", "2"}, {"e", ""}});
  REQUIRE(labels.Get("a") != nullptr);
  CHECK(*labels.Get("a") == "1");
  CHECK(labels.Get("n") == nullptr);
  CHECK(labels.Has("e"));

  rapidjson::Document not_object;
  not_object.Parse("null");
  CHECK(LabelSet(not_object).empty());
}

TEST_CASE("LabelSet keeps the last value of a repeated key, as a Go map does") {
  const LabelSet labels{{"k", "1"}, {"j", "x"}, {"k", "2"}};
  CHECK(labels.size() == 2);
  CHECK(*labels.Get("k") == "2");
}

TEST_CASE("GoQuote quotes as Go's %q does") {
  struct Case {
    std::string_view in;
    std::string_view out;
  };
  constexpr Case kCases[] = {
      {"abc", R"("abc")"},
      {"a\"b\\c", R"("a\"b\\c")"},
      {"\a\b\f\n\r\t\v", R"("\a\b\f\n\r\t\v")"},
      {"\0\x01\x1f\x7f"sv, R"("\x00\x01\x1f\x7f")"},
      {"é€😀", "\"é€😀\""},
      {"\xc2\xa0\xc2\xad\xe2\x80\x8b\xef\xbb\xbf", R"("\u00a0\u00ad\u200b\ufeff")"},
      {"\xf3\xa0\x80\x81", R"("\U000e0001")"},
      {"\xff\xc3(\xed\xa0\x80\xc0\xaf", R"("\xff\xc3(\xed\xa0\x80\xc0\xaf")"},
      {"'", R"("'")"},
  };
  for (const Case& c : kCases) CHECK(GoQuote(c.in) == c.out);
}

}  // namespace
}  // namespace kf
