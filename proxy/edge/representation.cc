#include "proxy/edge/representation.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace kf {

bool PrettyUserAgent(std::string_view ua) {
  // apiserver handlers/responsewriters: pretty for curl, wget and browsers.
  for (std::string_view p : {"curl", "Wget", "Mozilla/"}) {
    if (ua.substr(0, p.size()) == p) return true;
  }
  return false;
}

bool ApiserverRendersAnswer(const RequestInfo&, const boost::beast::http::fields& headers) {
  for (const auto& f : headers) {
    if (absl::StartsWithIgnoreCase(ToAbsl(f.name_string()), "impersonate-")) return true;
  }
  return false;
}

namespace {

struct Clause {
  std::string type;  // "application/json", "*/*", ...
  double q = 1;
  int specificity = 2;  // 0 "*/*", 1 "x/*", 2 "x/y".
  // The parameters NegotiateMediaTypeOptions reads (goautoneg keeps the last of a repeated one).
  std::optional<std::string> as, group, version, stream;
  bool pretty = false, server_version = false;
  // drop= (the managedFields opt-out, Kubernetes 1.38's alpha ManagedFieldsOptOut: an answer
  // without metadata.managedFields where the upstream's gate is on, the full object elsewhere).
  std::optional<std::string> drop;
};

void ReadParameter(absl::string_view p, Clause* c) {
  const size_t eq = p.find('=');
  if (eq == absl::string_view::npos) return;
  const absl::string_view key = absl::StripAsciiWhitespace(p.substr(0, eq));
  const std::string value(absl::StripAsciiWhitespace(p.substr(eq + 1)));
  if (key == "q") {
    double q = 1;
    if (absl::SimpleAtod(value, &q)) c->q = q;
  } else if (key == "as") {
    c->as = value;
  } else if (key == "g") {
    c->group = value;
  } else if (key == "v") {
    c->version = value;
  } else if (key == "stream") {
    c->stream = value;
  } else if (key == "pretty") {
    c->pretty = value == "1";
  } else if (key == "sv") {
    c->server_version = true;
  } else if (key == "drop") {
    c->drop = value;
  }
}

std::vector<Clause> ParseAccept(std::string_view accept) {
  std::vector<Clause> out;
  for (absl::string_view part : absl::StrSplit(ToAbsl(accept), ',')) {
    std::vector<absl::string_view> params = absl::StrSplit(part, ';');
    Clause c;
    c.type = absl::AsciiStrToLower(absl::StripAsciiWhitespace(params[0]));
    if (c.type.empty()) continue;
    for (size_t i = 1; i < params.size(); ++i) ReadParameter(params[i], &c);
    if (c.type == "*/*") {
      c.specificity = 0;
    } else if (absl::EndsWith(c.type, "/*")) {
      c.specificity = 1;
    }
    if (c.q > 0) out.push_back(std::move(c));
  }
  // goautoneg's order (a stable sort for the few clauses clients send): q, then specificity.
  std::stable_sort(out.begin(), out.end(), [](const Clause& a, const Clause& b) {
    if (a.q != b.q) return a.q > b.q;
    return a.specificity > b.specificity;
  });
  return out;
}

// The conversion a clause asks for, as the apiserver's AllowsConversion allows it for a
// resource's endpoint (handlers/rest.go): nullopt, not allowed (the clause is skipped).
std::optional<Conversion> ConversionOf(const Clause& c) {
  if (!c.as && !c.group && !c.version) return Conversion::kNone;
  const std::string group = c.group.value_or(""), version = c.version.value_or("");
  const std::string kind = c.as.value_or("");
  if (group != "meta.k8s.io" || (version != "v1" && version != "v1beta1")) return std::nullopt;
  if (kind == "Table") {
    if (c.type != "application/json" && c.type != "application/yaml") return std::nullopt;
    return Conversion::kApiserver;
  }
  if (kind != "PartialObjectMetadata" && kind != "PartialObjectMetadataList") return std::nullopt;
  if (version != "v1") return Conversion::kApiserver;
  return kind == "PartialObjectMetadata" ? Conversion::kPartialMetadata
                                         : Conversion::kPartialMetadataList;
}

// What a clause's drop= does to `r`, the upstream doing `drop` with it.
void ApplyDrop(const Clause& c, Drop drop, Representation* r) {
  if (!c.drop || drop == Drop::kIgnored) return;
  if (drop == Drop::kUnknown) {  // Which the upstream does is its own (docs/fidelity.md).
    r->media = MediaChoice::kApiserver;
    r->asks_drop = true;
  } else if (*c.drop == "metadata.managedFields") {
    r->drop_managed_fields = true;
  } else if (!c.drop->empty()) {
    r->media = MediaChoice::kApiserver;  // Not acceptable to it: its 406 (or a next clause).
  }
}

// The representation a clause picks, or nullopt when no serializer takes it.
std::optional<Representation> Pick(const Clause& c, bool has_protobuf, bool has_cbor, Drop drop) {
  const bool json = c.type == "application/json" || c.type == "application/*" || c.type == "*/*";
  const bool protobuf = c.type == "application/vnd.kubernetes.protobuf" && has_protobuf;
  const bool cbor = c.type == "application/cbor";
  const bool other = c.type == "application/yaml" || cbor;
  if (!json && !protobuf && !other) return std::nullopt;
  if (c.stream && !c.stream->empty() && (*c.stream != "watch" || c.type == "application/yaml")) {
    return std::nullopt;  // No such stream serializer.
  }
  const std::optional<Conversion> conversion = ConversionOf(c);
  if (!conversion) return std::nullopt;
  Representation r{.media = MediaChoice::kApiserver, .conversion = *conversion};
  if (json) r.media = c.pretty ? MediaChoice::kApiserver : MediaChoice::kJson;
  if (protobuf) r.media = MediaChoice::kProtobuf;
  if (cbor && has_cbor) r.media = MediaChoice::kCbor;
  if (c.server_version) r.conversion = Conversion::kApiserver;
  ApplyDrop(c, drop, &r);
  return r;  // A serializer the cache does not hold (YAML, CBOR it cannot serve): the apiserver's.
}

}  // namespace

Representation NegotiateRepresentation(const RequestInfo& info,
                                       const boost::beast::http::fields& headers, bool has_protobuf,
                                       bool allow_conversion, bool has_cbor, Drop drop) {
  namespace http = boost::beast::http;
  Representation choice;
  const std::string_view accept = headers[http::field::accept];
  if (!absl::StripAsciiWhitespace(ToAbsl(accept)).empty()) {
    // No clause a serializer matches: the apiserver's answer.
    choice.media = MediaChoice::kApiserver;
    for (const Clause& c : ParseAccept(accept)) {
      if (!allow_conversion && (c.as || c.group || c.version)) continue;
      if (std::optional<Representation> picked = Pick(c, has_protobuf, has_cbor, drop)) {
        choice = *picked;
        break;
      }
    }
  }
  if (choice.media == MediaChoice::kJson &&
      (PrettyUserAgent(headers[http::field::user_agent]) || info.query.Has("pretty"))) {
    choice.media = MediaChoice::kApiserver;
  }
  return choice;
}

MediaChoice NegotiateMedia(const RequestInfo& info, const boost::beast::http::fields& headers,
                           bool has_protobuf) {
  const Representation r = NegotiateRepresentation(info, headers, has_protobuf);
  return r.conversion == Conversion::kNone ? r.media : MediaChoice::kApiserver;
}

}  // namespace kf
