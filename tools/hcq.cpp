// hcq: the command-line tool. `hcq ls` lists devices and the GPUs on the PCI bus, `hcq info
// DEVICE` shows one, `hcq run` runs the demo workload (the README's main job) on the best
// device, an emulated AMD GPU when no GPU is present; `hcq pci` and `hcq reg` are for
// bring-up. Errors become one line on stderr and a non-zero exit.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "batch/batch.hpp"
#include "core/hcq.hpp"
#include "dump.hpp"
#include "kernels.hpp"
#include "numbers.hpp"
#include "os/output_file.hpp"
#include "pci.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: hcq ls [--all]         list the devices hcq can open and the GPUs on the\n"
               "                              PCI bus (--all: every PCI function)\n"
               "       hcq info [DEVICE]      properties of a device\n"
               "       hcq run [DEVICE] [--size N]  (N: 1 to 4294967295, decimal or 0x hex)\n"
               "                              demo: copy in, a chain of kernels, copies on the\n"
               "                              copy queue, copy out, verify, report\n"
               "       hcq trace [DEVICE] [FILE]\n"
               "                              the demo as a compiled, profiled batch; writes a\n"
               "                              Chrome/Perfetto trace (default hcq-trace.json)\n"
               "       hcq dump [--json] [--queue Q] [--submissions A:B] [--packet NAME] FILE\n"
               "       hcq dump --raw pm4|sdma [--gen G] FILE\n"
               "                              decode a capture (HCQ_CAPTURE=FILE) or raw dwords\n"
               "       hcq pci DEVICE [--json] [--unbind|--bind-vfio [--force]]\n"
               "                              bring-up view of a PCI function: identity, BARs,\n"
               "                              resizable BAR, link, driver, IOMMU group, bridges;\n"
               "                              --unbind/--bind-vfio take a GPU or accelerator\n"
               "                              (class 0x03/0x12), anything else needs --force\n"
               "       hcq reg DEVICE read|write OFFSET|NAME [VALUE] [--bar N] [--force]\n"
               "                              MMIO peek/poke in the GPU's register BAR; OFFSET\n"
               "                              is hex with 0x (0x140), VALUE decimal or 0x hex\n"
               "                              up to 0xffffffff\n"
               "DEVICE: amd:N (a KFD GPU), nv:N, qcom:N, emu:gfx90a|gfx942|gfx1100|gfx1201|\n"
               "        gfx1100_usb|sm_80|sm_90|sm_100|a660|a740|a660_msm|a740_msm (emulated),\n"
               "        auto; for pci and reg a PCI address (0000:03:00.0 or 03:00.0);\n"
               "        HCQ_EMULATED_PCI=1 runs them on an emulated PCI system\n");
  return 2;
}

int cmd_ls(bool all) {
  for (auto& l : hcq::Device::list())
    std::printf("%-16s %s%s\n", l.name.c_str(), l.description.c_str(),
                l.emulated ? "  [emulated]" : "");
  return hcq::tools::cmd_ls_pci(all);
}

int cmd_info(const std::string& name) {
  auto dev = hcq::Device::open(name);
  const auto& p = dev->properties();
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

int cmd_run(const std::string& name, uint32_t n) {
  using namespace hcq;
  kernels::register_cpu_implementations();
  auto dev = Device::open(name);
  const auto& p = dev->properties();
  std::printf("device   %s: %s%s\n", p.name.c_str(), p.description.c_str(),
              p.emulated ? " [emulated]" : "");
  auto image = kernels::code_object(p.arch);
  if (image.empty())
    throw Error("no code object was built for " + p.arch +
                " (install clang-19 and lld-19, then rebuild)");
  auto loaded = std::shared_ptr<const ProgramImage>(dev->driver().load_program(*dev, image));
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
  std::printf("launches %d kernels on the compute queue, %d device copies %s\n", launches + 100,
              copies, engine ? "on the copy queue" : "as host copies (shared memory)");
  std::printf("copy-in  %.1f MiB in %.2f ms (%.2f GB/s, %s)\n", 2.0 * double(bytes) / (1 << 20),
              copy_in_s * 1e3, 2.0 * double(bytes) / copy_in_s / 1e9,
              engine ? "staged through the copy queue" : "memcpy into shared memory");
  std::printf("latency  empty launch round trip: median %.1f us\n", rtt[50] * 1e6);
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
  auto loaded = std::shared_ptr<const ProgramImage>(dev->driver().load_program(*dev, image));
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
  // OutputFile: no symlink followed, no one else's file truncated, a full disk an error.
  std::ostringstream json;
  exe.write_trace(json);
  auto f = os::OutputFile::create(path);
  f.write(json.str());
  f.close();
  std::printf("trace    %zu calls on %s (%zu cross-queue waits) -> %s\n", s.calls(),
              p.name.c_str(),
              exe.stats(QueueKind::Compute).waits + exe.stats(QueueKind::Copy).waits,
              path.c_str());
  return 0;
}

int run_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") return usage();
  if (args[0] == "ls") {
    if (args.size() > 2 || (args.size() == 2 && args[1] != "--all")) return usage();
    return cmd_ls(args.size() == 2);
  }
  if (args[0] == "pci") return hcq::tools::cmd_pci({args.begin() + 1, args.end()});
  if (args[0] == "reg") return hcq::tools::cmd_reg({args.begin() + 1, args.end()});
  if (args[0] == "info") return cmd_info(args.size() > 1 ? args[1] : "auto");
  if (args[0] == "dump") return hcq::tools::cmd_dump({args.begin() + 1, args.end()});
  if (args[0] == "trace")
    return cmd_trace(args.size() > 1 ? args[1] : "auto",
                     args.size() > 2 ? args[2] : "hcq-trace.json");
  if (args[0] == "run") {
    std::string dev = "auto";
    uint32_t n = 1 << 20;
    for (size_t i = 1; i < args.size(); i++) {
      if (args[i] == "--size") {
        if (i + 1 == args.size()) throw hcq::InvalidInput("--size needs a value");
        const std::string& text = args[++i];
        n = uint32_t(hcq::tools::parse_uint(text, UINT32_MAX, "--size"));
        if (n == 0) throw hcq::InvalidInput("--size: '" + text + "' is out of range (at least 1)");
      } else if (args[i].rfind("--", 0) == 0) {
        throw hcq::InvalidInput("unknown option " + args[i]);
      } else {
        dev = args[i];
      }
    }
    return cmd_run(dev, n);
  }
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  int rc = 1;
  // One line per failure. hcq::Error messages are written for a person; a std exception's
  // what() names only what threw ("stoi", "std::bad_alloc"), so it gets context here.
  try {
    rc = run_command({argv + 1, argv + argc});
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
