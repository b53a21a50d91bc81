// core/ipc: buffers and signals exported by one process and imported by another (issue 19,
// part 4), on emulated devices: the emulated kernels export memfds, and the importer's
// emulated GPU maps the same pages. The processes are forked children; every wait is bounded
// (Children::join kills what is still running), so a dead child fails the test, never hangs it.
#include "core/ipc.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "common/error_of.hpp"
#include "common/patterns.hpp"
#include "core/hcq.hpp"
#include "kernels.hpp"

namespace hcq {
namespace {

using namespace std::chrono_literals;
using testing_support::Children;
using testing_support::error_of;
using testing_support::pattern;

constexpr auto kStep = 5000ms;  // any one wait of a child
constexpr auto kWhole = 20000ms;

// What the emulated kernels could leave in /dev/shm: their memory objects are named
// "hcq-emu-..." (memfds, which never appear there; a shm_open would). Other names belong to
// other tests running at the same time on the machine.
std::set<std::string> dev_shm() {
  std::set<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name).starts_with("hcq-emu")) out.insert(e->d_name);
    ::closedir(d);
  }
  return out;
}

struct SocketPair {
  SocketPair() {
    int s[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s), 0);
    a = os::OwnedFd(s[0]);
    b = os::OwnedFd(s[1]);
  }
  os::OwnedFd a, b;
};

// A one-byte message ("ready", "imported"): the order the two processes keep.
void tell(int sock, char what) {
  std::byte b{uint8_t(what)};
  os::send_fds(sock, std::span(&b, 1), {}, kStep);
}
std::string heard(int sock, char want) {
  os::FdMessage m = os::receive_fds(sock, 1, kStep);
  if (m.bytes.size() != 1 || char(m.bytes[0]) != want)
    return std::string("expected the message '") + want + "'";
  return "";
}

class Ipc : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels::register_cpu_implementations();
    shm_before_ = dev_shm();
  }
  void TearDown() override { EXPECT_EQ(dev_shm(), shm_before_) << "left in /dev/shm"; }
  std::string arch() const { return GetParam().substr(4); }
  std::set<std::string> shm_before_;
};

constexpr uint32_t kWords = 4096, kFillValue = 0xC0FFEE17;

std::vector<uint8_t> expected_bytes() {
  auto v = pattern(kWords * 4, 19);
  for (uint32_t i = kWords / 4; i < kWords * 3 / 4; i++) std::memcpy(&v[i * 4], &kFillValue, 4);
  return v;
}

// The producer: a buffer with a pattern, a kernel that fills its middle, then a GPU signal.
// The kernel runs only once the consumer says its wait is queued.
std::string producer(int sock, const std::string& target) {
  auto dev = Device::open(target);
  auto img = std::shared_ptr<const ProgramImage>(
      load_program(*dev, kernels::code_object(dev->properties().arch)));
  Program fill(*dev, img, "fill_u32");
  Buffer buf = dev->allocate(kWords * 4);
  auto init = pattern(kWords * 4, 19);
  dev->copy_in(buf, 0, init.data(), init.size());
  dev->synchronize();  // copy_in returns once its source may be reused, not once it landed
  Signal s = dev->new_signal(0);
  send_handle(sock, buf.export_ipc());
  send_handle(sock, s.export_ipc());
  if (auto e = heard(sock, 'r'); !e.empty()) return e;
  ShadowMemory args(*dev, 4096);
  const uint32_t n = kWords / 2;
  fill.fill_args(KernelArgs().buffer(buf, kWords).value(kFillValue).value(n).value(64u),
                 args.host());
  args.mark(0, 4096);
  args.publish();
  ComputeQueue q(*dev);
  q.memory_barrier().exec(fill, args.va(), {n / 64, 1, 1}, {64, 1, 1}).memory_barrier().signal(s, 1);
  q.bind();
  q.submit();
  s.wait(1, kStep);
  return "";
}

