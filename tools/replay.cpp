#include "replay.hpp"

#include <sys/personality.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"
#include "core/replay.hpp"
#include "json.hpp"
#include "kernels.hpp"

namespace hcq::tools {
namespace {

std::string hex_bytes(const std::vector<uint8_t>& b) {
  std::string s;
  char two[3];
  for (uint8_t v : b) {
    std::snprintf(two, sizeof two, "%02x", v);
    s += two;
  }
  return s;
}

Json difference_json(const replay::Difference& d) {
  return Json{{"submission", d.submission}, {"device", d.device},   {"address", d.address},
              {"bytes", d.length},          {"captured", hex_bytes(d.captured)},
              {"replayed", hex_bytes(d.replayed)}};
}

Json hang_json(const replay::Hang& h) {
  return Json{{"submission", h.submission}, {"device", h.device}, {"report", h.report}};
}

// The one-line account of a difference or a hang (then the hang report).
void print_failure(const replay::Result& r) {
  if (r.difference) {
    const auto& d = *r.difference;
    std::printf("difference after submission %llu on %s: %llu byte%s from %s: captured %s, "
                "replayed %s%s\n",
                static_cast<unsigned long long>(d.submission), d.device.c_str(),
                static_cast<unsigned long long>(d.length), d.length == 1 ? "" : "s",
                hex(d.address).c_str(), hex_bytes(d.captured).c_str(),
                hex_bytes(d.replayed).c_str(), d.length > d.captured.size() ? " ..." : "");
  }
  if (r.hang) {
    std::printf("hang at submission %llu on %s\n%s",
                static_cast<unsigned long long>(r.hang->submission), r.hang->device.c_str(),
                r.hang->report.c_str());
    if (!r.hang->report.empty() && r.hang->report.back() != '\n') std::printf("\n");
  }
}

Json result_json(const replay::Result& r) {
  Json j{{"devices", r.devices}, {"submissions", r.submissions}, {"compared", r.compared}};
  j["difference"] = r.difference ? difference_json(*r.difference) : Json(nullptr);
  j["hang"] = r.hang ? hang_json(*r.hang) : Json(nullptr);
  return j;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

void replay_without_address_randomization(char** argv) {
  const int now = personality(0xffffffff);
  if (now == -1 || (now & ADDR_NO_RANDOMIZE) || std::getenv("HCQ_REPLAY_AGAIN")) return;
  if (personality(now | ADDR_NO_RANDOMIZE) == -1) return;
  setenv("HCQ_REPLAY_AGAIN", "1", 1);  // never a second time, whatever happens
  execv("/proc/self/exe", argv);
  personality(now);  // exec failed: go on as before
}

int cmd_replay(const ReplayArgs& a) {
  // An emulated GPU runs a kernel through the CPU implementation registered under its name.
  kernels::register_cpu_implementations();
  replay::Options o;
  o.device = a.device;
  o.compare = a.compare;
  o.until = a.until;
  o.timeout = std::chrono::milliseconds(a.timeout_ms);
  if (a.bisect) {
    const replay::Bisection b = replay::bisect(a.file, o);
    if (a.json) {
      Json j{{"first_failing", b.first_failing ? Json(*b.first_failing) : Json(nullptr)},
             {"replays", b.replays}};
      if (b.first_failing) j["failure"] = result_json(b.failure);
      std::printf("%s\n", json_line(j).c_str());
    } else if (!b.first_failing) {
      std::printf("bisect: the whole capture replays clean (%u replay)\n", b.replays);
    } else {
      std::printf("bisect: submission %llu is the first that fails (%u replays)\n",
                  static_cast<unsigned long long>(*b.first_failing), b.replays);
      print_failure(b.failure);
    }
    return b.first_failing ? 1 : 0;
  }
  const replay::Result r = replay::run(a.file, o);
  if (a.json) {
    std::printf("%s\n", json_line(result_json(r)).c_str());
  } else {
    print_failure(r);
    if (r.clean())
      std::printf("replayed %llu submission%s on %s%s\n",
                  static_cast<unsigned long long>(r.submissions), r.submissions == 1 ? "" : "s",
                  joined(r.devices).c_str(),
                  a.compare ? (": no difference (" + std::to_string(r.compared) +
                               " settled buffer records compared)")
                                  .c_str()
                            : "");
  }
  return r.clean() ? 0 : 1;
}

}  // namespace hcq::tools
