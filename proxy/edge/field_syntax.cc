#include "proxy/edge/field_syntax.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace kf {
namespace {

bool IsTchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsControl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

// Where the first forbidden byte of `value` is, or npos.
size_t FirstControl(std::string_view value) {
  for (size_t i = 0; i < value.size(); ++i) {
    if (IsControl(static_cast<unsigned char>(value[i]))) return i;
  }
  return std::string_view::npos;
}

}  // namespace

bool IsFieldName(std::string_view name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (!IsTchar(c)) return false;
  }
  return true;
}

bool IsFieldValue(std::string_view value) { return FirstControl(value) == std::string_view::npos; }

bool IsRequestTarget(std::string_view target) {
  for (unsigned char c : target) {
    if (c <= 0x20 || c == 0x7f) return false;
  }
  return !target.empty();
}

absl::Status CheckIdentityValue(std::string_view what, std::string_view value) {
  if (value.size() > kMaxFieldBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), " is ", value.size(), " bytes, past ", kMaxFieldBytes));
  }
  if (const size_t at = FirstControl(value); at != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), " holds the control byte 0x",
                     absl::Hex(static_cast<unsigned char>(value[at]), absl::kZeroPad2), " at ", at,
                     ": \"", LogEscaped(value), "\""));
  }
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  if (!value.empty() && (blank(value.front()) || blank(value.back()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), " has leading or trailing blanks: \"", LogEscaped(value), "\""));
  }
  return absl::OkStatus();
}

absl::Status CheckIdentity(const Identity& user) {
  if (auto s = CheckIdentityValue("user name", user.username); !s.ok()) return s;
  if (auto s = CheckIdentityValue("uid", user.uid); !s.ok()) return s;
  for (const auto& g : user.groups) {
    if (auto s = CheckIdentityValue("group", g); !s.ok()) return s;
  }
  for (const auto& [key, values] : user.extra) {
    for (const auto& v : values) {
      if (auto s = CheckIdentityValue(absl::StrCat("extra ", LogEscaped(key)), v); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFields(const boost::beast::http::fields& fields) {
  for (const auto& f : fields) {
    const std::string_view name = f.name_string();
    const std::string_view value = f.value();
    if (name.size() > kMaxFieldBytes || !IsFieldName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("field name \"", LogEscaped(name), "\" is not an HTTP token"));
    }
    if (value.size() > kMaxFieldBytes || !IsFieldValue(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field ", ToAbsl(name), " holds bytes HTTP forbids: \"", LogEscaped(value), "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRequestHead(std::string_view method, std::string_view target,
                              const boost::beast::http::fields& fields) {
  if (method.size() > kMaxFieldBytes || !IsFieldName(method) || !IsRequestTarget(target)) {
    return absl::InvalidArgumentError(absl::StrCat("request line holds bytes HTTP forbids: \"",
                                                   LogEscaped(method), " ", LogEscaped(target),
                                                   "\""));
  }
  return CheckFields(fields);
}

std::string LogEscaped(std::string_view bytes) {
  constexpr size_t kShown = 256;
  std::string out = absl::CHexEscape(ToAbsl(bytes.substr(0, kShown)));
  if (bytes.size() > kShown) absl::StrAppend(&out, "...");
  return out;
}

}  // namespace kf
