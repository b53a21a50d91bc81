#include "dump.hpp"

#include <stdio_ext.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include "amd/decode.hpp"
#include "nv/push.hpp"
#include "qcom/decode.hpp"
#include "core/capture.hpp"
#include "core/capture_ring.hpp"
#include "core/error.hpp"
#include "os/output_file.hpp"
#include "buffers.hpp"
#include "json.hpp"
#include "numbers.hpp"
#include "usage.hpp"

namespace hcq::tools {
namespace {

struct Options : DumpArgs {
  uint64_t first = 0, last = UINT64_MAX;
};


// --raw reads at most this much input: a command stream pasted from a log or a ring is far
// smaller, and /dev/zero must end.
constexpr uint64_t kMaxRawBytes = 64ull << 20;
// Packets are decoded this many dwords at a time and printed before the next window, so memory
// holds one window's decoded packets (about 50 bytes per input byte), not the whole stream's.
constexpr size_t kDecodeWindow = 1 << 18;

// The forms of --raw's hex text, for messages and --help.
constexpr const char* kTextForms =
    "expected hex dwords such as c0001000 or 0xc0001000, separated by spaces or commas; a "
    "line may start with a kernel-log timestamp [  12.345678] and a prefix ending in ':'";

// Standard output, every write checked: `hcq dump x > /dev/full` must fail, not report success.
[[noreturn]] void output_failed() {
  const int err = errno;
  // Reported here, once: what is still buffered is dropped and the stream's error cleared, so
  // main()'s last flush neither retries it nor reports it a second time.
  __fpurge(stdout);
  std::clearerr(stdout);
  throw OsError("dump: writing the output to standard output failed", err);
}
__attribute__((format(printf, 1, 2))) void out(const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  const int n = std::vprintf(format, ap);
  va_end(ap);
  if (n < 0) output_failed();
}
// The last buffered bytes are written here: their failure is reported too.
void finish_output() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) output_failed();
}

// Where a packet came from, for the JSON lines and the headings.
struct Context {
  long long submission = -1;
  std::string device, queue;
  int queue_index = 0;
  bool indirect = false;
  uint64_t ib_address = 0;
};

void print_packet(const amd::DecodedPacket& p, const Context& c, const Options& o, int indent) {
  if (!o.packet.empty() && p.name != o.packet) return;
  if (o.json) {
    Json j;
    if (c.submission >= 0) {
      j["submission"] = c.submission;
      j["device"] = c.device;
      j["queue"] = c.queue;
      j["queue_index"] = c.queue_index;
    }
    j["segment"] = c.indirect ? "indirect" : "ring";
    if (c.indirect) j["ib_address"] = c.ib_address;
    j["offset"] = p.offset;
    j["dwords"] = p.dwords;
    j["header"] = p.header;
    j["name"] = p.name;
    j["ok"] = p.ok;
    if (!p.ok) j["problem"] = p.problem;
    Json& fields = j["fields"] = Json::object();
    for (const auto& f : p.fields) fields[f.first] = f.second;
    if (!p.value_names.empty()) {
      Json& names = j["names"];
      for (const auto& n : p.value_names) names[n.first] = n.second;
    }
    if (!p.registers.empty()) {
      Json& registers = j["registers"];
      for (const auto& r : p.registers) registers[r.first] = r.second;
    }
    out("%s\n", json_line(j).c_str());
    return;
  }
  out("%*s%s\n", indent, "", hcq::to_text(p).c_str());
}

// Decodes `words` a window at a time and hands each packet, its offset from the start of
// `words`, to `f`. Every decoder reads each packet on its own, so a packet decoded from its own
// start reads the same in any window; one that reaches a window's end may have been cut by it
// and is decoded again at the start of the next (with a larger window when it was the first).
void for_each_packet(
    std::span<const uint32_t> words,
    const std::function<std::vector<DecodedPacket>(std::span<const uint32_t>)>& decode,
    const std::function<void(const DecodedPacket&)>& f) {
  size_t at = 0, window = kDecodeWindow;
  while (at < words.size()) {
    const size_t n = std::min(window, words.size() - at);
    const bool last = at + n == words.size();
    size_t used = 0;
    for (DecodedPacket& p : decode(words.subspan(at, n))) {
      if (!last && p.offset + p.dwords >= n) break;
      used = p.offset + p.dwords;
      p.offset += uint32_t(at);
      f(p);
    }
    window = used ? kDecodeWindow : window * 2;
    at += used;
  }
}

