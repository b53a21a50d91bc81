// os::UsbDevice and list_usb_devices against the emulated usbfs (os/emulated_usb.hpp). Where
// the behaviour checked is the real kernel's (drivers/usb/core/devio.c), the test says so;
// the emulation was written from that file, and no test here has run against a real device.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <thread>

#include "core/error.hpp"
#include "os/emulated_usb.hpp"
#include "os/usb.hpp"

namespace hcq::os {
namespace {

using std::chrono::milliseconds;

// The timeout of a transfer that must end (done, stalled, short, refused): the emulated
// device's thread answers at once, but a sanitized build on a busy machine once took over
// 100 ms to run it (issue 44). Only a hang reaches this; tests of timeouts use their own.
constexpr int kAnswered = 10000;

// A bridge-like device: interface 0 (mass storage: bulk-only in alt 0, UAS in alt 1 with
// streams, as an ASM2464 offers it), vendor control requests, and a script of faults.
class TestFunction final : public UsbFunction {
 public:
  explicit TestFunction(std::string driver = "usb-storage") : driver_(std::move(driver)) {}
  UsbDeviceDesc descriptor() const override {
    UsbDeviceDesc d;
    d.vendor = 0x174c;
    d.product = 0x2464;
    d.manufacturer = "ASMedia";
    d.product_name = "ASM2464PD";
    d.serial = "0123456789AB";
    d.speed = "10000";
    UsbInterfaceDesc i;
    i.number = 0, i.cls = 8, i.subclass = 6, i.protocol = 0x50, i.driver = driver_;
    i.alts.push_back({0, {{0x81, 2, 1024, 0}, {0x02, 2, 1024, 0}}});
    i.alts.push_back({1, {{0x81, 2, 1024, 32}, {0x02, 2, 1024, 32}, {0x83, 2, 1024, 32},
                          {0x04, 2, 1024, 0}}});
    d.interfaces.push_back(i);
    return d;
  }
  // Vendor request 0x01 (IN): wLength bytes counting up from wValue; 0x02 (OUT): kept.
  UsbReply control(const UsbSetup& s, std::span<uint8_t> data) override {
    std::lock_guard lk(mu_);
    if (s.request == 0x01) {
      for (size_t i = 0; i < data.size(); i++) data[i] = uint8_t(s.value + i);
      return UsbReply::done(data.size());
    }
    if (s.request == 0x02) {
      control_out.assign(data.begin(), data.end());
      return UsbReply::done(data.size());
    }
    return UsbReply::stall();
  }
  UsbReply bulk_out(uint8_t ep, unsigned stream, std::span<const uint8_t> data) override {
    std::lock_guard lk(mu_);
    if (auto r = scripted(ep)) return *r;
    received[ep].emplace_back(data.begin(), data.end());
    streams_seen.push_back(stream);
    return UsbReply::done(data.size());
  }
  // IN transfers are numbered per endpoint: every byte is the number's low byte, the first
  // four are the number.
  UsbReply bulk_in(uint8_t ep, unsigned stream, std::span<uint8_t> data) override {
    std::lock_guard lk(mu_);
    if (auto r = scripted(ep)) return *r;
    uint32_t n = sent[ep]++;
    std::memset(data.data(), int(n & 0xff), data.size());
    if (data.size() >= 4) std::memcpy(data.data(), &n, 4);
    streams_seen.push_back(stream);
    return UsbReply::done(data.size());
  }
  void clear_halt(uint8_t) override {}

  void script(uint8_t ep, UsbReply r) {
    std::lock_guard lk(mu_);
    script_[ep].push_back(r);
  }
  void hold(uint8_t ep, bool on) {  // NAK every transfer on ep while on
    std::lock_guard lk(mu_);
    held_[ep] = on;
  }
  std::vector<std::vector<uint8_t>> out(uint8_t ep) {
    std::lock_guard lk(mu_);
    return received[ep];
  }

  std::mutex mu_;
  std::map<uint8_t, std::vector<std::vector<uint8_t>>> received;
  std::map<uint8_t, uint32_t> sent;
  std::vector<uint8_t> control_out;
  std::vector<unsigned> streams_seen;

