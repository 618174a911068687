#include "proxy/edge/field_syntax.h"

#include <catch2/catch.hpp>
#include <string>

namespace kf {
namespace {

TEST_CASE("Field values hold no control byte but HTAB, as Go's ValidHeaderFieldValue") {
  CHECK(IsFieldValue("system:node:n1"));
  CHECK(IsFieldValue("a\tb"));
  CHECK(IsFieldValue(" padded "));     // Blanks are a value's own business ...
  CHECK(IsFieldValue("caf\xc3\xa9"));  // ... and so is obs-text.
  CHECK(IsFieldValue(""));
  for (int c = 0; c < 0x20; ++c) {
    if (c == '\t') continue;
    INFO("byte " << c);
    CHECK_FALSE(IsFieldValue(std::string("x") + static_cast<char>(c) + "y"));
  }
  CHECK_FALSE(IsFieldValue("x\x7f"));
}

TEST_CASE("Field names are RFC 9110 tokens") {
  CHECK(IsFieldName("X-Remote-Extra-scopes.example.com%2Fa"));
  CHECK(IsFieldName("!#$%&'*+-.^_`|~09azAZ"));
  CHECK_FALSE(IsFieldName(""));
  CHECK_FALSE(IsFieldName("X-Remote-User:"));
  CHECK_FALSE(IsFieldName("X Remote"));
  CHECK_FALSE(IsFieldName("X-Remote\r\nX-Remote-Group"));
  CHECK_FALSE(IsFieldName("X-\xc3\xa9"));
}

TEST_CASE(
    "Identity values are refused for control bytes, edge blanks and sizes Beast cannot hold") {
  CHECK(CheckIdentityValue("user name", "system:node:n1").ok());
  CHECK(CheckIdentityValue("user name", "in\tside ok").ok());
  CHECK(CheckIdentityValue("uid", "").ok());
  CHECK(CheckIdentityValue("user name", std::string(kMaxFieldBytes, 'a')).ok());
  const absl::Status crlf = CheckIdentityValue("user name", "x\r\nX-Remote-Group: system:masters");
  CHECK(crlf.code() == absl::StatusCode::kInvalidArgument);
  // The log shows the bytes escaped, never raw.
  CHECK(crlf.message().find("0x0d at 1") != std::string::npos);
  CHECK(crlf.message().find("x\\r\\nX-Remote-Group") != std::string::npos);
  CHECK(crlf.message().find('\r') == std::string::npos);
  CHECK_FALSE(CheckIdentityValue("user name", "system:node:victim ").ok());
  CHECK_FALSE(CheckIdentityValue("user name", "\tsystem:node:victim").ok());
  CHECK_FALSE(CheckIdentityValue("user name", std::string("a\0b", 3)).ok());
  CHECK_FALSE(CheckIdentityValue("user name", "a\x7f").ok());
  CHECK_FALSE(CheckIdentityValue("user name", std::string(kMaxFieldBytes + 1, 'a')).ok());
}

TEST_CASE("CheckIdentity looks at the name, the uid, every group and every extra value") {
  const Identity good{"u", {"g1", "g2"}, "id", {{"Key With\nNewline", {"v"}}}};
  CHECK(CheckIdentity(good).ok());  // Extra keys are escaped when written, never raw.
  Identity bad = good;
  bad.username = "u\n";
  CHECK_FALSE(CheckIdentity(bad).ok());
  bad = good;
  bad.uid = " id";
  CHECK_FALSE(CheckIdentity(bad).ok());
  bad = good;
  bad.groups.back() = "g2\r";
  CHECK_FALSE(CheckIdentity(bad).ok());
  bad = good;
  bad.extra[0].second = {"v", "w\x01"};
  CHECK_FALSE(CheckIdentity(bad).ok());
}

TEST_CASE("CheckRequestHead refuses a head with a forbidden byte anywhere") {
  boost::beast::http::fields f;
  f.insert("Accept", "application/json");
  CHECK(CheckRequestHead("GET", "/api/v1/pods?limit=1", f).ok());
  CHECK_FALSE(CheckRequestHead("GET", "/api/v1/pods HTTP/1.1\r\nX: y", f).ok());
  CHECK_FALSE(CheckRequestHead("G ET", "/", f).ok());
  CHECK_FALSE(CheckRequestHead("GET", "", f).ok());
  f.insert("X-Injected", "a\r\nX-Remote-Group: system:masters");
  const absl::Status s = CheckRequestHead("GET", "/", f);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("X-Injected") != std::string::npos);
  boost::beast::http::fields names;
  names.insert("Bad Name", "v");
  CHECK_FALSE(CheckFields(names).ok());
}

TEST_CASE("LogEscaped shows control and non-ASCII bytes escaped and cuts long input") {
  CHECK(LogEscaped("a\r\nb") == "a\\r\\nb");
  CHECK(LogEscaped(std::string("\0", 1)) == "\\x00");
  CHECK(LogEscaped(std::string(300, 'a')) == std::string(256, 'a') + "...");
}

}  // namespace
}  // namespace kf
