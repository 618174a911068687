#include "proxy/serve/watch_return.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/api/go_strconv.h"
#include "common/strings.h"

namespace kf {

std::optional<std::string> CappedWatchTarget(std::string_view target, std::chrono::seconds cap) {
  constexpr std::string_view kKey = "timeoutSeconds";
  const size_t q = target.find('?');
  if (q == std::string_view::npos)
    return absl::StrCat(ToAbsl(target), "?", ToAbsl(kKey), "=", cap.count());
  const std::string_view query = target.substr(q + 1);
  std::optional<std::string_view> value;  // The one plain timeoutSeconds parameter's.
  size_t value_at = 0;
  int named = 0;
  for (size_t from = 0; from <= query.size();) {
    const size_t begin = from;
    const size_t amp = std::min(query.find('&', from), query.size());
    const std::string_view param = query.substr(begin, amp - begin);
    from = amp + 1;
    const size_t eq = param.find('=');
    const std::string_view name = param.substr(0, eq);
    // An escaped name as long could decode to it (the apiserver decodes names): left as sent.
    if (name.size() > kKey.size() - 1 && name.find_first_of("%+") != std::string_view::npos) {
      return std::nullopt;
    }
    if (name == kKey) {
      ++named;
      value = eq == std::string_view::npos ? std::string_view() : param.substr(eq + 1);
      value_at = q + 1 + begin + (eq == std::string_view::npos ? param.size() : eq + 1);
    }
  }
  if (named == 0) {
    return absl::StrCat(ToAbsl(target), query.empty() ? "" : "&", ToAbsl(kKey), "=", cap.count());
  }
  if (named > 1) return std::nullopt;
  // Escaped ('+' is a space) or not a number: the apiserver's to answer (400), as sent.
  if (value->find_first_of("%+") != std::string_view::npos) return std::nullopt;
  const std::optional<int64_t> asked = ParseGoInt(*value);
  if (!asked || (*asked > 0 && *asked <= cap.count()) || *asked < 0) return std::nullopt;
  return absl::StrCat(ToAbsl(target.substr(0, value_at)), cap.count(),
                      ToAbsl(target.substr(value_at + value->size())));
}

std::chrono::seconds WatchReturnCap(std::chrono::seconds negative_review_ttl) {
  return std::max(std::chrono::seconds(5), 2 * negative_review_ttl);
}

}  // namespace kf