// The consumer: its copy queue waits on the producer's signal on the GPU, then copies the
// producer's buffer into its own. A device without a copy engine (Adreno; its code objects
// have no copy kernel) waits on its compute queue and copies as Device::copy does there: a
// host copy of the shared memory, once that queue passed the wait.
std::string consumer(int sock, const std::string& target) {
  auto dev = Device::open(target);
  const bool engine = dev->properties().caps.copy_engine;
  Buffer in = dev->import_buffer(receive_handle(sock, kStep));
  Signal ready = dev->import_signal(receive_handle(sock, kStep));
  if (!in.imported() || !ready.imported() || in.size() != kWords * 4)
    return "the imports do not say what they are";
  Buffer out = dev->allocate(kWords * 4);
  Signal done = dev->new_signal(0);
  std::optional<CopyQueue> cq;
  std::optional<ComputeQueue> kq;
  if (engine) {
    cq.emplace(*dev);
    cq->wait(ready, 1);
    cq->copy(out.va(), in.va(), kWords * 4).signal(done, 1);
    cq->bind();
    cq->submit();
  } else {
    kq.emplace(*dev);
    kq->wait(ready, 1);
    kq->memory_barrier().signal(done, 1);
    kq->bind();
    kq->submit();
  }
  std::this_thread::sleep_for(30ms);
  if (done.value() != 0 || ready.value() != 0)
    return "the copy ran before the producer signalled";
  tell(sock, 'r');  // only now may the producer run its kernel and signal
  done.wait(1, kStep);
  if (!engine) dev->copy(out, 0, in, 0, kWords * 4);
  std::vector<uint8_t> got(kWords * 4);
  dev->copy_out(got.data(), out, 0, got.size());
  const auto want = expected_bytes();
  for (size_t i = 0; i < got.size(); i++)
    if (got[i] != want[i])
      return "byte " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(want[i]);
  return "";
}

TEST_P(Ipc, AConsumerQueueWaitsOnTheProducersSignalOnTheGpuAndCopiesItsBuffer) {
  if (kernels::code_object(arch()).empty()) GTEST_SKIP() << "no code object for " << arch();
  SocketPair sp;
  Children kids;
  const std::string target = GetParam();
  kids.spawn("producer", [&] { return producer(sp.a.get(), target); });
  kids.spawn("consumer", [&] { return consumer(sp.b.get(), target); });
  EXPECT_EQ(kids.join(kWhole), "");
}

TEST_P(Ipc, AnImportOutlivesItsExporterKilledAfterTheExport) {
  SocketPair sp;
  Children kids;
  const std::string target = GetParam();
  const pid_t p = kids.spawn("exporter", [&]() -> std::string {
    sp.b.reset();  // each process holds only its own end (the importer sees this one close)
    auto dev = Device::open(target);
    Buffer buf = dev->allocate(64 << 10);
    auto data = pattern(64 << 10, 5);
    dev->copy_in(buf, 0, data.data(), data.size());
    dev->synchronize();
    send_handle(sp.a.get(), buf.export_ipc());
    if (auto e = heard(sp.a.get(), 'i'); !e.empty()) return e;
    ::kill(::getpid(), SIGKILL);
    return "not killed";
  });
  kids.spawn("importer", [&]() -> std::string {
    sp.a.reset();
    auto dev = Device::open(target);
    Buffer in = dev->import_buffer(receive_handle(sp.b.get(), kStep));
    tell(sp.b.get(), 'i');
    // The exporter is gone once its end of the socket closes.
    std::string gone = error_of<Error>([&] { os::receive_fds(sp.b.get(), 1, kStep); });
    if (gone != "unix socket: the peer closed the connection") return "exporter: " + gone;
    std::vector<uint8_t> got(64 << 10);
    Buffer mine = dev->allocate(got.size());
    dev->copy(mine, 0, in, 0, got.size());  // the GPU reads the pages the dead process left
    dev->copy_out(got.data(), mine, 0, got.size());
    if (got != pattern(64 << 10, 5)) return "the imported bytes changed";
    return "";
  });
  sp.a.reset();  // the parent's copies: the exporter's death must close the last one
  sp.b.reset();
  EXPECT_EQ(kids.join(kWhole, p, SIGKILL), "");
}

