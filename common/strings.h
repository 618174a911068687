// Bridges between std::string_view (our vocabulary type, and Beast's) and absl::string_view.
// Debian's abseil 20220623 is built with its own string_view class rather than an alias of
// std::string_view, so absl string functions need the conversion at the call site.
#ifndef KUBE_FANOUT_COMMON_STRINGS_H_
#define KUBE_FANOUT_COMMON_STRINGS_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace kf {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view ToStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_STRINGS_H_
