// A program using the installed hcq library (pkg-config hcq, C++20): it opens a device,
// registers the CPU implementation an emulated GPU runs for its kernel, loads the kernel's code
// object, launches it once, then compiles and replays a batch, and checks every result.
//
//   example [DEVICE] [CODE_OBJECT]
//
// DEVICE defaults to emu:gfx1100. CODE_OBJECT defaults to the one meson built next to the
// program for the device's architecture: saxpy-<arch>.hsaco (AMD) or saxpy-<arch>.cubin
// (NVIDIA). Exit status 0 when every check passed, 1 otherwise.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "amd/decode.hpp"      // the packet decoders are part of the library too
#include "batch/batch.hpp"     // hcq::batch: schedules compiled into command buffers
#include "core/hcq.hpp"        // Device, Buffer, Program, KernelArgs, queues, errors
#include "emu/kernels.hpp"     // hcq::emu::register_kernel for the emulated GPUs

#ifndef HCQ_EXAMPLE_KERNEL_DIR
#define HCQ_EXAMPLE_KERNEL_DIR "."
#endif

using hcq::batch::Arg;
using hcq::batch::Bindings;
using hcq::batch::Mem;
using hcq::batch::Schedule;

namespace {

// What an emulated GPU runs when a dispatch points at the kernel named "saxpy": the same work
// as saxpy.cl / saxpy.cu, work-item by work-item. The argument offsets are those of the kernel's
// argument layout (pointers 8 bytes, float and uint 4, each at its natural alignment), which
// the code object's metadata also gives. Every access goes through the dispatch's address
// space, so one outside a buffer faults as it would on a GPU.
void saxpy_on_cpu(const hcq::emu::Dispatch& d) {
  const uint64_t x = d.arg<uint64_t>(0), y = d.arg<uint64_t>(8);
  const float a = d.arg<float>(16);
  const uint32_t n = d.arg<uint32_t>(20), block = d.arg<uint32_t>(24);
  for (uint32_t group = 0; group < d.grid.x; ++group)
    for (uint32_t t = 0; t < d.block.x; ++t) {
      const uint32_t i = group * block + t;
      if (i >= n) continue;
      const float xi = *d.ptr<float>(x + 4ull * i, 1);
      float* yi = d.ptr<float>(y + 4ull * i, 1);
      *yi = std::fma(a, xi, *yi);  // the GPU compilers contract a * x + y to one fma
    }
}

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw hcq::InvalidInput("cannot read the code object '" + path + "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const std::byte*>(bytes.data());
  return {p, p + bytes.size()};
}

std::string default_code_object(const hcq::DeviceProperties& p) {
  const std::string ext = p.vendor == "AMD" ? ".hsaco" : p.vendor == "NVIDIA" ? ".cubin" : "";
  if (ext.empty())
    throw hcq::InvalidInput("no example code object for " + p.vendor + " " + p.arch +
                            ": give one as the second argument");
  return std::string(HCQ_EXAMPLE_KERNEL_DIR) + "/saxpy-" + p.arch + ext;
}

int failures = 0;

void check(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) {
      std::printf("%s: element %zu is %g, expected %g\n", what, i, got[i], want[i]);
      ++failures;
      return;
    }
  std::printf("%s: %zu elements as expected\n", what, want.size());
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string device = argc > 1 ? argv[1] : "emu:gfx1100";

  // Emulated GPUs run a registered CPU implementation for each kernel, found by name; a real
  // GPU runs the code object and never looks here.
  hcq::emu::register_kernel("saxpy", saxpy_on_cpu);

  auto dev = hcq::Device::open(device);
  std::printf("%s: %s\n", dev->name().c_str(), dev->properties().description.c_str());
  const std::string path = argc > 2 ? argv[2] : default_code_object(dev->properties());
  const std::vector<std::byte> code = read_file(path);
  hcq::Program saxpy(*dev, code, "saxpy");

  // The kernel's `n` and `block` are 32-bit (uint): pass uint32_t values. A size_t would be 8
  // bytes, and the launch refuses it (InvalidInput naming the argument).
  const uint32_t n = 10000, block = 64, groups = (n + block - 1) / block;
  const uint64_t bytes = uint64_t{n} * sizeof(float);
  std::vector<float> x(n), y(n, 1.f), want(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = float(i % 7);

  // 1. One launch: y = 2 * x + y.
  hcq::Buffer X = dev->allocate(bytes), Y = dev->allocate(bytes), Z = dev->allocate(bytes);
  dev->copy_in(X, 0, x.data(), bytes);
  dev->copy_in(Y, 0, y.data(), bytes);
  saxpy.launch(hcq::KernelArgs().buffer(X).buffer(Y).value(2.f).value(n).value(block),
               {groups, 1, 1}, {block, 1, 1}, /*wait=*/true);
  std::vector<float> got(n);
  dev->copy_out(got.data(), Y, 0, bytes);
  for (uint32_t i = 0; i < n; ++i) want[i] = std::fma(2.f, x[i], y[i]);
  check("launch", got, want);

  // 2. A batch: y = a * x + y, then z = y on a copy queue; x is an input and a a scalar,
  // bound at each run. Compiled once, replayed twice with a new scalar.
  Schedule s(*dev);
  Mem in = s.input(bytes);
  auto a = s.scalar<float>();
  s.launch(saxpy, {groups, 1, 1}, {block, 1, 1},
           {Arg::buffer(in), Arg::buffer(Mem::of(Y)), Arg::scalar(a), Arg::value(n),
            Arg::value(block)});
  s.copy(Mem::of(Z), 0, Mem::of(Y), 0, bytes);  // waits for the launch
  hcq::batch::Executable exe = s.compile();
  for (float scale : {3.f, 0.5f}) {
    dev->timeline().wait(exe.run(Bindings().input(in, X).scalar(a, scale)));
    dev->copy_out(got.data(), Z, 0, bytes);
    for (uint32_t i = 0; i < n; ++i) want[i] = std::fma(scale, x[i], want[i]);
    check(scale == 3.f ? "batch run 1" : "batch run 2", got, want);
  }

  // 3. The decoders: a PM4 NOP with one body dword, as `hcq dump` would print it.
  const uint32_t nop[] = {hcq::amd::pm4::header(hcq::amd::pm4::NOP, 1), 0};
  const auto packets = hcq::amd::decode_pm4(nop, hcq::amd::Gen::Gfx11);
  if (packets.size() != 1 || packets[0].name != "NOP") {
    std::printf("decode: expected one NOP\n");
    ++failures;
  } else {
    std::printf("decode: %s\n", hcq::to_text(packets[0]).c_str());
  }

  std::printf(failures ? "FAILED\n" : "ok\n");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "example: %s\n", e.what());
  return 1;
}