 private:
  std::optional<UsbReply> scripted(uint8_t ep) {
    if (held_[ep]) return UsbReply::nak();
    auto& q = script_[ep];
    if (q.empty()) return std::nullopt;
    UsbReply r = q.front();
    q.pop_front();
    return r;
  }
  std::string driver_;
  std::map<uint8_t, std::deque<UsbReply>> script_;
  std::map<uint8_t, bool> held_;
};

class EmulatedUsbTest : public ::testing::Test {
 protected:
  void SetUp() override { usb.plug("2-1", 3, fn); }
  UsbDeviceInfo info() {
    for (auto& d : list_usb_devices(*k))
      if (d.port == "2-1") return d;
    throw Error("2-1 not listed");
  }
  std::string what(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  std::shared_ptr<EmulatedKernel> k = std::make_shared<EmulatedKernel>();
  EmulatedUsb usb{k};
  std::shared_ptr<TestFunction> fn = std::make_shared<TestFunction>();
};

TEST_F(EmulatedUsbTest, ListsTheDevicesWithTheirInterfacesAndDrivers) {
  auto all = list_usb_devices(*k);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].port, "usb2");  // the root hub, device 1 on its bus
  EXPECT_EQ(all[0].devnum, 1);
  EXPECT_EQ(all[0].vendor, 0x1d6b);
  const UsbDeviceInfo& d = all[1];
  EXPECT_EQ(d.port, "2-1");
  EXPECT_EQ(d.bus, 2);
  EXPECT_EQ(d.devnum, 3);
  EXPECT_EQ(d.vendor, 0x174c);
  EXPECT_EQ(d.product, 0x2464);
  EXPECT_EQ(d.manufacturer, "ASMedia");
  EXPECT_EQ(d.product_name, "ASM2464PD");
  EXPECT_EQ(d.serial, "0123456789AB");
  EXPECT_EQ(d.speed, "10000");
  EXPECT_EQ(d.configuration, 1);
  EXPECT_EQ(d.node(), "/dev/bus/usb/002/003");
  EXPECT_EQ(d.name(), "usb 2-1 (174c:2464)");
  ASSERT_EQ(d.interfaces.size(), 1u);
  const UsbInterface& i = d.interfaces[0];
  EXPECT_EQ(i.number, 0);
  EXPECT_EQ(i.alt_setting, 0);
  EXPECT_EQ(i.cls, 8);
  EXPECT_EQ(i.subclass, 6);
  EXPECT_EQ(i.protocol, 0x50);
  EXPECT_EQ(i.endpoints, 2);
  EXPECT_EQ(i.driver, "usb-storage");
  // The attribute formats of drivers/usb/core/sysfs.c.
  EXPECT_EQ(*k->read_file("/sys/bus/usb/devices/2-1/idVendor"), "174c\n");
  EXPECT_EQ(*k->read_file("/sys/bus/usb/devices/2-1:1.0/bInterfaceClass"), "08\n");
  EXPECT_EQ(*k->read_file("/sys/bus/usb/devices/2-1:1.0/bAlternateSetting"), " 0\n");
  EXPECT_TRUE(list_usb_devices(*std::make_shared<EmulatedKernel>()).empty());  // no USB bus
}

// Found by fuzz/fuzz_usb.cpp: strtoul read "-1" as a bus number, "0x1d6b" and "0001<NUL>..."
// as ids, and wrapped "12345" into a 16-bit id. sysfs writes plain decimals and %04x
// (drivers/usb/core/sysfs.c); anything else is no number.
TEST(UsbSysfs, OnlyPlainInRangeNumbersAreRead) {
  EmulatedKernel k;
  auto device = [&](const std::string& port, const std::string& bus, const std::string& devnum,
                    const std::string& vendor, const std::string& product) {
    const std::string dir = "/sys/bus/usb/devices/" + port + "/";
    k.add_file(dir + "busnum", bus + "\n");
    k.add_file(dir + "devnum", devnum + "\n");
    k.add_file(dir + "idVendor", vendor + "\n");
    k.add_file(dir + "idProduct", product + "\n");
  };
  device("3-1", "-1", "2", "174c", "2464");       // a negative bus: not a device
  device("3-2", "3", "128", "174c", "2464");      // USB addresses end at 127 (USB 2.0 9.4.6)
  device("3-3", "+3", "4", "174c", "2464");       // a sign
  device("3-4", "1000", "4", "174c", "2464");     // beyond the node's %03d (usb_devnode)
  device("3-5", "3", "5", "0x1d6b", "12345");     // a prefix; more than 16 bits
  device("3-6", "3", "6", "add1", std::string("0001\0junk", 9));  // a NUL inside
  device("3-7", "3", "7", "ADD1", "0001");        // upper-case hex is still hex
  const auto all = list_usb_devices(k);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].port, "3-5");
  EXPECT_EQ(all[0].vendor, 0);
  EXPECT_EQ(all[0].product, 0);
  EXPECT_EQ(all[1].port, "3-6");
  EXPECT_EQ(all[1].vendor, 0xadd1);
  EXPECT_EQ(all[1].product, 0);
  EXPECT_EQ(all[2].port, "3-7");
  EXPECT_EQ(all[2].vendor, 0xadd1);
  EXPECT_EQ(all[2].product, 1);
}

