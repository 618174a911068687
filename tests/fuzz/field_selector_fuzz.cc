// libFuzzer target: kf::FieldSelector::Parse. A selector that parses prints (String()) as a
// selector that parses to the same terms (perhaps in another order: "==" prints as "=").
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <tuple>
#include <vector>

#include "cache/field_selector.h"

namespace {

std::vector<kf::FieldTerm> Sorted(std::vector<kf::FieldTerm> terms) {
  std::sort(terms.begin(), terms.end(), [](const kf::FieldTerm& a, const kf::FieldTerm& b) {
    return std::tie(a.field, a.op, a.value) < std::tie(b.field, b.op, b.value);
  });
  return terms;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto selector =
      kf::FieldSelector::Parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!selector.ok()) return 0;
  (void)selector->Matches(kf::FieldSet());
  auto again = kf::FieldSelector::Parse(selector->String());
  if (!again.ok() || Sorted(again->Terms()) != Sorted(selector->Terms())) std::abort();
  return 0;
}
