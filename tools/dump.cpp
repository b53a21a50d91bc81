#include "dump.hpp"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "amd/decode.hpp"
#include "nv/push.hpp"
#include "qcom/decode.hpp"
#include "core/capture.hpp"
#include "core/error.hpp"

namespace hcq::tools {
namespace {

struct Options {
  bool json = false;
  std::string raw_format, gen_name, queue, packet, qmd = "v3";
  uint64_t first = 0, last = UINT64_MAX;
  std::string file;
};


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
    std::string s = "{";
    if (c.submission >= 0)
      s += "\"submission\":" + std::to_string(c.submission) + ",\"device\":\"" +
           json_escape(c.device) + "\",\"queue\":\"" + c.queue +
           "\",\"queue_index\":" + std::to_string(c.queue_index) + ",";
    s += std::string("\"segment\":\"") + (c.indirect ? "indirect" : "ring") + "\",";
    if (c.indirect) s += "\"ib_address\":" + std::to_string(c.ib_address) + ",";
    s += "\"offset\":" + std::to_string(p.offset) + ",\"dwords\":" + std::to_string(p.dwords) +
         ",\"header\":" + std::to_string(p.header) + ",\"name\":\"" + p.name + "\",\"ok\":" +
         (p.ok ? "true" : "false");
    if (!p.ok) s += ",\"problem\":\"" + json_escape(p.problem) + "\"";
    s += ",\"fields\":{";
    for (size_t i = 0; i < p.fields.size(); i++)
      s += (i ? "," : "") + std::string("\"") + p.fields[i].first + "\":" +
           std::to_string(p.fields[i].second);
    s += "}";
    if (!p.value_names.empty()) {
      s += ",\"names\":{";
      for (size_t i = 0; i < p.value_names.size(); i++)
        s += (i ? "," : "") + std::string("\"") + p.value_names[i].first + "\":\"" +
             p.value_names[i].second + "\"";
      s += "}";
    }
    if (!p.registers.empty()) {
      s += ",\"registers\":{";
      for (size_t i = 0; i < p.registers.size(); i++)
        s += (i ? "," : "") + std::string("\"") + p.registers[i].first + "\":" +
             std::to_string(p.registers[i].second);
      s += "}";
    }
    std::printf("%s}\n", s.c_str());
    return;
  }
  std::printf("%s%s\n", std::string(size_t(indent), ' ').c_str(), hcq::to_text(p).c_str());
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

std::vector<uint32_t> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidInput("dump: cannot open " + path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Hex text (as pasted from a kernel log or a ring dump): hex digits, 0x, commas, spaces.
  bool text = !data.empty();
  for (char ch : data)
    if (!std::isxdigit(uint8_t(ch)) && !std::isspace(uint8_t(ch)) && ch != 'x' && ch != 'X' &&
        ch != ',')
      text = false;
  std::vector<uint32_t> words;
  if (text) {
    std::string token;
    std::istringstream ss(data);
    for (char& ch : data)
      if (ch == ',') ch = ' ';
    ss.str(data);
    while (ss >> token) {
      size_t used = 0;
      unsigned long long v = 0;
      try {
        v = std::stoull(token, &used, 16);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != token.size() || v > 0xffffffffull)
        throw InvalidInput("dump: '" + token + "' in " + path + " is not a 32-bit hex dword");
      words.push_back(uint32_t(v));
    }
    return words;
  }
  if (data.size() % 4)
    throw InvalidInput("dump: " + path + " is " + std::to_string(data.size()) +
                       " bytes, not whole dwords (binary input is little-endian dwords)");
  words.resize(data.size() / 4);
  std::memcpy(words.data(), data.data(), data.size());
  return words;
}

int dump_capture(const Options& o) {
  capture::Reader r(o.file);
  std::map<uint32_t, capture::DeviceRecord> devices;
  while (auto rec = r.next()) {
    if (rec->type == capture::RecordType::Device) {
      devices[rec->device.id] = rec->device;
      continue;
    }
    if (rec->type == capture::RecordType::Memory) {  // "full" captures: buffer contents
      if (o.packet.empty()) {
        const auto& m = rec->memory;
        if (o.json)
          std::printf("{\"memory\":%llu,\"device\":%u,\"bytes\":%zu}\n",
                      static_cast<unsigned long long>(m.address), m.device, m.bytes.size());
        else
          std::printf("memory %s  %zu bytes  (device %u)\n", hex(m.address).c_str(),
                      m.bytes.size(), m.device);
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
      std::printf("submission %llu: %s %s: no decoder for this device\n",
                  static_cast<unsigned long long>(s.sequence), dev->second.vendor.c_str(),
                  dev->second.arch.c_str());
      continue;
    }
    Context c{(long long)s.sequence, dev->second.name, queue, int(s.queue_index), false, 0};
    if (!o.json)
      std::printf("submission %llu  %s (%s %s)  %s queue %u\n",
                  static_cast<unsigned long long>(s.sequence), dev->second.name.c_str(),
                  dev->second.vendor.c_str(), dev->second.arch.c_str(), queue, s.queue_index);
    for (auto& seg : s.segments) {
      c.indirect = seg.indirect;
      c.ib_address = seg.address;
      if (!o.json)
        std::printf(seg.indirect ? "  indirect buffer %s (%zu dwords)\n" : "  ring%s%zu dwords\n",
                    seg.indirect ? hex(seg.address).c_str() : " ", seg.words.size());
      for (auto& p : decode(seg.words, s.queue == QueueKind::Copy)) print_packet(p, c, o, 4);
    }
  }
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: hcq dump [--json] [--queue compute|copy] [--submissions A:B] "
               "[--packet NAME] CAPTURE\n"
               "       hcq dump --raw pm4|sdma [--gen gfx9|gfx11|gfx12|<target>] [--json] FILE\n"
               "       hcq dump --raw nv-push [--gen ampere|ada|hopper|blackwell] FILE\n"
               "       hcq dump --raw qmd [--qmd v3|v4|v5] FILE\n"
               "       hcq dump --raw adreno-cp [--gen a6xx|a7xx|<chip>] FILE\n"
               "       hcq dump --raw adreno-uav [--gen a6xx|a7xx|<chip>] FILE   (descriptors)\n"
               "FILE: binary little-endian dwords, or hex text (as pasted from a log)\n");
  return 2;
}

}  // namespace

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