TEST_F(EmulatedUsbTest, ClaimTakesTheInterfaceFromUsbStorageAndGivesItBack) {
  {
    UsbDevice dev(k, info());
    dev.claim_interface(0);
    EXPECT_EQ(usb.driver("2-1", 0), "usbfs");
    EXPECT_EQ(info().interfaces[0].driver, "usbfs");
    dev.claim_interface(0);  // already ours
  }
  EXPECT_EQ(usb.driver("2-1", 0), "usb-storage");  // USBDEVFS_CONNECT at close
}

TEST_F(EmulatedUsbTest, ASecondClaimIsBusyAndNamesTheHolder) {
  UsbDevice first(k, info());
  first.claim_interface(0);
  UsbDevice second(k, info());
  EXPECT_EQ(what([&] { second.claim_interface(0); }),
            "usb 2-1 (174c:2464): claim of interface 0: held by usbfs (another program has "
            "the device open): Device or resource busy (errno 16)");
  EXPECT_EQ(usb.driver("2-1", 0), "usbfs");  // the first program keeps it
}

TEST_F(EmulatedUsbTest, PermissionOnTheNodeSaysHowToGetIt) {
  k->deny("/dev/bus/usb/002/003", EACCES);
  EXPECT_EQ(what([&] { UsbDevice dev(k, info()); }),
            "usb 2-1 (174c:2464): open /dev/bus/usb/002/003: permission denied (run as root, "
            "or give the node to your user with a udev rule: SUBSYSTEM==\"usb\", "
            "ATTR{idVendor}==\"174c\", ATTR{idProduct}==\"2464\", MODE=\"0666\"): Permission "
            "denied (errno 13)");
}

TEST_F(EmulatedUsbTest, ControlTransfersMoveExactBytes) {
  UsbDevice dev(k, info());
  dev.claim_interface(0);
  uint8_t in[5] = {};
  EXPECT_EQ(dev.control({0xc0, 0x01, 0x10, 0}, in, 5, kAnswered), 5u);
  EXPECT_EQ(std::vector<uint8_t>(in, in + 5), (std::vector<uint8_t>{0x10, 0x11, 0x12, 0x13, 0x14}));
  uint8_t out[3] = {0xde, 0xad, 0x01};
  EXPECT_EQ(dev.control({0x40, 0x02, 0, 0}, out, 3, kAnswered), 3u);
  EXPECT_EQ(fn->control_out, (std::vector<uint8_t>{0xde, 0xad, 0x01}));
  // A request the device does not know is stalled on endpoint 0.
  EXPECT_EQ(what([&] { dev.control({0xc0, 0x7f, 0, 0}, in, 1, kAnswered); }),
            "usb 2-1 (174c:2464): control IN request 0x7f (type 0xc0, value 0x0, index 0x0) of "
            "1 bytes: the device refused the request (stall on endpoint 0x00): Broken pipe "
            "(errno 32)");
  EXPECT_EQ(what([&] { dev.control({0xc0, 0x01, 0, 0}, in, 5, 0); }),
            "usb 2-1 (174c:2464): control IN request 0x1 (type 0xc0, value 0x0, index 0x0) of 5 "
            "bytes: a timeout of 0 ms (every wait needs a positive one)");
}

