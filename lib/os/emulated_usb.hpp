// Emulated USB devices behind an emulated usbfs (Linux drivers/usb/core/devio.c,
// include/uapi/linux/usbdevice_fs.h): each plugged device gets its sysfs directory under
// /sys/bus/usb/devices (attributes as drivers/usb/core/sysfs.c writes them; interfaces with
// a uevent naming their driver) and its node /dev/bus/usb/BBB/DDD, whose ioctls behave as
// devio.c's: interface claims (a kernel driver holds an interface until it is disconnected;
// a second claim is EBUSY), control and bulk transfers with timeouts (ETIMEDOUT), URBs
// submitted, completed in order per endpoint by a host-controller thread per endpoint, and
// reaped (poll says POLLOUT when one is ready), discards (ENOENT), stalls (EPIPE until
// CLEAR_HALT), disconnects (URBs end with ESHUTDOWN, other ioctls answer ENODEV, reaping
// still works), resets (usbfs claims dropped, kernel drivers bound again).
//
// A device is a UsbFunction: the model of what the device does (later: the ASM2464 bridge
// firmware).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "os/emulated_kernel.hpp"
#include "os/usb.hpp"

namespace hcq::os {

// What a device answers to one transfer.
struct UsbReply {
  enum class Kind {
    Done,        // moved `length` bytes (less than asked: a short transfer)
    Stall,       // STALL: the endpoint halts until CLEAR_FEATURE(ENDPOINT_HALT)
    Nak,         // not ready: asked again later (a device that never answers times out)
    Disconnect,  // the device drops off the bus in the middle of this transfer
  };
  Kind kind = Kind::Done;
  size_t length = 0;
  std::chrono::milliseconds delay{0};  // the answer reaches the host this much later

  static UsbReply done(size_t n, std::chrono::milliseconds delay = {}) {
    return {Kind::Done, n, delay};
  }
  static UsbReply stall() { return {Kind::Stall, 0, {}}; }
  static UsbReply nak() { return {Kind::Nak, 0, {}}; }
  static UsbReply disconnect() { return {Kind::Disconnect, 0, {}}; }
};

struct UsbEndpointDesc {
  uint8_t address = 0;     // bit 7: IN
  uint8_t attributes = 2;  // transfer type: 2 bulk, 3 interrupt
  uint16_t max_packet = 1024;
  uint16_t max_streams = 0;  // bulk streams the endpoint supports (USB 3 SuperSpeed companion)
};
struct UsbAltSettingDesc {
  uint8_t alt = 0;
  std::vector<UsbEndpointDesc> endpoints;
};
struct UsbInterfaceDesc {
  uint8_t number = 0, cls = 0, subclass = 0, protocol = 0;
  std::vector<UsbAltSettingDesc> alts;  // alts[0] is alternate setting 0
  std::string driver;  // the kernel driver that binds it when plugged in ("usb-storage", "uas")
};
struct UsbDeviceDesc {
  uint16_t vendor = 0, product = 0;
  std::string manufacturer, product_name, serial;
  std::string speed = "5000";  // sysfs speed, Mb/s
  uint8_t configuration = 1;
  std::vector<UsbInterfaceDesc> interfaces;
};

// A device model. Each endpoint has its own host-controller thread, so calls for one
// endpoint come one at a time and in order; calls for different endpoints (and control
// requests) may come at once.
class UsbFunction {
 public:
  virtual ~UsbFunction() = default;
  virtual UsbDeviceDesc descriptor() const = 0;
  // A request on endpoint 0. IN: fill `data` (wLength bytes) and answer the length; OUT:
  // `data` is the data stage.
  virtual UsbReply control(const UsbSetup& setup, std::span<uint8_t> data) = 0;
  // Bulk transfers on `ep` (stream 0: none). OUT: the host's bytes; IN: fill `data`.
  virtual UsbReply bulk_out(uint8_t ep, unsigned stream, std::span<const uint8_t> data) = 0;
  virtual UsbReply bulk_in(uint8_t ep, unsigned stream, std::span<uint8_t> data) = 0;
  virtual void set_alt_setting(uint8_t /*ifnum*/, uint8_t /*alt*/) {}
  virtual void clear_halt(uint8_t /*ep*/) {}
  virtual void reset() {}
};

class EmulatedUsbDevice;

// The emulated USB host: plugs devices into an EmulatedKernel. Thread-safe.
class EmulatedUsb {
 public:
  explicit EmulatedUsb(std::shared_ptr<EmulatedKernel> kernel);
  ~EmulatedUsb();
  EmulatedUsb(const EmulatedUsb&) = delete;
  EmulatedUsb& operator=(const EmulatedUsb&) = delete;

  // Plugs `fn` in at `port` ("2-1": bus 2, root port 1) as device `devnum`; the bus's root
  // hub ("usb2", 1d6b:0003, device 1) appears with the first device on it.
  void plug(const std::string& port, int devnum, std::shared_ptr<UsbFunction> fn);
  // Pulls the device out: its URBs end with ESHUTDOWN, its node and sysfs entries go.
  void unplug(const std::string& port);
  // The driver bound to an interface now ("usbfs" while a program has claimed it).
  std::string driver(const std::string& port, uint8_t ifnum) const;
  // CLEAR_HALT requests and resets the device has seen.
  int clear_halts(const std::string& port) const;
  int resets(const std::string& port) const;

 private:
  std::shared_ptr<EmulatedUsbDevice> device(const std::string& port) const;
  std::shared_ptr<EmulatedKernel> kernel_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<EmulatedUsbDevice>> devices_;
};

}  // namespace hcq::os