// In one process: an export imported back is a second view of the same memory. Threads
// export and import at once (the calls' thread safety).
TEST_P(Ipc, ThreadsExportAndImportAtOnce) {
  auto dev = Device::open(GetParam());
  std::vector<std::thread> ts;
  std::vector<std::string> errs(4);
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&, t] {
      try {
        for (int i = 0; i < 8; i++) {
          Buffer b = dev->allocate_visible(4096);
          Buffer v = dev->import_buffer(b.export_ipc());
          Signal s = dev->new_signal(0);
          Signal w = dev->import_signal(s.export_ipc());
          if (v.va() == b.va()) errs[t] = "the import has the exporter's address";
          static_cast<uint32_t*>(b.host())[7] = uint32_t(t * 100 + i);
          if (static_cast<uint32_t*>(v.host())[7] != uint32_t(t * 100 + i))
            errs[t] = "the import does not see the export's bytes";
          s.set(uint64_t(i + 1));
          if (w.value() != uint64_t(i + 1)) errs[t] = "the imported signal differs";
          w.set(99);
          if (s.value() != 99) errs[t] = "the signal does not see the import's write";
        }
      } catch (const std::exception& e) {
        errs[t] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (auto& e : errs) EXPECT_EQ(e, "");
}

TEST_P(Ipc, BadImportsAreExactErrors) {
  auto dev = Device::open(GetParam());
  const std::string me = GetParam();
  Buffer b = dev->allocate(8192);
  Signal s = dev->new_signal();
  EXPECT_EQ(error_of([&] { dev->import_signal(b.export_ipc()); }),
            me + ": import_signal: the handle is of a buffer, not a signal");
  EXPECT_EQ(error_of([&] { dev->import_buffer(s.export_ipc()); }),
            me + ": import_buffer: the handle is of a signal, not a buffer");
  {
    // A handle of another target (checked before the driver sees its fd).
    const std::string other = arch() == "sm_90" ? "gfx1100" : "sm_90";
    IpcHandle h = b.export_ipc();
    h.device = "emu:" + other;
    h.arch = other;
    EXPECT_EQ(error_of([&] { dev->import_buffer(std::move(h)); }),
              me + ": import_buffer: the handle is of emu:" + other + " (" + other +
                  "), this device is " + me + " (" + arch() + ")");
  }
  // What each kernel driver says of memory other than the handle says (KFD asks the
  // dma-buf's size first; RM refuses to map past the object's end) and of an fd that holds
  // no exported memory.
  const bool amd = GetParam().starts_with("emu:gfx");
  const bool kgsl = GetParam().starts_with("emu:a");
  {
    // Host memory: the CPU maps all of it, so RM's map is where the size is checked.
    Buffer hb = dev->allocate(8192, MemoryKind::Host);
    IpcHandle h = hb.export_ipc();
    h.alloc_bytes = 16384;
    h.size = 16384;
    EXPECT_EQ(error_of<Error>([&] { dev->import_buffer(std::move(h)); }),
              amd || kgsl ? me + ": the imported memory holds 8192 bytes, the handle says 16384"
                  : me + ": NV_ESC_RM_MAP_MEMORY: NV_ERR_INVALID_LIMIT");
  }
  {
    IpcHandle h = b.export_ipc();
    h.size = 8193;
    EXPECT_EQ(error_of([&] { dev->import_buffer(std::move(h)); }),
              me + ": import_buffer: the handle's sizes do not fit: 8193 bytes at offset 0 of "
                   "8192 (a multiple of 4096)");
  }
  const std::string not_exported =
      amd ? me + ": the imported fd is not a buffer amdgpu exported "
                 "(AMDKFD_IOC_GET_DMABUF_INFO: Invalid argument)"
      : kgsl ? me + ": the imported fd is not a dma-buf KGSL takes "
                    "(IOCTL_KGSL_GPUOBJ_IMPORT: Invalid argument)"
             : me + ": RM control OS_UNIX_IMPORT_OBJECT_FROM_FD (0x3d06): "
                    "NV_ERR_INVALID_PARAMETER";
  {
    IpcHandle h = b.export_ipc();
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    ::close(p[1]);
    h.fd = os::OwnedFd(p[0]);  // not memory at all
    EXPECT_EQ(error_of<Error>([&] { dev->import_buffer(std::move(h)); }), not_exported);
  }
  // Memory, but not exported memory (issue 33): a regular file on disk of the handle's size,
  // and a memfd an exporter could still shrink under the importer's mapping (a SIGBUS there).
  // Real kernels refuse both (dma_buf_get); the emulated ones take only sealed memfds.
  {
    char path[] = "/tmp/hcq_ipc_regular_XXXXXX";
    const int f = ::mkstemp(path);
    ASSERT_GE(f, 0);
    ::unlink(path);
    ASSERT_EQ(::ftruncate(f, 8192), 0);
    IpcHandle h = b.export_ipc();
    h.fd = os::OwnedFd(f);
    EXPECT_EQ(error_of<Error>([&] { dev->import_buffer(std::move(h)); }), not_exported);
    const int m = ::memfd_create("not-sealed", MFD_CLOEXEC);
    ASSERT_GE(m, 0);
    ASSERT_EQ(::ftruncate(m, 8192), 0);
    IpcHandle u = b.export_ipc();
    u.fd = os::OwnedFd(m);
    EXPECT_EQ(error_of<Error>([&] { dev->import_buffer(std::move(u)); }), not_exported);
  }
  {
    // What an exporter hands out cannot be cut or grown under its importers.
    IpcHandle h = b.export_ipc();
    EXPECT_NE(::ftruncate(h.fd.get(), 0), 0);
    EXPECT_EQ(errno, EPERM);
    EXPECT_NE(::ftruncate(h.fd.get(), 1 << 20), 0);
    EXPECT_EQ(errno, EPERM);
  }
  {
    IpcHandle h = b.export_ipc();
    h.fd.reset();
    EXPECT_EQ(error_of([&] { dev->import_buffer(std::move(h)); }),
              me + ": import_buffer: the handle has no file descriptor (used already?)");
  }
  {
    void* host = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    Buffer user = dev->map_host(host, 4096);
    EXPECT_EQ(error_of([&] { (void)user.export_ipc(); }),
              me + ": the buffer at " + hex(user.va()) +
                  " is the caller's host memory (map_host): share it as the host memory it is, "
                  "not as a device buffer");
    user.reset();
    ::munmap(host, 4096);
  }
  // Nothing of the refused imports stays mapped: the address space is as before.
  Buffer again = dev->import_buffer(b.export_ipc());
  EXPECT_TRUE(again.host());
}

TEST(IpcSocket, ReceiveHandleExactErrors) {
  {
    SocketPair sp;
    sp.a.reset();
    EXPECT_EQ(error_of<Error>([&] { receive_handle(sp.b.get(), 1000ms); }),
              "IPC handle: the peer closed the connection");
  }
  {
    SocketPair sp;
    EXPECT_EQ(error_of<TimeoutError>([&] { receive_handle(sp.b.get(), 10ms); }),
              "IPC handle: none received in 10 ms");
  }
  {
    SocketPair sp;
    tell(sp.a.get(), 'x');
    EXPECT_EQ(error_of([&] { receive_handle(sp.b.get(), 1000ms); }),
              "IPC handle: a message of 1 bytes is not a handle (144 bytes)");
  }
  {
    // A handle's bytes without its fd: what a sender that forgot SCM_RIGHTS sends.
    SocketPair sp;
    IpcHandle h;
    h.device = "emu:gfx1100";
    h.arch = "gfx1100";
    h.fd = os::OwnedFd(::dup(0));
    send_handle(sp.a.get(), h);
    IpcHandle got = receive_handle(sp.b.get(), 1000ms);  // well formed
    EXPECT_EQ(got.device, "emu:gfx1100");
    // Resend its bytes alone.
    os::FdMessage raw;
    send_handle(sp.a.get(), h);
    raw = os::receive_fds(sp.b.get(), 256, 1000ms);
    os::send_fds(sp.a.get(), raw.bytes, {}, 1000ms);
    EXPECT_EQ(error_of([&] { receive_handle(sp.b.get(), 1000ms); }),
              "IPC handle: the buffer handle came with 0 file descriptors, not 1");
  }
}

INSTANTIATE_TEST_SUITE_P(Emulated, Ipc, ::testing::Values("emu:gfx1100", "emu:sm_90", "emu:a740"),
                         [](const auto& info) { return info.param.substr(4); });

}  // namespace
}  // namespace hcq