TEST_F(EmulatedUsbTest, BulkTransfersMoveExactBytes) {
  UsbDevice dev(k, info());
  dev.claim_interface(0);
  std::vector<uint8_t> out(3000);
  for (size_t i = 0; i < out.size(); i++) out[i] = uint8_t(i * 7);
  EXPECT_EQ(dev.bulk_out(0x02, out.data(), out.size(), kAnswered), 3000u);
  EXPECT_EQ(fn->out(0x02).at(0), out);
  std::vector<uint8_t> in(100);
  EXPECT_EQ(dev.bulk_in(0x81, in.data(), in.size(), kAnswered), 100u);
  EXPECT_EQ(in[0], 0);
  EXPECT_EQ(dev.bulk_in(0x81, in.data(), in.size(), kAnswered), 100u);
  uint32_t n;
  std::memcpy(&n, in.data(), 4);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(in[99], 1);
}

TEST_F(EmulatedUsbTest, SixtyFourUrbsInFlightAreReapedInOrder) {
  UsbDevice dev(k, info());
  dev.claim_interface(0);
  fn->hold(0x81, true);
  fn->hold(0x02, true);
  std::vector<std::vector<uint8_t>> in(64, std::vector<uint8_t>(512)), out(64);
  std::vector<UsbDevice::UrbId> ins, outs;
  for (int i = 0; i < 64; i++) {
    ins.push_back(dev.submit_bulk(0x81, in[i].data(), 512));
    out[i].assign(256 + i, uint8_t(i));
    outs.push_back(dev.submit_bulk(0x02, out[i].data(), out[i].size()));
  }
  EXPECT_EQ(dev.in_flight(), 128u);
  fn->hold(0x81, false);
  fn->hold(0x02, false);
  for (int i = 0; i < 64; i++) {
    EXPECT_EQ(dev.wait(ins[i], 1000), 512u);
    uint32_t n;
    std::memcpy(&n, in[i].data(), 4);
    EXPECT_EQ(n, uint32_t(i));
    EXPECT_EQ(in[i][511], uint8_t(i));
    EXPECT_EQ(dev.wait(outs[i], 1000), out[i].size());
  }
  EXPECT_EQ(fn->out(0x02), out);  // in submission order, byte for byte
  EXPECT_EQ(dev.in_flight(), 0u);
}

TEST_F(EmulatedUsbTest, AStallNamesTheEndpointAndClearHaltRecovers) {
  UsbDevice dev(k, info());
  dev.claim_interface(0);
  fn->script(0x81, UsbReply::stall());
  std::vector<uint8_t> in(64);
  const std::string stalled =
      "usb 2-1 (174c:2464): bulk IN of 64 bytes on endpoint 0x81: endpoint 0x81 stalled "
      "(clear_halt(0x81) clears it): Broken pipe (errno 32)";
  EXPECT_EQ(what([&] { dev.bulk_in(0x81, in.data(), 64, kAnswered); }), stalled);
  // The endpoint stays halted (the device STALLs every packet) until it is cleared.
  EXPECT_EQ(what([&] { dev.bulk_in(0x81, in.data(), 64, kAnswered); }), stalled);
  auto id = dev.submit_bulk(0x81, in.data(), 64);
  EXPECT_EQ(what([&] { dev.wait(id, kAnswered); }),
            "usb 2-1 (174c:2464): bulk IN URB of 64 bytes on endpoint 0x81: endpoint 0x81 "
            "stalled (clear_halt(0x81) clears it): Broken pipe (errno 32)");
  dev.clear_halt(0x81);
  EXPECT_EQ(usb.clear_halts("2-1"), 1);
  EXPECT_EQ(dev.bulk_in(0x81, in.data(), 64, kAnswered), 64u);
}

TEST_F(EmulatedUsbTest, ATransferTheDeviceNeverAnswersTimesOut) {
  UsbDevice dev(k, info());
  dev.claim_interface(0);
  fn->hold(0x81, true);
  std::vector<uint8_t> in(64);
  // devio.c usbfs_start_wait_urb: the URB is killed at the timeout, ETIMEDOUT.
  EXPECT_EQ(what([&] { dev.bulk_in(0x81, in.data(), 64, 30); }),
            "usb 2-1 (174c:2464): bulk IN of 64 bytes on endpoint 0x81: timed out after 30 ms");
  auto id = dev.submit_bulk(0x81, in.data(), 64);
  EXPECT_THROW(dev.wait(id, 30), TimeoutError);
  EXPECT_EQ(what([&] { dev.wait(id, 30); }),
            "usb 2-1 (174c:2464): URB " + std::to_string(id) + " is not in flight");  // discarded
  EXPECT_EQ(dev.in_flight(), 0u);
  // A late answer inside the timeout is no timeout.
  fn->hold(0x81, false);
  fn->script(0x81, UsbReply::done(64, milliseconds(10)));
  EXPECT_EQ(dev.bulk_in(0x81, in.data(), 64, 1000), 64u);
}