int cmd_dump(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw InvalidInput("dump: " + a + " needs a value");
      return args[++i];
    };
    if (a == "--json") o.json = true;
    else if (a == "--raw") o.raw_format = value();
    else if (a == "--gen") o.gen_name = value();
    else if (a == "--qmd") o.qmd = value();
    else if (a == "--queue") o.queue = value();
    else if (a == "--packet") o.packet = value();
    else if (a == "--submissions") {
      const std::string& r = value();
      size_t colon = r.find(':');
      try {
        o.first = colon == 0 ? 0 : std::stoull(r.substr(0, colon));
        o.last = colon == std::string::npos ? o.first
                 : colon + 1 == r.size()    ? UINT64_MAX
                                            : std::stoull(r.substr(colon + 1));
      } catch (const std::exception&) {
        throw InvalidInput("dump: --submissions takes A:B, A:, :B or A, not '" + r + "'");
      }
    } else if (a.rfind("--", 0) == 0) {
      throw InvalidInput("dump: unknown option " + a);
    } else if (o.file.empty()) {
      o.file = a;
    } else {
      throw InvalidInput("dump: more than one file given");
    }
  }
  if (o.file.empty()) return usage();
  if (!o.queue.empty() && o.queue != "compute" && o.queue != "copy")
    throw InvalidInput("dump: --queue is compute or copy, not '" + o.queue + "'");
  if (o.raw_format.empty()) return dump_capture(o);
  if (o.raw_format == "pm4" || o.raw_format == "sdma") {
    amd::Gen gen;
    std::string g = o.gen_name.empty() ? "gfx11" : o.gen_name;
    if (!amd::parse_gen(g, gen))
      throw InvalidInput("dump: unknown AMD generation '" + g + "' (gfx9, gfx11, gfx12 or a target)");
    const auto words = read_raw(o.file);
    for (auto& p : o.raw_format == "sdma" ? amd::decode_sdma(words, gen) : amd::decode_pm4(words, gen))
      print_packet(p, Context{}, o, 0);
    return 0;
  }
  if (o.raw_format == "nv-push") {
    nv::Gen gen;
    std::string g = o.gen_name.empty() ? "ampere" : o.gen_name;
    if (!nv::parse_gen(g, gen))
      throw InvalidInput("dump: unknown NVIDIA generation '" + g +
                         "' (ampere, ada, hopper, blackwell or sm_XX)");
    for (auto& p : nv::decode_push(read_raw(o.file), gen)) print_packet(p, Context{}, o, 0);
    return 0;
  }
  if (o.raw_format == "qmd") {
    nv::QmdVersion v;
    if (o.qmd == "v3" || o.qmd == "3") v = nv::QmdVersion::V03;
    else if (o.qmd == "v4" || o.qmd == "4") v = nv::QmdVersion::V04;
    else if (o.qmd == "v5" || o.qmd == "5") v = nv::QmdVersion::V05;
    else throw InvalidInput("dump: --qmd takes v3, v4 or v5, not '" + o.qmd + "'");
    print_packet(nv::decode_qmd(read_raw(o.file), v), Context{}, o, 0);
    return 0;
  }
  if (o.raw_format == "adreno-cp" || o.raw_format == "cp" || o.raw_format == "adreno-uav") {
    qcom::Gen gen;
    std::string g = o.gen_name.empty() ? "a6xx" : o.gen_name;
    if (!qcom::parse_gen(g, gen))
      throw InvalidInput("dump: unknown Adreno generation '" + g +
                         "' (a6xx, a7xx or a chip: a630, a740, ...)");
    const auto words = read_raw(o.file);
    // Descriptors have one layout on both generations; --gen is checked all the same.
    for (auto& p : o.raw_format == "adreno-uav" ? qcom::decode_descriptors(words)
                                                : qcom::decode_cp(words, gen))
      print_packet(p, Context{}, o, 0);
    return 0;
  }
  throw InvalidInput("dump: --raw takes pm4, sdma, nv-push, qmd, adreno-cp or adreno-uav, not '" +
                     o.raw_format + "'");
}

}  // namespace hcq::tools
