#include "core/program.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/queue.hpp"

namespace hcq {
namespace {

// A program image as lib/core loads it: its device memory and its kernels.
class LoadedProgram final : public KernelTable<KernelObject> {
 public:
  LoadedProgram(Device& dev, ProgramLayout layout) : KernelTable(layout.vendor) {
    memory_ = dev.allocate(std::max<uint64_t>(layout.size, 1), MemoryKind::Device,
                           layout.executable);
    const uint64_t va = memory_.va();
    if (va % layout.alignment)
      throw Error(dev.name() + ": code memory at " + hex(va) + " is not aligned to " +
                  std::to_string(layout.alignment));
    std::vector<std::byte>& laid = layout.bytes;
    if (laid.size() > layout.size) throw Error(dev.name() + ": program image overruns its memory");
    laid.resize(layout.size);
    if (layout.relocate) layout.relocate(laid, va);
    if (memory_.host())
      std::memcpy(memory_.host(), laid.data(), laid.size());
    else
      dev.copy_in(memory_, 0, laid.data(), laid.size());
    dev.synchronize();
    for (ProgramLayout::Kernel& k : layout.kernels) {
      if (!k.unsupported.empty()) {
        unsupported_[k.object->name] = k.unsupported;
        continue;
      }
      if (layout.place)
        layout.place(*k.object, va);
      else
        k.object->code_va += va;
      kernels_[k.object->name] = std::move(k.object);
    }
  }

 private:
  Buffer memory_;
};

}  // namespace

std::unique_ptr<ProgramImage> load_program(Device& dev, std::span<const std::byte> image) {
  return std::make_unique<LoadedProgram>(dev, dev.driver().program_layout(image));
}

Device& Program::device() const {
  return link_->checked(("program '" + kernel_->name + "'").c_str());
}

Program::Program(Device& dev, std::span<const std::byte> image, const std::string& kernel)
    : Program(dev, load_program(dev, image), kernel) {}

Program::Program(Device& dev, std::shared_ptr<const ProgramImage> image, const std::string& kernel)
    : link_(dev.link()), image_(std::move(image)) {
  kernel_ = image_->kernel(kernel);
  if (!kernel_) {
    std::string names;
    for (auto& n : image_->kernel_names()) names += (names.empty() ? "" : ", ") + n;
    throw InvalidInput("code object has no kernel '" + kernel + "' (it has: " + names + ")");
  }
}

void Program::fill_args(const KernelArgs& args, void* out) const {
  const auto& k = *kernel_;
  std::vector<const KernelArg*> explicit_args;
  for (auto& a : k.args)
    if (a.kind != KernelArg::Kind::Hidden) explicit_args.push_back(&a);
  const auto& given = args.args();
  if (given.size() != explicit_args.size())
    throw InvalidInput("kernel '" + k.name + "' takes " + std::to_string(explicit_args.size()) +
                       " arguments, " + std::to_string(given.size()) + " given");
  auto* bytes = static_cast<std::byte*>(out);
  const size_t init = std::min<size_t>(k.kernarg_init.size(), k.kernarg_size);
  std::copy(k.kernarg_init.begin(), k.kernarg_init.begin() + init, bytes);
  std::fill(bytes + init, bytes + k.kernarg_size, std::byte{0});
  for (size_t i = 0; i < given.size(); i++) {
    const KernelArg& want = *explicit_args[i];
    const auto& g = given[i];
    std::string which = "kernel '" + k.name + "' argument " + std::to_string(i) +
                        (want.name.empty() ? "" : " ('" + want.name + "')");
    if (want.kind != KernelArg::Kind::Bytes && (want.kind == KernelArg::Kind::Buffer) != g.is_address)
      throw InvalidInput(which + " expects " +
                         (want.kind == KernelArg::Kind::Buffer ? "a buffer" : "a value") +
                         ", got " + (g.is_address ? "a buffer" : "a value"));
    if (g.bytes.size() != want.size)
      throw InvalidInput(which + " is " + std::to_string(want.size) + " bytes, got " +
                         std::to_string(g.bytes.size()));
    if (uint64_t(want.offset) + want.size > k.kernarg_size)
      throw InvalidInput(which + " lies outside the kernarg segment");
    std::copy(g.bytes.begin(), g.bytes.end(), bytes + want.offset);
  }
}

std::optional<double> Program::launch(const KernelArgs& args, Dim3 grid, Dim3 block, bool wait,
                                      std::chrono::milliseconds timeout) {
  Device* const dev = &device();  // throws once the device was closed
  Signal start, end;
  if (wait) {
    start = dev->new_signal();
    end = dev->new_signal();
  }
  // Lay the arguments out before reserving a timeline value, so bad arguments leave the
  // timeline untouched.
  std::vector<std::byte> laid(std::max<uint32_t>(kernel_->kernarg_size, 1));
  fill_args(args, laid.data());
  uint64_t done;
  {
    std::lock_guard lk(dev->submit_mutex());
    auto& tl = dev->timeline();
    auto r = tl.reserve();
    const uint64_t va = dev->kernarg_write(std::span(laid.data(), kernel_->kernarg_size),
                                           kernel_->kernarg_align, r.next);
    ComputeQueue q(*dev);
    q.wait(tl.signal(), r.prev);
    q.memory_barrier();
    if (wait) q.timestamp(start);
    q.exec(*this, va, grid, block);
    if (wait) q.timestamp(end);
    q.signal(tl.signal(), r.next);
    q.submit();
    r.commit();
    done = r.next;
  }
  if (!wait) return std::nullopt;
  dev->timeline().wait(done, timeout);
  double hz = double(dev->properties().timestamp_hz);
  return double(end.timestamp() - start.timestamp()) / hz;
}

}  // namespace hcq