TEST_F(EmulatedUsbTest, AShortTransferIsAnErrorWhereTheWholeLengthIsNeeded) {
  UsbDevice dev(k, info());
  dev.claim_interface(0);
  std::vector<uint8_t> in(64);
  fn->script(0x81, UsbReply::done(10));
  EXPECT_EQ(what([&] { dev.bulk_in(0x81, in.data(), 64, kAnswered); }),
            "usb 2-1 (174c:2464): bulk IN of 64 bytes on endpoint 0x81: short transfer: asked "
            "64 bytes, got 10");
  fn->script(0x81, UsbReply::done(10));
  EXPECT_EQ(dev.bulk_in(0x81, in.data(), 64, kAnswered, UsbLength::AtMost), 10u);
  fn->script(0x81, UsbReply::done(7));
  auto id = dev.submit_bulk(0x81, in.data(), 64);
  EXPECT_EQ(what([&] { dev.wait(id, kAnswered); }),
            "usb 2-1 (174c:2464): bulk IN URB of 64 bytes on endpoint 0x81: short transfer: "
            "asked 64 bytes, got 7");
}

TEST_F(EmulatedUsbTest, ADisconnectMidTransferFailsItAndLeavesACleanClose) {
  auto dev = std::make_unique<UsbDevice>(k, info());
  dev->claim_interface(0);
  std::vector<std::vector<uint8_t>> in(6, std::vector<uint8_t>(64));
  fn->hold(0x81, true);
  std::vector<UsbDevice::UrbId> ids;
  for (auto& b : in) ids.push_back(dev->submit_bulk(0x81, b.data(), 64));
  fn->hold(0x81, false);
  fn->script(0x81, UsbReply::done(64));
  fn->script(0x81, UsbReply::disconnect());  // the second transfer never finishes
  EXPECT_EQ(dev->wait(ids[0], 1000), 64u);
  // URBs in flight at a disconnect end with ESHUTDOWN (usb_hcd_flush_endpoint), and usbfs
  // still lets them be reaped (USBDEVFS_CAP_REAP_AFTER_DISCONNECT).
  for (size_t i = 1; i < ids.size(); i++)
    EXPECT_EQ(what([&] { dev->wait(ids[i], 1000); }),
              "usb 2-1 (174c:2464): bulk IN URB of 64 bytes on endpoint 0x81: the device is "
              "disconnected: Cannot send after transport endpoint shutdown (errno 108)");
  // Every other request: ENODEV (usbdev_do_ioctl).
  EXPECT_EQ(what([&] { dev->bulk_in(0x81, in[0].data(), 64, kAnswered); }),
            "usb 2-1 (174c:2464): bulk IN of 64 bytes on endpoint 0x81: the device is "
            "disconnected: No such device (errno 19)");
  EXPECT_EQ(what([&] { dev->submit_bulk(0x81, in[0].data(), 64); }),
            "usb 2-1 (174c:2464): submit of bulk IN URB of 64 bytes on endpoint 0x81: the device "
            "is disconnected: No such device (errno 19)");
  auto start = std::chrono::steady_clock::now();
  dev = nullptr;  // closes without waiting
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(500));
  // The device leaves sysfs after its URBs were flushed (usb_disconnect: usb_disable_device,
  // then device_del), so a waiter can hear of the disconnect first: it is gone soon after.
  auto listed = [&] {
    for (auto& d : list_usb_devices(*k))
      if (d.port == "2-1") return true;
    return false;
  };
  for (auto until = std::chrono::steady_clock::now() + milliseconds(2000);
       listed() && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_FALSE(listed());
  UsbDeviceInfo gone;
  gone.port = "2-1", gone.bus = 2, gone.devnum = 3, gone.vendor = 0x174c, gone.product = 0x2464;
  EXPECT_EQ(what([&] { UsbDevice again(k, gone); }),
            "usb 2-1 (174c:2464): open /dev/bus/usb/002/003: the device is disconnected: No such "
            "file or directory (errno 2)");
}