// The decoder for a captured device's packets, by vendor; null when hcq has none for it.
using StreamDecoder = std::function<std::vector<DecodedPacket>(std::span<const uint32_t>, bool)>;
StreamDecoder decoder_for(const capture::DeviceRecord& d) {
  if (amd::Gen gen; d.vendor == "AMD" && amd::parse_gen(d.arch, gen))
    return [gen](std::span<const uint32_t> w, bool copy_queue) {
      return copy_queue ? amd::decode_sdma(w, gen) : amd::decode_pm4(w, gen);
    };
  if (nv::Gen gen; d.vendor == "NVIDIA" && nv::parse_gen(d.arch, gen))
    return [gen](std::span<const uint32_t> w, bool) { return nv::decode_push(w, gen); };
  if (qcom::Gen gen; d.vendor == "Qualcomm" && qcom::parse_gen(d.arch, gen))
    return [gen](std::span<const uint32_t> w, bool) { return qcom::decode_cp(w, gen); };
  return nullptr;
}

// Text is what a person pastes: printable ASCII, tabs and line ends, and UTF-8 beyond ASCII (a
// log's quotes). Any other control byte, NUL above all, means binary: command streams are full
// of zero bytes.
bool looks_like_text(const std::string& data) {
  if (data.empty()) return false;
  for (const char c : data) {
    const auto ch = uint8_t(c);
    if ((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7f) return false;
  }
  return true;
}

// A token from the input as an error message shows it: at most 40 bytes, bytes that are not
// printable ASCII as \xNN (a hostile file must not send escape sequences to the terminal).
std::string shown(std::string_view word) {
  constexpr size_t kMax = 40;
  std::string out;
  for (size_t i = 0; i < word.size() && i < kMax; i++) {
    const auto c = static_cast<unsigned char>(word[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (word.size() > kMax) out += "...";
  return out;
}

bool is_hex_word(std::string_view w) {
  if (has_hex_prefix(w)) w.remove_prefix(2);
  return !w.empty() && w.size() <= 8 &&
         std::all_of(w.begin(), w.end(), [](char c) { return std::isxdigit(uint8_t(c)); });
}

// Hex text, a line at a time. A line may start with a kernel-log timestamp ("[  123.456789]"),
// then anything up to its last ':' ("amdgpu 0000:03:00.0: ring gfx:", an offset "00000010:")
// is a prefix; what follows is dwords in hex, with or without 0x, separated by spaces or
// commas. A line that holds anything else is refused with its number, not skipped: a typo
// must not shift every later dword.
std::vector<uint32_t> parse_hex_text(const std::string& data, const std::string& name) {
  std::vector<uint32_t> words;
  size_t line_number = 0, start = 0;
  while (start < data.size()) {
    size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    std::string_view line(data.data() + start, end - start);
    start = end + 1;
    line_number++;
    const size_t first = line.find_first_not_of(" \t");
    line.remove_prefix(first == std::string_view::npos ? line.size() : first);
    if (line.starts_with('[')) {  // dmesg's "[seconds.micros]"
      const size_t close = line.find(']');
      if (close != std::string_view::npos &&
          line.substr(1, close - 1).find_first_not_of(" 0123456789.") == std::string_view::npos)
        line.remove_prefix(close + 1);
    }
    if (const size_t colon = line.rfind(':'); colon != std::string_view::npos)
      line.remove_prefix(colon + 1);
    size_t at = 0;
    while (at < line.size()) {
      const size_t b = line.find_first_not_of(" \t\r,", at);
      if (b == std::string_view::npos) break;
      size_t e = line.find_first_of(" \t\r,", b);
      if (e == std::string_view::npos) e = line.size();
      const std::string_view word = line.substr(b, e - b);
      if (!is_hex_word(word))
        throw InvalidInput("dump: " + name + " line " + std::to_string(line_number) + ": '" +
                           shown(word) + "' is not a 32-bit hex dword (" + kTextForms +
                           "; --format binary reads the file as binary)");
      const std::string_view digits = has_hex_prefix(word) ? word.substr(2) : word;
      uint32_t v = 0;
      std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
      words.push_back(v);
      at = e;
    }
  }
  return words;
}

// --raw's input: `format` "text", "binary" or "auto" (text when looks_like_text says so).
std::vector<uint32_t> read_raw(const std::string& file, const std::string& format) {
  const bool from_stdin = file == "-";
  const std::string path = from_stdin ? "/dev/stdin" : file,
                    name = from_stdin ? "standard input" : file;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!in) throw OsError("dump: cannot open " + name, errno);
  struct stat st {};
  if (::fstat(::fileno(in.get()), &st) == 0 && S_ISDIR(st.st_mode))
    throw InvalidInput("dump: " + name + " is a directory, not a file of dwords");
  std::string data;
  char chunk[1 << 16];
  while (size_t n = std::fread(chunk, 1, sizeof chunk, in.get())) {
    if (data.size() + n > kMaxRawBytes)
      throw InvalidInput("dump: " + name + " holds more than " + std::to_string(kMaxRawBytes) +
                         " bytes (" + std::to_string(kMaxRawBytes >> 20) +
                         " MiB), the most --raw reads");
    data.append(chunk, n);
  }
  if (std::ferror(in.get()))
    throw OsError("dump: reading " + name + " failed after " + std::to_string(data.size()) +
                      " bytes",
                  errno);
  if (format == "text" || (format == "auto" && looks_like_text(data)))
    return parse_hex_text(data, name);
  if (data.size() % 4)
    throw InvalidInput("dump: " + name + " is " + std::to_string(data.size()) +
                       " bytes, not whole dwords (binary input is little-endian dwords)");
  std::vector<uint32_t> words(data.size() / 4);
  std::memcpy(words.data(), data.data(), data.size());
  return words;
}

// "3 records dropped": where a live ring left records out (its writer found it full).
void print_dropped(uint64_t n, const Options& o) {
  if (o.json)
    out("%s\n", json_line(Json{{"dropped", n}}).c_str());
  else
    out("%llu record%s dropped\n", static_cast<unsigned long long>(n), n == 1 ? "" : "s");
}

// Decodes the records `r` gives; `live` (a ring being followed) flushes after each record so
// they show as they arrive. Returns the dropped records the stream announced.
uint64_t dump_records(capture::Reader& r, const Options& o, bool live) {
  std::map<uint32_t, capture::DeviceRecord> devices;
  uint64_t announced = 0;
  while (auto rec = r.next()) {
    if (live) finish_output();
    if (rec->type == capture::RecordType::Dropped) {
      announced += rec->dropped;
      print_dropped(rec->dropped, o);
      continue;
    }
    if (rec->type == capture::RecordType::Device) {
      devices[rec->device.id] = rec->device;
      continue;
    }
    if (rec->type == capture::RecordType::DeviceEnd) {
      if (o.packet.empty()) {
        if (o.json)
          out("%s\n", json_line(Json{{"closed", rec->end.device}, {"timeline", rec->end.timeline}})
                         .c_str());
        else
          out("closed device %u  (timeline %llu)\n", rec->end.device,
              static_cast<unsigned long long>(rec->end.timeline));
      }
      continue;
    }
    if (rec->type == capture::RecordType::Memory) {  // "full" captures: buffer contents
      if (o.packet.empty()) {
        const auto& m = rec->memory;
        if (o.json)
          out("%s\n",
              json_line(Json{{"memory", m.address}, {"device", m.device}, {"bytes", m.bytes.size()}})
                  .c_str());
        else
          out("memory %s  %zu bytes  (device %u)\n", hex(m.address).c_str(), m.bytes.size(),
              m.device);
      }
      continue;
    }
    const auto& s = rec->submission;
    if (s.sequence < o.first || s.sequence > o.last) continue;
    const char* queue = s.queue == QueueKind::Compute ? "compute" : "copy";
    if (!o.queue.empty() && o.queue != queue) continue;
    auto dev = devices.find(s.device);
    if (dev == devices.end())
      throw InvalidInput("dump: submission " + std::to_string(s.sequence) +
                         " names device " + std::to_string(s.device) + ", which no record declared");
    StreamDecoder decode = decoder_for(dev->second);
    if (!decode) {
      out("submission %llu: %s %s: no decoder for this device\n",
          static_cast<unsigned long long>(s.sequence), dev->second.vendor.c_str(),
          dev->second.arch.c_str());
      continue;
    }
    Context c{(long long)s.sequence, dev->second.name, queue, int(s.queue_index), false, 0};
    if (!o.json)
      out("submission %llu  %s (%s %s)  %s queue %u\n",
          static_cast<unsigned long long>(s.sequence), dev->second.name.c_str(),
          dev->second.vendor.c_str(), dev->second.arch.c_str(), queue, s.queue_index);
    for (auto& seg : s.segments) {
      c.indirect = seg.indirect;
      c.ib_address = seg.address;
      if (!o.json)
        out(seg.indirect ? "  indirect buffer %s (%zu dwords)\n" : "  ring%s%zu dwords\n",
            seg.indirect ? hex(seg.address).c_str() : " ", seg.words.size());
      const bool copy = s.queue == QueueKind::Copy;
      for_each_packet(
          seg.words, [&](std::span<const uint32_t> w) { return decode(w, copy); },
          [&](const DecodedPacket& p) { print_packet(p, c, o, 4); });
    }
  }
  return announced;
}

int dump_capture(const Options& o) {
  capture::Reader r(o.file == "-" ? "/dev/stdin" : o.file);
  dump_records(r, o, false);
  return 0;
}

// --follow: the ring's records as the writer appends them, until it is gone and they are all
// read; then the drops the stream could not announce (the writer went while the ring was
// full). A writer that died (or was replaced) without closing the ring is an error, after
// everything it published is shown.
int dump_follow(const Options& o) {
  auto source = std::make_unique<capture::RingSource>(o.follow,
                                                      std::chrono::milliseconds(o.timeout_ms));
  capture::RingSource& ring = *source;
  capture::Reader r(std::move(source), "shm:" + o.follow);
  const uint64_t announced = dump_records(r, o, true);
  if (const uint64_t left = ring.dropped() - std::min(ring.dropped(), announced)) print_dropped(left, o);
  finish_output();
  if (!ring.closed_cleanly())
    throw Error("dump: shm:" + o.follow + ": the writer (pid " + std::to_string(ring.writer_pid()) +
                ") ended without closing the capture; what it wrote before is shown");
  return 0;
}

// A recording's place in the text: "before submission 4", or "at the end" (after the last).
std::string before_text(const BufferIndex& ix, const RecordedBuffer::Recording& r) {
  const auto s = ix.before(r);
  return s ? "before submission " + std::to_string(*s) : "at the end";
}
Json before_json(const BufferIndex& ix, const RecordedBuffer::Recording& r) {
  const auto s = ix.before(r);
  return s ? Json(*s) : Json(nullptr);
}

// --buffers: one line (or JSON object) per buffer, then (text) a line of totals.
int list_buffers(const Options& o, const std::string& name) {
  capture::Reader r(o.file == "-" ? "/dev/stdin" : o.file);
  const BufferIndex ix = index_buffers(r, name);
  if (ix.memory_records == 0)
    throw InvalidInput("dump: " + name +
                       " holds no buffer contents (a full capture is HCQ_CAPTURE=path,full)");
  size_t shown = 0;
  for (const RecordedBuffer& b : ix.buffers) {
    if (o.device && b.device != *o.device) continue;
    shown++;
    const char* kind = b.kind == MemoryKind::Host ? "host" : "device";
    const auto flags = flag_names(b.flags);
    const auto& first = b.recordings.front();
    const auto& last = b.recordings.back();
    if (o.json) {
      const auto dev = ix.devices.find(b.device);  // every buffer's device was declared
      out("%s\n", json_line(Json{{"device", b.device},
                                 {"device_name", dev->second.name},
                                 {"start", b.start},
                                 {"end", b.start + b.size},
                                 {"size", b.size},
                                 {"kind", kind},
                                 {"flags", flags},
                                 {"records", b.recordings.size()},
                                 {"first_before", before_json(ix, first)},
                                 {"last_before", before_json(ix, last)}})
                        .c_str());
      continue;
    }
    std::string f;
    for (const auto& n : flags) f += (f.empty() ? "" : ",") + n;
    out("device %u  %s..%s  %llu bytes  %s  %s  %zu record%s  first %s, last %s\n", b.device,
        hex(b.start).c_str(), hex(b.start + b.size).c_str(),
        static_cast<unsigned long long>(b.size), kind, f.empty() ? "-" : f.c_str(),
        b.recordings.size(), b.recordings.size() == 1 ? "" : "s", before_text(ix, first).c_str(),
        before_text(ix, last).c_str());
  }
  if (o.device && shown == 0)
    throw InvalidInput("dump: " + name + " recorded no buffer on device " +
                       std::to_string(*o.device) + "; hcq dump --buffers lists them all");
  if (!o.json)
    out("%zu buffer%s, %llu memory record%s, %zu submission%s\n", shown, shown == 1 ? "" : "s",
        static_cast<unsigned long long>(ix.memory_records), ix.memory_records == 1 ? "" : "s",
        ix.submissions.size(), ix.submissions.size() == 1 ? "" : "s");
  return 0;
}

// --buffer ADDR --output PATH: the buffer's bytes, as recorded before submission --at (or its
// last recording), reassembled from its pieces. The capture is read twice: once to find the
// recording, once for its bytes, so memory holds one record and the output is not created
// before the choice is known to be good.
int extract_buffer(const Options& o) {
  const std::string& name = o.file;
  BufferIndex ix;
  {
    capture::Reader r(name);
    ix = index_buffers(r, name);
  }
  const BufferChoice c = choose_buffer(ix, name, *o.buffer, o.device, o.at);
  const RecordedBuffer& b = ix.buffers[c.buffer];
  const RecordedBuffer::Recording& rec = b.recordings[c.recording];
  // Memory contents: private. Checked before anything is read twice: the output may not be
  // the capture itself (it would be truncated to nothing first).
  os::OutputFile f = os::OutputFile::create(o.output, {.mode = 0600, .inputs = {name}});
  capture::Reader r(name);
  for_each_piece(r, name, b, rec, [&](std::span<const uint8_t> bytes) {
    f.write(bytes.data(), bytes.size());
  });
  f.close();
  if (o.json)
    out("%s\n", json_line(Json{{"output", o.output},
                               {"bytes", b.size},
                               {"device", b.device},
                               {"start", b.start},
                               {"end", b.start + b.size},
                               {"recorded_before", before_json(ix, rec)}})
                    .c_str());
  else
    out("wrote %llu bytes of the buffer %s..%s (device %u), recorded %s, to %s\n",
        static_cast<unsigned long long>(b.size), hex(b.start).c_str(),
        hex(b.start + b.size).c_str(), b.device, before_text(ix, rec).c_str(),
        o.output.c_str());
  return 0;
}

// --buffers, --buffer and their options: checked together, then one of the two.
int dump_buffers(const Options& o) {
  if (!o.follow.empty())
    throw UsageError("dump: --follow decodes a live ring; --buffers and --buffer read a capture file");
  if (!o.raw_format.empty())
    throw UsageError("dump: --raw decodes dwords; --buffers and --buffer read a capture");
  if (!o.submissions.empty() || !o.queue.empty() || !o.packet.empty())
    throw UsageError("dump: --submissions, --queue and --packet choose packets, not buffers");
  if (o.buffers && o.buffer)
    throw UsageError("dump: --buffers lists the buffers, --buffer ADDR writes one: give one of them");
  if (!o.buffer && (o.at || !o.output.empty()))
    throw UsageError("dump: --at and --output go with --buffer ADDR");
  if (!o.buffers && !o.buffer) throw UsageError("dump: --device goes with --buffers or --buffer ADDR");
  if (o.file.empty()) throw UsageError("FILE is required");
  if (o.buffers) return list_buffers(o, o.file == "-" ? "standard input" : o.file);
  if (o.output.empty())
    throw UsageError("dump: --buffer writes the buffer's bytes to a file: give --output PATH");
  if (o.file == "-")
    throw UsageError("dump: --buffer reads the capture twice: give its path, not '-' "
                     "(standard input)");
  return extract_buffer(o);
}

int dump(const DumpArgs& args) {
  Options o;
  static_cast<DumpArgs&>(o) = args;
  if (!o.submissions.empty()) {
    const std::string& r = o.submissions;
    const size_t colon = r.find(':');
    const std::string_view all(r), a_text = all.substr(0, colon);
    try {
      o.first = colon == 0 ? 0 : tools::parse_uint(a_text, UINT64_MAX, "--submissions");
      o.last = colon == std::string::npos ? o.first
               : colon + 1 == r.size()
                   ? UINT64_MAX
                   : tools::parse_uint(all.substr(colon + 1), UINT64_MAX, "--submissions");
    } catch (const InvalidInput& e) {
      throw UsageError(std::string("dump: ") + e.what() + " (it takes A:B, A:, :B or A)");
    }
    if (o.first > o.last)
      throw UsageError("dump: --submissions " + r + ": the first (" + std::to_string(o.first) +
                       ") is after the last (" + std::to_string(o.last) + ")");
  }
  if (o.buffers || o.buffer || o.at || o.device || !o.output.empty()) return dump_buffers(o);
  if (!o.follow.empty()) {
    if (!o.file.empty())
      throw UsageError("dump: --follow " + o.follow + " reads a live ring, not FILE '" + o.file + "'");
    if (!o.raw_format.empty()) throw UsageError("dump: --follow decodes a capture, not --raw dwords");
    return dump_follow(o);
  }
  if (o.file.empty()) throw UsageError("FILE is required");
  if (o.raw_format.empty()) return dump_capture(o);
  if (o.raw_format == "pm4" || o.raw_format == "sdma") {
    amd::Gen gen;
    std::string g = o.gen_name.empty() ? "gfx11" : o.gen_name;
    if (!amd::parse_gen(g, gen))
      throw UsageError("dump: unknown AMD generation '" + g +
                       "' (gfx9, gfx10, gfx11, gfx12 or a target)");
    const bool sdma = o.raw_format == "sdma";
    for_each_packet(
        read_raw(o.file, o.format),
        [&](std::span<const uint32_t> w) { return sdma ? amd::decode_sdma(w, gen) : amd::decode_pm4(w, gen); },
        [&](const DecodedPacket& p) { print_packet(p, Context{}, o, 0); });
    return 0;
  }
  if (o.raw_format == "nv-push") {
    nv::Gen gen;
    std::string g = o.gen_name.empty() ? "ampere" : o.gen_name;
    if (!nv::parse_gen(g, gen))
      throw UsageError("dump: unknown NVIDIA generation '" + g +
                       "' (ampere, ada, hopper, blackwell or sm_XX)");
    for_each_packet(
        read_raw(o.file, o.format), [&](std::span<const uint32_t> w) { return nv::decode_push(w, gen); },
        [&](const DecodedPacket& p) { print_packet(p, Context{}, o, 0); });
    return 0;
  }
  if (o.raw_format == "qmd") {
    nv::QmdVersion v;
    if (o.qmd == "v3" || o.qmd == "3") v = nv::QmdVersion::V03;
    else if (o.qmd == "v4" || o.qmd == "4") v = nv::QmdVersion::V04;
    else if (o.qmd == "v5" || o.qmd == "5") v = nv::QmdVersion::V05;
    else throw UsageError("dump: --qmd takes v3, v4 or v5, not '" + o.qmd + "'");
    print_packet(nv::decode_qmd(read_raw(o.file, o.format), v), Context{}, o, 0);
    return 0;
  }
  if (o.raw_format == "adreno-cp" || o.raw_format == "cp" || o.raw_format == "adreno-uav") {
    qcom::Gen gen;
    std::string g = o.gen_name.empty() ? "a6xx" : o.gen_name;
    if (!qcom::parse_gen(g, gen))
      throw UsageError("dump: unknown Adreno generation '" + g +
                       "' (a6xx, a7xx or a chip: a630, a740, ...)");
    // Descriptors have one layout on both generations; --gen is checked all the same.
    const bool uav = o.raw_format == "adreno-uav";
    for_each_packet(
        read_raw(o.file, o.format),
        [&](std::span<const uint32_t> w) {
          return uav ? qcom::decode_descriptors(w) : qcom::decode_cp(w, gen);
        },
        [&](const DecodedPacket& p) { print_packet(p, Context{}, o, 0); });
    return 0;
  }
  throw UsageError("dump: --raw takes pm4, sdma, nv-push, qmd, adreno-cp or adreno-uav, not '" +
                   o.raw_format + "'");
}

}  // namespace

int cmd_dump(const DumpArgs& args) {
  const int rc = dump(args);
  finish_output();
  return rc;
}

}  // namespace hcq::tools
