// A run's profile: per-call times on the host clock, and the Chrome / Perfetto trace.
#include "batch/executable_impl.hpp"

#include <cstdio>
#include <ostream>

namespace hcq::batch {

std::vector<Executable::CallTime> Executable::profile() const {
  const Impl& x = *impl_;
  if (!x.profile) throw InvalidInput("batch: profile() needs a schedule compiled with profile");
  if (x.last_run().empty()) throw InvalidInput("batch: profile() before the first run");
  wait();
  std::vector<CallTime> out;
  for (size_t i = 0; i < x.ops.size(); i++) {
    uint32_t q = x.ops[i].queue;
    const auto* ts = reinterpret_cast<const uint64_t*>(x.areas[x.area_of(q)].timestamps.host());
    Device& dev = x.device_of(q);
    const double ns_per_tick = 1e9 / double(dev.properties().timestamp_hz);
    auto host = [&](uint64_t t) {
      return int64_t(double(t) * ns_per_tick) + x.clock_offset_ns[q];
    };
    out.push_back({x.ops[i].call, &dev, x.queue_kind[q], x.queue_index[q], x.ops[i].name,
                   host(ts[4 * i + 1]),    // the timestamps sit in each record's second half
                   host(ts[4 * i + 3])});
  }
  return out;
}

namespace {
std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (uint8_t(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
      continue;
    }
    o += c;
  }
  return o + "\"";
}
}  // namespace

void Executable::write_trace(std::ostream& out) const {
  auto calls = profile();
  const Impl& x = *impl_;
  int64_t t0 = INT64_MAX;
  for (auto& c : calls) t0 = std::min(t0, c.start_ns);
  auto us = [&](int64_t ns) { return std::to_string(double(ns - t0) / 1000.0); };
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  // A process per device, a thread per queue (tid = the queue's index in the schedule).
  auto pid = [&](uint32_t q) { return x.queue_device[q] + 1; };
  for (size_t d = 0; d < x.devs.size(); d++)
    out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << d + 1
        << ",\"args\":{\"name\":" << json_string(x.devs[d]->name()) << "}},\n";
  for (uint32_t q = 0; q < x.queue_device.size(); q++)
    out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid(q) << ",\"tid\":" << q
        << ",\"args\":{\"name\":"
        << json_string(std::string(to_string(x.queue_kind[q])) + " queue " +
                       std::to_string(x.queue_index[q]))
        << "}},\n";
  for (size_t i = 0; i < calls.size(); i++) {
    const auto& c = calls[i];
    uint32_t q = x.ops[i].queue;
    out << "{\"name\":" << json_string(c.name) << ",\"cat\":\"call\",\"ph\":\"X\",\"pid\":"
        << pid(q) << ",\"tid\":" << q << ",\"ts\":" << us(c.start_ns) << ",\"dur\":"
        << std::to_string(double(std::max<int64_t>(0, c.end_ns - c.start_ns)) / 1000.0)
        << ",\"args\":{\"call\":" << c.call << "}},\n";
  }
  size_t id = 0;
  for (auto& [from, to] : x.edges) {  // a flow arrow from producer end to consumer start
    uint32_t qa = x.ops[from].queue, qb = x.ops[to].queue;
    out << "{\"name\":\"wait\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":" << id
        << ",\"pid\":" << pid(qa) << ",\"tid\":" << qa << ",\"ts\":" << us(calls[from].end_ns)
        << "},\n";
    out << "{\"name\":\"wait\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":"
        << id++ << ",\"pid\":" << pid(qb) << ",\"tid\":" << qb
        << ",\"ts\":" << us(calls[to].start_ns) << "},\n";
  }
  out << "{\"name\":\"end\",\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,\"ts\":0}\n]}\n";
}

}  // namespace hcq::batch
