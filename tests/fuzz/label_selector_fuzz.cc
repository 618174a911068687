// libFuzzer target: kf::LabelSelector::Parse. A selector that parses prints (String()) as a
// selector that parses to the same requirements.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cache/label_selector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto selector = kf::LabelSelector::Parse(in);
  if (!selector.ok()) return 0;
  (void)selector->Matches(kf::LabelSet());
  auto again = kf::LabelSelector::Parse(selector->String());
  if (!again.ok() || !(*again == *selector)) std::abort();
  return 0;
}
