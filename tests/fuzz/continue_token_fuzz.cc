// libFuzzer target: kf::DecodeContinue. A token that decodes has rv != 0 and survives
// re-encoding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cache/continue_token.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto token = kf::DecodeContinue(in);
  if (!token.ok()) return 0;
  // start may be empty: "/" is clean, and lists from the beginning (as storage.DecodeContinue).
  if (token->resource_version == 0) std::abort();
  auto again = kf::DecodeContinue(kf::EncodeContinue(token->start, token->resource_version));
  if (!again.ok() || again->start != token->start ||
      again->resource_version != token->resource_version) {
    std::abort();
  }
  return 0;
}
