// hcq: the command-line tool. `hcq ls` lists devices and the GPUs on the PCI bus, `hcq info
// DEVICE` shows one, `hcq run` runs the demo workload (the README's main job) on the best
// device, an emulated AMD GPU when no GPU is present; `hcq pci` and `hcq reg` are for
// bring-up. Errors become one line on stderr and exit status 1; a command line hcq cannot use
// (CLI11's parse, or a UsageError) exits 2 with where the usage is; --help and --version
// print to standard output and exit 0.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "batch/batch.hpp"
#include "core/hcq.hpp"
#include "amd/am/am_driver.hpp"
#include "amd/factory.hpp"
#include "dump.hpp"
#include "json.hpp"
#include "kernels.hpp"
#include "numbers.hpp"
#include "os/cleanup.hpp"
#include "os/output_file.hpp"
#include "pci.hpp"
#include "rdma.hpp"
#include "replay.hpp"
#include "usb.hpp"
#include "usage.hpp"

namespace {

using hcq::tools::Json;
using hcq::tools::json_line;

// Devices hcq drives itself show their holder when a process holds one (amd::device_holder:
// text "[held by pid 1234 (hcq run am:0000:03:00.0), since ...]", JSON "holder": {pid,
// command, since_unix_ms}, the key only then).
int cmd_ls(bool all, bool json) {
  if (json) {
    Json devices = Json::array();
    for (auto& l : hcq::Device::list()) {
      Json d = {{"name", l.name}, {"description", l.description}, {"emulated", l.emulated}};
      if (const auto h = hcq::amd::device_holder(l.name))
        d["holder"] = {{"pid", h->pid}, {"command", h->command}, {"since_unix_ms", h->since_unix_ms}};
      devices.push_back(d);
    }
    std::printf("%s\n",
                json_line({{"devices", devices}, {"pci", hcq::tools::ls_pci_json(all)}}).c_str());
    return 0;
  }
  for (auto& l : hcq::Device::list()) {
    const auto h = hcq::amd::device_holder(l.name);
    std::printf("%-16s %s%s%s\n", l.name.c_str(), l.description.c_str(),
                l.emulated ? "  [emulated]" : "",
                h ? ("  [held by " + h->describe() + "]").c_str() : "");
  }
  return hcq::tools::cmd_ls_pci(all);
}

int cmd_info(const std::string& name, bool json) {
  auto dev = hcq::Device::open(name);
  const auto& p = dev->properties();
  if (json) {
    std::printf("%s\n", json_line({{"name", p.name},
                                   {"vendor", p.vendor},
                                   {"arch", p.arch},
                                   {"description", p.description},
                                   {"emulated", p.emulated},
                                   {"compute_units", p.compute_units},
                                   {"wave_size", p.wave_size},
                                   {"device_memory_bytes", p.device_memory_bytes},
                                   {"timestamp_hz", p.timestamp_hz},
                                   {"copy_engine", p.caps.copy_engine},
                                   {"uma", p.caps.uma},
                                   {"host_reachable", p.caps.host_reachable}})
                             .c_str());
    return 0;
  }
  std::printf("name          %s\nvendor        %s\narch          %s\ndescription   %s\n"
              "emulated      %s\ncompute units %u\nwave size     %u\ndevice memory %.1f GiB\n"
              "timestamp     %.0f MHz\ncopy engine   %s\nUMA           %s\nhost memory   %s\n",
              p.name.c_str(), p.vendor.c_str(), p.arch.c_str(), p.description.c_str(),
              p.emulated ? "yes" : "no", p.compute_units, p.wave_size,
              double(p.device_memory_bytes) / double(1ull << 30), double(p.timestamp_hz) / 1e6,
              p.caps.copy_engine ? "yes" : "no", p.caps.uma ? "yes" : "no",
              p.caps.host_reachable ? "reachable" : "not reachable (staging in device memory)");
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int cmd_run(const std::string& name, uint32_t n, bool json) {
  using namespace hcq;
  kernels::register_cpu_implementations();
  auto dev = Device::open(name);
  const auto& p = dev->properties();
  // Capture writes every submission (and with ,full buffer contents) to a file as it goes:
  // the figures are then the capture's as much as the device's, and say so.
  const char* capture_spec = std::getenv("HCQ_CAPTURE");
  const bool capturing = capture_spec && *capture_spec;
  if (!json) {
    std::printf("device   %s: %s%s\n", p.name.c_str(), p.description.c_str(),
                p.emulated ? " [emulated]" : "");
    if (capturing)
      std::printf("capture  on (HCQ_CAPTURE=%s): every submission is recorded, so the figures "
                  "below are slower than without\n",
                  capture_spec);
  }
  auto image = kernels::code_object(p.arch);
  if (image.empty())
    throw Error("no code object was built for " + p.arch +
                " (install clang-19 and lld-19, then rebuild)");
  auto loaded = std::shared_ptr<const ProgramImage>(load_program(*dev, image));
  Program vector_add(*dev, loaded, "vector_add"), scale_add(*dev, loaded, "scale_add");
  Program empty(*dev, loaded, "empty");

  const uint32_t block = 256, groups = (n + block - 1) / block;
  const uint64_t bytes = uint64_t(n) * 4;
  std::vector<float> a(n), b(n), out(n);
  for (uint32_t i = 0; i < n; i++) {
    a[i] = float(i % 1000) * 0.5f;
    b[i] = float(i % 7);
  }
  Buffer A = dev->allocate(bytes), B = dev->allocate(bytes), C = dev->allocate(bytes),
         D = dev->allocate(bytes);

  // The first copy into a buffer also pays for faulting its pages in; time the second.
  dev->copy_in(A, 0, b.data(), bytes);
  dev->copy_in(B, 0, a.data(), bytes);
  dev->synchronize();
  auto t0 = std::chrono::steady_clock::now();
  dev->copy_in(A, 0, a.data(), bytes);
  dev->copy_in(B, 0, b.data(), bytes);
  dev->synchronize();
  double copy_in_s = seconds_since(t0);

  // c = a + b; then three rounds of c = 2c + 1 on the compute queue, each followed by a copy
  // of c into d on the copy queue that depends on it (ordered by the device timeline), and a
  // kernel on d that depends on the copy.
  int launches = 0, copies = 0;
  vector_add.launch(KernelArgs().buffer(A).buffer(B).buffer(C).value(n).value(block),
                    {groups, 1, 1}, {block, 1, 1});
  launches++;
  for (int round = 0; round < 3; round++) {
    scale_add.launch(KernelArgs().buffer(C).value(2.0f).value(1.0f).value(n).value(block),
                     {groups, 1, 1}, {block, 1, 1});
    dev->copy(D, 0, C, 0, bytes);
    scale_add.launch(KernelArgs().buffer(D).value(1.0f).value(float(round)).value(n).value(block),
                     {groups, 1, 1}, {block, 1, 1});
    launches += 2;
    copies++;
  }
  dev->copy_out(out.data(), D, 0, bytes);

  // Verify against the same arithmetic on the CPU.
  uint32_t bad = 0, first_bad = 0;
  for (uint32_t i = 0; i < n; i++) {
    float c = a[i] + b[i], d = 0;
    for (int round = 0; round < 3; round++) {
      c = 2.0f * c + 1.0f;
      d = 1.0f * c + float(round);
    }
    if (out[i] != d && !bad++) first_bad = i;
  }

  // Launch round trip: an empty kernel launched and waited for, median of 100.
  std::vector<double> rtt;
  for (int i = 0; i < 100; i++) {
    auto t = std::chrono::steady_clock::now();
    empty.launch(KernelArgs(), {1, 1, 1}, {1, 1, 1}, true);
    rtt.push_back(seconds_since(t));
  }
  std::sort(rtt.begin(), rtt.end());

  // A device without a copy engine shares memory with the host: its copies are host copies.
  const bool engine = dev->properties().caps.copy_engine;
  const double copied = 2.0 * double(bytes), median_rtt = rtt[50];
  if (json) {
    Json verify{{"ok", bad == 0}, {"wrong", bad}};
    verify["first_wrong"] = bad ? Json(first_bad) : Json(nullptr);
    std::printf("%s\n",
                json_line({{"device", {{"name", p.name},
                                      {"description", p.description},
                                      {"emulated", p.emulated}}},
                           {"size", n},
                           {"launches", launches + 100},
                           {"device_copies", copies},
                           {"copy_engine", engine},
                           {"copy_in", {{"bytes", uint64_t(copied)},
                                        {"seconds", copy_in_s},
                                        {"gb_per_s", copied / copy_in_s / 1e9}}},
                           {"launch_round_trip_median_us", median_rtt * 1e6},
                           {"verify", verify},
                           {"capture", capturing ? Json(capture_spec) : Json(nullptr)}})
                    .c_str());
    return bad ? 1 : 0;
  }
  std::printf("launches %d kernels on the compute queue, %d device copies %s\n", launches + 100,
              copies, engine ? "on the copy queue" : "as host copies (shared memory)");
  std::printf("copy-in  %.1f MiB in %.2f ms (%.2f GB/s, %s)\n", copied / (1 << 20),
              copy_in_s * 1e3, copied / copy_in_s / 1e9,
              engine ? "staged through the copy queue" : "memcpy into shared memory");
  std::printf("latency  empty launch round trip: median %.1f us\n", median_rtt * 1e6);
  if (bad) {
    std::printf("verify   FAILED: %u of %u results wrong (first at %u)\n", bad, n, first_bad);
    return 1;
  }
  std::printf("verify   OK: all %u results match\n", n);
  return 0;
}

// The demo's work as one compiled batch, profiled: writes a Chrome/Perfetto trace.
int cmd_trace(const std::string& name, const std::string& path) {
  using namespace hcq;
  kernels::register_cpu_implementations();
  auto dev = Device::open(name);
  const auto& p = dev->properties();
  auto image = kernels::code_object(p.arch);
  if (image.empty()) throw Error("no code object was built for " + p.arch);
  auto loaded = std::shared_ptr<const ProgramImage>(load_program(*dev, image));
  Program vector_add(*dev, loaded, "vector_add"), scale_add(*dev, loaded, "scale_add");
  const uint32_t n = 1 << 16, block = 256, groups = n / block;
  const uint64_t bytes = uint64_t(n) * 4;
  Buffer A = dev->allocate(bytes), B = dev->allocate(bytes), C = dev->allocate(bytes),
         D = dev->allocate(bytes);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), out(n);
  dev->copy_in(A, 0, a.data(), bytes);
  dev->copy_in(B, 0, b.data(), bytes);

  batch::Schedule s(*dev);
  using batch::Arg;
  using batch::Mem;
  s.launch(vector_add, {groups, 1, 1}, {block, 1, 1},
           {Arg::buffer(Mem::of(A)), Arg::buffer(Mem::of(B)), Arg::buffer(Mem::of(C)),
            Arg::value(n), Arg::value(block)});
  for (int round = 0; round < 3; round++) {
    s.launch(scale_add, {groups, 1, 1}, {block, 1, 1},
             {Arg::buffer(Mem::of(C)), Arg::value(2.0f), Arg::value(1.0f), Arg::value(n),
              Arg::value(block)});
    s.copy(Mem::of(D), 0, Mem::of(C), 0, bytes);
    s.launch(scale_add, {groups, 1, 1}, {block, 1, 1},
             {Arg::buffer(Mem::of(D)), Arg::value(1.0f), Arg::value(float(round)),
              Arg::value(n), Arg::value(block)});
  }
  auto exe = s.compile({.profile = true});
  dev->timeline().wait(exe.run(batch::Bindings()));
  dev->copy_out(out.data(), D, 0, bytes);
  float c = 3.0f, d = 0;
  for (int round = 0; round < 3; round++) d = (c = 2 * c + 1) + float(round);
  for (float v : out)
    if (v != d) throw Error("trace: the batch computed a wrong result");
  std::ostringstream json;
  exe.write_trace(json);
  const bool to_stdout = path == "-";
  if (to_stdout) {
    // main() flushes standard output and reports a failed write.
    std::fwrite(json.str().data(), 1, json.str().size(), stdout);
  } else {
    // OutputFile: no symlink followed, no one else's file truncated, a full disk an error.
    auto f = os::OutputFile::create(path, {.mode = 0600});
    f.write(json.str());
    f.close();
  }
  // With the trace on standard output, the summary goes to standard error.
  std::fprintf(to_stdout ? stderr : stdout, "trace    %zu calls on %s (%zu cross-queue waits) -> %s\n",
               s.calls(), p.name.c_str(),
               exe.stats(QueueKind::Compute).waits + exe.stats(QueueKind::Copy).waits,
               to_stdout ? "standard output" : path.c_str());
  return 0;
}

// hcq boot DEVICE [--reset]: boots the GPU, prints what the boot found and each phase's
// time, then shuts it down again.
int cmd_boot(const std::string& device, bool reset) {
  std::unique_ptr<hcq::amd::am::AmDriver> drv = hcq::amd::open_am_driver(device, reset);
  if (!drv)
    throw hcq::tools::UsageError("boot: " + device +
                                 " is not a GPU hcq boots itself (am:<PCI address> or "
                                 "emu:gfx1100_am)");
  std::printf("%s", drv->boot_report().text().c_str());
  return 0;
}

constexpr const char* kDevices =
    "DEVICE: amd:N (a KFD GPU), am:<PCI address> (a GPU on vfio-pci hcq boots itself), nv:N,\n"
    "        qcom:N, emu:gfx90a|gfx942|gfx1030|gfx1100|gfx1201|gfx1100_usb|gfx1100_am|\n"
    "        sm_80|sm_90|sm_100|a660|a740|a660_msm|a740_msm (emulated), auto (the default: the\n"
    "        best device, an emulated AMD GPU when no GPU is present); for pci and reg a PCI\n"
    "        address (0000:03:00.0 or 03:00.0). HCQ_EMULATED_PCI=1 runs pci and reg on an\n"
    "        emulated PCI system. For usb bench and reg a GPU behind an ASM2464 USB bridge:\n"
    "        usb:<bus>-<port> (usb:2-1); HCQ_EMULATED_USB=1 runs usb and reg usb:... on an\n"
    "        emulated bridge on port 2-1.\n";

// Everything the command line asked for; the subcommand that was given runs.
struct Command {
  CLI::App* ls = nullptr;
  CLI::App* info = nullptr;
  CLI::App* run = nullptr;
  CLI::App* trace = nullptr;
  CLI::App* dump = nullptr;
  CLI::App* pci = nullptr;
  CLI::App* reg = nullptr;
  CLI::App* boot = nullptr;
  CLI::App* usb = nullptr;
  CLI::App* usb_ls = nullptr;
  CLI::App* usb_bench = nullptr;
  std::string usb_device;
  CLI::App* rdma = nullptr;
  CLI::App* rdma_ls = nullptr;
  CLI::App* rdma_bench = nullptr;
  hcq::tools::RdmaBenchArgs rdma_args;
  CLI::App* replay = nullptr;
  hcq::tools::ReplayArgs replay_args;
  bool all = false, json = false, reset = false;
  std::string device = "auto", trace_file = "hcq-trace.json";
  uint32_t size = 1 << 20;
  hcq::tools::DumpArgs dump_args;
  hcq::tools::PciArgs pci_args;
  hcq::tools::RegArgs reg_args;
};

// One parser for every subcommand: `hcq --help` and `hcq SUB --help` print to standard
// output and exit 0, `hcq --version` likewise; usage errors exit 2 (main()).
void define(CLI::App& app, Command& c) {
  using hcq::tools::uint_option;
  app.set_help_flag("-h,--help", "print this help and exit");
  app.set_version_flag("--version", "hcq " HCQ_VERSION, "print the version and exit");
  app.require_subcommand(1);
  app.get_formatter()->column_width(30);
  app.footer(std::string(kDevices) +
             "Every subcommand takes --help. Exit status: 0 success, 1 failure, 2 usage error.");
  auto sub = [&](const char* name, const char* about) {
    CLI::App* s = app.add_subcommand(name, about);
    s->footer(kDevices);
    return s;
  };

  c.ls = app.add_subcommand("ls", "list the devices hcq can open and the GPUs on the PCI bus");
  c.ls->add_flag("--all", c.all, "every PCI function, not only GPUs");
  c.ls->add_flag("--json", c.json, "the same as one JSON object: {devices, pci}");

  c.info = sub("info", "properties and capabilities of a device");
  c.info->add_option("DEVICE", c.device, "the device (default: auto)");
  c.info->add_flag("--json", c.json, "the same as one JSON object");

  c.run = sub("run", "the demo (the README's main job): copy in, kernels, copies, copy out, "
                     "verify, report");
  c.run->add_option("DEVICE", c.device, "the device (default: auto)");
  c.run->add_option("--size", c.size, "elements per buffer: 1 to 4294967295, decimal or 0x hex\n(default 1048576)")
      ->transform(uint_option(1, UINT32_MAX));
  c.run->add_flag("--json", c.json, "the figures as one JSON object");

  c.trace = sub("trace", "the demo as a compiled, profiled batch: writes a Chrome/Perfetto trace");
  c.trace->add_option("DEVICE", c.device, "the device (default: auto)");
  c.trace->add_option("FILE", c.trace_file,
                      "where the trace goes (default hcq-trace.json; '-': standard output)");

  auto& d = c.dump_args;
  c.dump = app.add_subcommand(
      "dump", "decode a capture (HCQ_CAPTURE=FILE) or raw dwords (--raw pm4|sdma|nv-push|qmd|"
              "adreno-cp|adreno-uav)");
  c.dump->add_option("FILE", d.file, "the capture, or with --raw the dwords ('-': standard input)");
  c.dump->add_option("--follow", d.follow, "decode the live ring HCQ_CAPTURE=shm:NAME writes, as it\n"
                                           "is written, until its writer is gone");
  c.dump->add_option("--timeout", d.timeout_ms, "--follow: milliseconds to wait for a writer\n"
                                                "(default 10000)")
      ->transform(uint_option(1, 3600000));
  c.dump->add_flag("--json", d.json, "JSON Lines: one object per packet (--buffers: per buffer)");
  c.dump->add_option("--queue", d.queue, "a capture's packets of one queue only")
      ->check(CLI::IsMember({"compute", "copy"}));
  c.dump->add_option("--submissions", d.submissions, "a capture's submissions A to B (A:B, A:, :B or A)");
  c.dump->add_option("--packet", d.packet, "only packets of this name (COPY_LINEAR, ...)");
  c.dump->add_option("--raw", d.raw_format, "decode raw dwords: pm4, sdma, nv-push, qmd, "
                                            "adreno-cp or adreno-uav");
  c.dump->add_option("--gen", d.gen_name, "--raw's generation: gfx9, gfx10, gfx11 (default), gfx12 or a\n"
                                          "target (pm4, sdma); ampere (default), ada, hopper,\n"
                                          "blackwell or sm_XX (nv-push); a6xx (default), a7xx or a chip (adreno-cp)");
  c.dump->add_option("--qmd", d.qmd, "--raw qmd's version: v3 (default), v4 or v5");
  c.dump->add_option("--format", d.format, "--raw's input: text, binary or auto (default: text when\n"
                                            "every byte is printable, a tab or a line end)")
      ->check(CLI::IsMember({"auto", "text", "binary"}));
  c.dump->add_flag("--buffers", d.buffers, "list the buffers a full capture recorded (HCQ_CAPTURE=FILE,full):\n"
                                           "device, start..end, size, kind, flags, records, the\n"
                                           "first and last submission each was recorded before");
  c.dump->add_option("--buffer", d.buffer, "write the contents of the buffer holding ADDR (any\n"
                                           "address inside it: the whole buffer) to --output")
      ->type_name("ADDR")
      ->transform(uint_option(0, UINT64_MAX));
  c.dump->add_option("--at", d.at, "--buffer's contents as recorded before submission N (its\n"
                                   "latest recording then; default: its last, the final contents)")
      ->type_name("N")
      ->transform(uint_option(0, UINT64_MAX));
  c.dump->add_option("--output", d.output, "--buffer's file (a symlink is refused, every write checked)")
      ->type_name("PATH");
  c.dump->add_option("--device", d.device, "--buffers and --buffer: the capture's device number only\n"
                                           "(needed where two devices recorded a buffer at ADDR)")
      ->type_name("D")
      ->transform(uint_option(0, UINT32_MAX));
  c.dump->footer(
      "FILE: '-' reads standard input. With --raw: binary little-endian dwords, or hex text as\n"
      "pasted from a log, one or more dwords a line:\n"
      "  c0001000 00000000, 0x00000001\n"
      "  [  123.456789] amdgpu 0000:03:00.0: ring gfx: c0001000 00000000\n"
      "  00000010: c0001000 00000000\n"
      "(a kernel-log timestamp, then anything up to the line's last ':', is skipped).\n"
      "--buffers, --buffer: a buffer over 64 MiB is recorded in pieces and written whole; end\n"
      "addresses are exclusive; 'last at the end' is a recording after the last submission\n"
      "(when the device closed). The capture is read twice for --buffer: FILE must be a path.");

  auto& p = c.pci_args;
  c.pci = sub("pci", "bring-up view of a PCI function: identity, BARs, link, driver, IOMMU, "
                     "bridges");
  c.pci->add_option("DEVICE", p.device, "a PCI address (0000:03:00.0 or 03:00.0)")->required();
  c.pci->add_flag("--json", p.json, "the same as one JSON object");
  auto* unbind = c.pci->add_flag("--unbind", p.unbind, "unbind the function from its driver");
  c.pci->add_flag("--bind-vfio", p.bind_vfio, "unbind, set driver_override and bind to vfio-pci")
      ->excludes(unbind);
  c.pci->add_flag("--force", p.force, "let --unbind/--bind-vfio take a function that is not a "
                                      "GPU or accelerator (class 0x03/0x12)");

  auto& r = c.reg_args;
  c.reg = sub("reg", "MMIO peek/poke in a GPU's register BAR; list the registers hcq knows");
  c.reg->add_option("DEVICE", r.device, "a PCI address (0000:03:00.0 or 03:00.0), or usb:<bus>-<port>\n"
                                        "for the GPU behind an ASM2464 USB bridge")
      ->required();
  c.reg->add_option("ACTION", r.action, "read, write or list")
      ->required()
      ->check(CLI::IsMember({"read", "write", "list"}));
  c.reg->add_option("REGISTER", r.target, "a register name (any case), or an offset in hex with\n"
                                          "0x (0x140); list's PATTERN: names containing it");
  c.reg->add_option("VALUE", r.value, "write's value, decimal or 0x hex up to 0xffffffff")
      ->transform(uint_option(0, UINT32_MAX));
  c.reg->add_option("--bar", r.bar, "the BAR, 0 to 5 (default: the register's, else the\n"
                                    "vendor's register BAR)")
      ->transform(uint_option(0, 5));
  c.reg->add_option("--count", r.count, "read N consecutive dwords from REGISTER (1 to the\n"
                                        "end of the BAR)")
      ->transform(uint_option(1, UINT32_MAX));
  c.reg->add_flag("--json", r.json, "read's dwords as JSON Lines: {address, bar, offset, name,\n"
                                    "value, fields}");
  c.reg->add_flag("--force", r.force, "needed to write");
  c.usb = sub("usb", "GPUs behind ASMedia ASM2464 USB-to-PCIe bridges: list them, measure the "
                     "bridge");
  c.usb->require_subcommand(1);
  c.usb_ls = c.usb->add_subcommand("ls", "every ASM2464 bridge: port, ids, firmware, PCIe link, "
                                         "the GPU behind it and its BARs");
  c.usb_ls->add_flag("--json", c.json, "the same as one JSON object: {bridges}");
  c.usb_bench = c.usb->add_subcommand("bench", "TLP round trips and streamed VRAM reads and "
                                               "writes through the bridge (medians)");
  c.usb_bench->add_option("DEVICE", c.usb_device, "usb:<bus>-<port> (default: the only bridge "
                                                  "with tinygrad's\ncustom firmware)");
  c.usb_bench->add_flag("--json", c.json, "the figures as one JSON object");
  c.rdma = sub("rdma", "memory between processes and machines over RDMA: list NICs, measure a "
                       "link");
  c.rdma->require_subcommand(1);
  c.rdma_ls = c.rdma->add_subcommand("ls", "RDMA devices: ports, link layer, MTU, GIDs (or why "
                                           "there are none)");
  c.rdma_ls->add_flag("--json", c.json, "the same as one JSON object: {devices, none_because}");
  c.rdma_bench = c.rdma->add_subcommand("bench", "latency and bandwidth to a peer running "
                                                 "'hcq rdma bench --listen' (medians)");
  auto& ra = c.rdma_args;
  c.rdma_bench->add_flag("--listen", ra.listen, "serve a peer instead of measuring");
  c.rdma_bench->add_option("HOST", ra.host, "the listening peer's host name or address");
  c.rdma_bench->add_option("--port", ra.port, "TCP port of the connection setup (default 18515)")
      ->transform(uint_option(1, 65535));
  c.rdma_bench->add_option("--device", ra.device, "the RDMA device (default: the first)");
  c.rdma_bench->add_option("--local", ra.local, "NAME: the shared-memory transport between two "
                                                "processes of\nthis machine instead of verbs");
  c.rdma_bench->add_option("--rounds", ra.rounds, "64 MiB transfers of each kind (default 8)")
      ->transform(uint_option(1, 1000));
  c.rdma_bench->add_flag("--json", ra.json, "the figures as one JSON object");
  c.replay = sub("replay", "run a full capture (HCQ_CAPTURE=FILE,full) again on a device: "
                          "compare with what it recorded, bisect to the first failing submission");
  auto& rp = c.replay_args;
  c.replay->add_option("FILE", rp.file, "the capture (format version 3, full)")->required();
  c.replay->add_option("DEVICE", rp.device,
                       "a device of the capture's architecture (default: the capture's "
                       "emulated target, emu:<arch> for a real GPU's capture)");
  c.replay->add_flag("--compare", rp.compare,
                     "compare every settled buffer record with the replay's memory; stop at "
                     "the first difference (exit 1)");
  c.replay->add_option("--until", rp.until, "replay submissions 0 to N only");
  c.replay->add_flag("--bisect", rp.bisect,
                     "find the first submission whose replay differs or hangs, replaying "
                     "prefixes");
  c.replay->add_option("--timeout", rp.timeout_ms,
                       "milliseconds to wait for the GPU before calling it a hang (default 5000)")
      ->transform(uint_option(1, 3600000));
  c.replay->add_flag("--json", rp.json, "the result as one JSON object");
  c.boot = sub("boot", "boot a GPU hcq drives without a kernel GPU driver (am:) and report");
  c.boot->add_option("DEVICE", c.device, "am:<PCI address> (on vfio-pci) or emu:gfx1100_am")
      ->required();
  c.boot->add_flag("--reset", c.reset, "mode-1 reset first, whatever state the GPU is in");
}

int run_command(const Command& c) {
  if (*c.ls) return cmd_ls(c.all, c.json);
  if (*c.info) return cmd_info(c.device, c.json);
  if (*c.run) return cmd_run(c.device, c.size, c.json);
  if (*c.trace) return cmd_trace(c.device, c.trace_file);
  if (*c.dump) return hcq::tools::cmd_dump(c.dump_args);
  if (*c.pci) return hcq::tools::cmd_pci(c.pci_args);
  if (*c.reg)
    return c.reg_args.device.rfind("usb:", 0) == 0 ? hcq::tools::cmd_reg_usb(c.reg_args)
                                                   : hcq::tools::cmd_reg(c.reg_args);
  if (*c.usb_ls) return hcq::tools::cmd_usb_ls(c.json);
  if (*c.usb_bench) return hcq::tools::cmd_usb_bench(c.usb_device, c.json);
  if (*c.rdma_ls) return hcq::tools::cmd_rdma_ls(c.json);
  if (*c.rdma_bench) return hcq::tools::cmd_rdma_bench(c.rdma_args);
  if (*c.boot) return cmd_boot(c.device, c.reset);
  if (*c.replay) {
    if (c.replay_args.bisect && c.replay_args.until)
      throw hcq::tools::UsageError("replay: --bisect replays its own prefixes; it takes no --until");
    return hcq::tools::cmd_replay(c.replay_args);
  }
  return 2;  // unreachable: CLI11 requires one subcommand
}

// "hcq: MESSAGE" and where the usage is, for a command line hcq cannot use: exit status 2.
int usage_error(const CLI::App& app, const std::string& message) {
  std::string help = "hcq";
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    help += " " + sub->get_name();
  }
  std::fprintf(stderr, "hcq: %s\nRun '%s --help' for usage.\n", message.c_str(), help.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int rc = 1;
  // Ctrl-C or a kill leaves no temporary trees or shared-memory segments behind.
  hcq::os::cleanup_on_signals();
  CLI::App app("hcq drives GPUs from user space (AMD, NVIDIA, Qualcomm Adreno; emulated ones "
               "without a GPU).",
               "hcq");
  Command command;
  // One line per failure. hcq::Error messages are written for a person; a std exception's
  // what() names only what threw ("stoi", "std::bad_alloc"), so it gets context here.
  if (argc > 1 && std::strcmp(argv[1], "replay") == 0)
    hcq::tools::replay_without_address_randomization(argv);
  try {
    define(app, command);
    try {
      app.parse(argc, argv);
      rc = run_command(command);
    } catch (const CLI::Success& e) {
      rc = app.exit(e);  // --help or --version, on standard output
    } catch (const CLI::ParseError& e) {
      // An argument no subcommand took is named the way a person reads it (CLI11 says "The
      // following argument was not expected", and reports a missing subcommand first).
      const auto extra = app.remaining(true);
      std::string message = e.what();
      if (!extra.empty() && (dynamic_cast<const CLI::ExtrasError*>(&e) ||
                             app.get_subcommands().empty()))
        message = extra[0].rfind('-', 0) == 0 ? "unknown option " + extra[0]
                  : app.get_subcommands().empty()
                      ? "unknown subcommand " + extra[0] + " (ls, info, run, trace, dump, pci, reg, usb, rdma, replay, boot)"
                      : "unexpected argument " + extra[0];
      rc = usage_error(app, message);
    } catch (const hcq::tools::UsageError& e) {
      rc = usage_error(app, e.what());
    }
  } catch (const hcq::Error& e) {
    std::fprintf(stderr, "hcq: %s\n", e.what());
  } catch (const std::bad_alloc& e) {
    std::fprintf(stderr, "hcq: out of memory (%s: a host allocation failed)\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hcq: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "hcq: internal error: an exception that is not a std::exception\n");
  }
  // Standard output is buffered: a full disk or a closed file shows only at the flush (or
  // left ferror set when an earlier buffer went out), and lost output must not exit 0.
  // std::cout shares stdout's buffer (sync_with_stdio): its flush is the first fflush.
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    const int err = errno;
    std::fprintf(stderr, "hcq: cannot write standard output: %s\n",
                 err ? std::strerror(err) : "an earlier write failed");
    return rc ? rc : 1;
  }
  return rc;
}
