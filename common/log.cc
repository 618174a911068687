#include "common/log.h"

#include <unistd.h>

#include <cerrno>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace kf {
namespace {

const char* LevelName(Logger::Level level) {
  switch (level) {
    case Logger::Level::kDebug:
      return "debug";
    case Logger::Level::kInfo:
      return "info";
    case Logger::Level::kWarning:
      return "warning";
    case Logger::Level::kError:
      return "error";
  }
  return "info";
}

void WriteString(rapidjson::Writer<rapidjson::StringBuffer>& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

}  // namespace

std::string Logger::Format(Level level, std::string_view msg,
                           std::initializer_list<LogField> fields) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("ts");
  WriteString(w, absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()));
  w.Key("level");
  w.String(LevelName(level));
  w.Key("msg");
  WriteString(w, msg);
  for (const LogField& f : fields) {
    w.Key(f.key.data(), static_cast<rapidjson::SizeType>(f.key.size()));
    std::visit(
        [&w](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string_view>) {
            WriteString(w, v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            w.Int64(v);
          } else if constexpr (std::is_same_v<T, double>) {
            w.Double(v);
          } else {
            w.Bool(v);
          }
        },
        f.value);
  }
  w.EndObject();
  std::string line(buf.GetString(), buf.GetSize());
  line.push_back('\n');
  return line;
}

void Logger::Log(Level level, std::string_view msg, std::initializer_list<LogField> fields) const {
  if (!Enabled(level)) return;
  const std::string line = Format(level, msg, fields);
  // One write per line keeps lines whole across threads; a short write (full pipe) is retried.
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // Nowhere to report a failing log sink.
    off += static_cast<size_t>(n);
  }
}

}  // namespace kf
