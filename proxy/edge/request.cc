#include "proxy/edge/request.h"

#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace kf {

asio::awaitable<std::optional<std::string>> ReadWholeBody(BodySource& body, size_t limit,
                                                          beast::error_code* error) {
  std::string whole;
  std::array<char, 16384> piece;
  while (!body.done()) {
    auto [ec, n] = co_await body.ReadSome(piece);
    if (ec) {
      if (error != nullptr) *error = ec;
      co_return std::nullopt;
    }
    whole.append(piece.data(), n);
    if (whole.size() > limit) co_return std::nullopt;
  }
  co_return whole;
}

std::string_view BearerToken(const beast::http::fields& headers) {
  // Go: strings.TrimSpace(Header.Get("Authorization")), SplitN(" ", 3), scheme case-insensitive.
  std::string_view auth = headers[beast::http::field::authorization];
  while (!auth.empty() && (auth.front() == ' ' || auth.front() == '\t')) auth.remove_prefix(1);
  while (!auth.empty() && (auth.back() == ' ' || auth.back() == '\t')) auth.remove_suffix(1);
  const size_t space = auth.find(' ');
  if (space == std::string_view::npos) return {};
  const std::string_view scheme = auth.substr(0, space);
  if (scheme.size() != 6 || !absl::EqualsIgnoreCase(ToAbsl(scheme), "bearer")) return {};
  const std::string_view rest = auth.substr(space + 1);
  return rest.substr(0, rest.find(' '));
}

std::string WatchCapKey(const Identity& user) {
  // k8s.io/apiserver serviceaccount.PodUIDKey.
  constexpr std::string_view kPodUidExtra = "authentication.kubernetes.io/pod-uid";
  std::string key = user.username;
  for (const auto& [name, values] : user.extra) {
    if (name == kPodUidExtra && !values.empty()) absl::StrAppend(&key, "\x1f", values.front());
  }
  return key;
}

}  // namespace kf