TEST_F(EmulatedUsbTest, ThreadsPipelineOnTheirOwnEndpointsAtOnce) {
  UsbDevice dev(k, info());
  dev.claim_interface(0);
  dev.set_alt_setting(0, 1);  // the UAS alternate setting: four bulk endpoints
  EXPECT_EQ(info().interfaces[0].alt_setting, 1);
  EXPECT_EQ(info().interfaces[0].endpoints, 4);
  constexpr int kRounds = 100, kDepth = 8;
  std::atomic<int> failures{0};
  auto reader = [&](uint8_t ep) {
    std::vector<std::vector<uint8_t>> bufs(kDepth, std::vector<uint8_t>(256));
    std::deque<std::pair<UsbDevice::UrbId, int>> q;
    for (int i = 0; i < kRounds; i++) {
      q.emplace_back(dev.submit_bulk(ep, bufs[i % kDepth].data(), 256), i);
      if (q.size() == kDepth || i == kRounds - 1)
        while (!q.empty()) {
          auto [id, n] = q.front();
          q.pop_front();
          uint32_t got = ~0u;
          if (dev.wait(id, 2000) == 256) std::memcpy(&got, bufs[n % kDepth].data(), 4);
          if (got != uint32_t(n)) failures++;
        }
    }
  };
  auto writer = [&](uint8_t ep) {
    std::vector<std::vector<uint8_t>> bufs(kRounds);
    std::deque<UsbDevice::UrbId> q;
    for (int i = 0; i < kRounds; i++) {
      bufs[i].assign(100, uint8_t(i + ep));
      q.push_back(dev.submit_bulk(ep, bufs[i].data(), 100));
      if (q.size() == kDepth || i == kRounds - 1)
        while (!q.empty()) {
          if (dev.wait(q.front(), 2000) != 100) failures++;
          q.pop_front();
        }
    }
    if (fn->out(ep) != bufs) failures++;
  };
  std::thread a(reader, 0x81), b(reader, 0x83), c(writer, 0x02), d(writer, 0x04);
  a.join(), b.join(), c.join(), d.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(EmulatedUsbTest, StreamsTagTheUrbs) {
  UsbDevice dev(k, info());
  dev.claim_interface(0);
  std::vector<uint8_t> buf(64);
  dev.set_alt_setting(0, 1);
  EXPECT_EQ(what([&] { dev.submit_bulk(0x81, buf.data(), 64, 3); }),
            "usb 2-1 (174c:2464): submit of bulk IN URB of 64 bytes on endpoint 0x81 stream 3: "
            "Invalid argument (errno 22)");  // no streams allocated yet
  EXPECT_EQ(dev.alloc_streams(64, {0x81, 0x02, 0x83}), 32u);  // the endpoints' most
  EXPECT_EQ(dev.wait(dev.submit_bulk(0x81, buf.data(), 64, 3), kAnswered), 64u);
  EXPECT_EQ(dev.wait(dev.submit_bulk(0x02, buf.data(), 64, 32), kAnswered), 64u);
  EXPECT_EQ(fn->streams_seen, (std::vector<unsigned>{3, 32}));
}

TEST_F(EmulatedUsbTest, ResetClaimsTheInterfaceAgainFromTheKernelDriver) {
  {
    UsbDevice dev(k, info());
    dev.claim_interface(0);
    dev.set_alt_setting(0, 1);
    dev.reset();
    EXPECT_EQ(usb.resets("2-1"), 1);
    EXPECT_EQ(usb.driver("2-1", 0), "usbfs");  // usb-storage bound again, then detached
    EXPECT_EQ(info().interfaces[0].alt_setting, 0);
    std::vector<uint8_t> in(8);
    EXPECT_EQ(dev.bulk_in(0x81, in.data(), 8, kAnswered), 8u);
  }
  EXPECT_EQ(usb.driver("2-1", 0), "usb-storage");
}

}  // namespace
}  // namespace hcq::os
