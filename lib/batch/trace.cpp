// A run's profile: per-call times on the host clock, and the Chrome / Perfetto trace
// (docs/trace.md describes what the trace holds).
#include "batch/executable_impl.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>

namespace hcq::batch {
namespace {

// GPU ticks to nanoseconds in integers (a double loses nanoseconds past 2^53 ticks).
int64_t ticks_to_ns(uint64_t ticks, uint64_t hz) {
  return int64_t((unsigned __int128)ticks * 1'000'000'000u / hz);
}

// Op i's start and end in host steady_clock nanoseconds: the timestamps sit in each 16-byte
// record's second half, the records two per op.
std::pair<int64_t, int64_t> host_times(const Executable::Impl& x, size_t i) {
  const uint32_t q = x.ops[i].queue;
  const auto* ts = reinterpret_cast<const uint64_t*>(x.areas[x.area_of(q)].timestamps.host());
  const uint64_t hz = x.device_of(q).properties().timestamp_hz;
  const int64_t offset = x.clock_sync[q].offset_ns;
  return {ticks_to_ns(ts[4 * i + 1], hz) + offset, ticks_to_ns(ts[4 * i + 3], hz) + offset};
}

}  // namespace

std::vector<Executable::CallTime> Executable::profile() const {
  const Impl& x = *impl_;
  if (!x.profile) throw InvalidInput("batch: profile() needs a schedule compiled with profile");
  if (x.last_run().empty()) throw InvalidInput("batch: profile() before the first run");
  wait();
  for (auto& area : impl_->areas) area.timestamps.refresh();  // where they are shadows
  std::vector<CallTime> out;
  for (size_t i = 0; i < x.ops.size(); i++) {
    const uint32_t q = x.ops[i].queue;
    auto [start, end] = host_times(x, i);
    out.push_back({x.ops[i].call, &x.device_of(q), x.queue_kind[q], x.queue_index[q],
                   x.ops[i].name, start, end});
  }
  return out;
}

// The Trace Event Format (the public "Trace Event Format" document; Perfetto's JSON importer
// follows it): "X" complete events on a track per queue ("M" metadata names the tracks), and
// "s"/"f" flow events for the waits. A flow event binds to the slice open at its timestamp on
// its own pid/tid (Perfetto: the topmost slice on that track; chrome://tracing: the slice
// enclosing it), and its start and end match by id, cat and name. So both ends sit at the
// middle of their slice, computed in integer nanoseconds: strictly inside whenever the slice
// lasts 2 ns or more, and written right after their slice, so a tie in time still sorts them
// after it. Times are host steady_clock (CLOCK_MONOTONIC) microseconds.
void Executable::write_trace(std::ostream& out) const {
  const Impl& x = *impl_;
  const std::vector<CallTime> calls = profile();  // checks, and waits for the run
  std::vector<std::optional<uint64_t>> sequences;
  {
    std::lock_guard lk(x.state_mu);
    sequences = x.capture_sequence;
  }
  using nlohmann::json;
  auto us = [](int64_t ns) { return double(ns) / 1000.0; };
  // A process per device (pid = its index + 1), a thread per queue with calls (tid = the
  // queue's index in the compilation + 1): pid and tid 0 mean the kernel to some importers.
  auto pid = [&](uint32_t q) { return x.queue_device[q] + 1; };
  auto tid = [](uint32_t q) { return q + 1; };
  json events = json::array();
  std::vector<bool> has_calls(x.queue_device.size(), false), device_has(x.devs.size(), false);
  for (const auto& op : x.ops) has_calls[op.queue] = device_has[x.queue_device[op.queue]] = true;
  for (uint32_t d = 0; d < x.devs.size(); d++) {
    if (!device_has[d]) continue;
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", d + 1},
                      {"args", {{"name", x.devs[d]->name()}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", d + 1},
                      {"args", {{"sort_index", d}}}});
  }
  for (uint32_t q = 0; q < x.queue_device.size(); q++) {
    if (!has_calls[q]) continue;
    std::string name = std::string(to_string(x.queue_kind[q])) + " queue " +
                       std::to_string(x.queue_index[q]);
    if (x.host_queue[q]) name += " (host)";
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid(q)}, {"tid", tid(q)},
                      {"args",
                       {{"name", name},
                        {"clock_offset_ns", x.clock_sync[q].offset_ns},
                        {"clock_sync_window_ns", x.clock_sync[q].window_ns}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid(q)},
                      {"tid", tid(q)}, {"args", {{"sort_index", q}}}});
  }
  auto middle = [&](size_t i) {
    return calls[i].start_ns + std::max<int64_t>(0, calls[i].end_ns - calls[i].start_ns) / 2;
  };
  auto flow = [&](const char* ph, size_t edge, size_t op) {
    const uint32_t q = x.ops[op].queue;
    json f = {{"name", "wait"}, {"cat", "dependency"}, {"ph", ph}, {"id", edge},
              {"pid", pid(q)}, {"tid", tid(q)}, {"ts", us(middle(op))}};
    if (ph[0] == 'f') f["bp"] = "e";  // bind to the enclosing slice, not the next one
    return f;
  };
  std::vector<std::vector<size_t>> flows_from(x.ops.size()), flows_to(x.ops.size());
  for (size_t e = 0; e < x.edges.size(); e++) {
    flows_from[x.edges[e].first].push_back(e);
    flows_to[x.edges[e].second].push_back(e);
  }
  for (size_t i = 0; i < x.ops.size(); i++) {
    const Impl::OpInfo& op = x.ops[i];
    const uint32_t q = op.queue;
    json args = {{"call", op.call}, {"op", i}};
    if (!op.kernel.empty()) {
      args["kernel"] = op.kernel;
      args["grid"] = {op.grid.x, op.grid.y, op.grid.z};
      args["block"] = {op.block.x, op.block.y, op.block.z};
    }
    if (op.remote_read) {  // its destination; the peer's address is a run's scalar
      args["bytes"] = op.size;
      args["dst_address"] = x.slot_address(op.dst_slot, op.dst_offset);
    } else if (op.remote) {  // a remote write (its source; the peer's address is a run's scalar)
      if (op.size) {
        args["bytes"] = op.size;
        args["src_address"] = x.slot_address(op.src_slot, op.src_offset);
      }
    } else if (op.kernel.empty() || op.size) {  // a copy or load (a kernel copy too)
      args["bytes"] = op.size;
      args["dst_address"] = x.slot_address(op.dst_slot, op.dst_offset);
      if (op.path.empty()) {
        args["src_address"] = x.slot_address(op.src_slot, op.src_offset);
      } else {
        args["src_file"] = op.path;
        args["src_file_offset"] = op.src_offset;
      }
    }
    // The capture record this op's commands went out in, and where in it: `hcq dump`'s
    // "submission N" and its packets' dword offsets. Null without a capture, or on the host.
    if (!x.host_queue[q] && sequences.size() > q && sequences[q])
      args["capture"] = {{"submission", *sequences[q]},
                         {"dwords", {op.dword_begin, op.dword_end}}};
    else
      args["capture"] = nullptr;
    events.push_back({{"name", op.name}, {"cat", "call"}, {"ph", "X"}, {"pid", pid(q)},
                      {"tid", tid(q)}, {"ts", us(calls[i].start_ns)},
                      {"dur", us(std::max<int64_t>(0, calls[i].end_ns - calls[i].start_ns))},
                      {"args", std::move(args)}});
    for (size_t e : flows_to[i]) events.push_back(flow("f", e, i));
    for (size_t e : flows_from[i]) events.push_back(flow("s", e, i));
  }
  json trace = {{"displayTimeUnit", "ns"},
                {"otherData",
                 {{"clock", "host CLOCK_MONOTONIC (std::chrono::steady_clock), microseconds"},
                  {"generator", "hcq batch"}}},
                {"traceEvents", std::move(events)}};
  // Names are bytes from files and kernels: invalid UTF-8 becomes U+FFFD, never a throw.
  out << trace.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  out.flush();
  if (!out) throw Error("batch: writing the trace failed");
}

}  // namespace hcq::batch
