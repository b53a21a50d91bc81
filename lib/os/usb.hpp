// USB devices through usbfs (Linux include/uapi/linux/usbdevice_fs.h, drivers/usb/core/devio.c,
// Documentation/driver-api/usb/usb.rst "The USB character device nodes"), all through
// os::Kernel, so the emulated kernel (os/emulated_usb.hpp) runs this same code.
//
// list_usb_devices reads /sys/bus/usb/devices (drivers/usb/core/sysfs.c attributes; the
// driver bound to an interface from its uevent's DRIVER= line, drivers/base/core.c
// dev_uevent). UsbDevice opens /dev/bus/usb/BBB/DDD and makes control, bulk and
// asynchronous (URB) transfers; every wait has a timeout.
//
// Errors name the device and the request:
//   OsError ENODEV/ESHUTDOWN "usb 2-1 (174c:2464): bulk IN on endpoint 0x81: the device is
//       disconnected: No such device (errno 19)"
//   OsError EPIPE   "...: endpoint 0x81 stalled (clear_halt(0x81) clears it): Broken pipe ..."
//   TimeoutError    "...: timed out after 100 ms"
//   Error (short)   "...: short transfer: asked 4096 bytes, got 100"
//   OsError EBUSY   "...: claim of interface 0: held by usbfs (another program has the device
//       open): Device or resource busy (errno 16)"
//   OsError EACCES  "...: open /dev/bus/usb/002/003: permission denied (run as root, or give
//       the node to your user with a udev rule: SUBSYSTEM=="usb", ATTR{idVendor}=="174c",
//       ATTR{idProduct}=="2464", MODE="0666"): Permission denied (errno 13)"
#pragma once

#include <linux/usbdevice_fs.h>
#include <sys/ioctl.h>  // _IOR and friends, which usbdevice_fs.h uses without including

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "os/kernel.hpp"

namespace hcq::os {

struct UsbInterface {
  uint8_t number = 0, alt_setting = 0, cls = 0, subclass = 0, protocol = 0, endpoints = 0;
  std::string driver;  // the kernel driver bound to it ("uas", "usb-storage", "usbfs"); empty: none
};

struct UsbDeviceInfo {
  std::string port;  // the sysfs name: "2-1", "3-1.4" (a root hub is "usb2")
  int bus = 0, devnum = 0;
  uint16_t vendor = 0, product = 0;
  std::string manufacturer, product_name, serial;  // empty when the device has none
  std::string speed;       // Mb/s as sysfs writes it: "1.5", "12", "480", "5000", "10000", "20000"
  int configuration = 0;   // bConfigurationValue; 0 unconfigured
  std::vector<UsbInterface> interfaces;  // of the active configuration, by number

  std::string node() const;  // /dev/bus/usb/002/003
  std::string name() const;  // "usb 2-1 (174c:2464)": how errors name the device
};

// Every USB device (root hubs too), sorted by bus and device number. Empty without a USB bus.
std::vector<UsbDeviceInfo> list_usb_devices(Kernel& k);

// Whether a transfer must move the whole length (short transfer: Error) or may move less.
enum class UsbLength { Exact, AtMost };

struct UsbSetup {  // a control request's setup packet (USB 2.0 9.3)
  uint8_t request_type = 0, request = 0;
  uint16_t value = 0, index = 0;
};

// An open usbfs device.
//
// Threads: control, bulk_in, bulk_out, submit_bulk, wait and discard may be called from
// several threads at once (each thread on its own endpoints: per endpoint, URBs complete in
// the order they were submitted, and a wait returns its own URB). claim_interface,
// release_interface, set_alt_setting, alloc_streams, clear_halt, reset and the destructor
// are called from one thread while no other call is in progress.
class UsbDevice {
 public:
  // Opens the node read-write. Throws OsError (EACCES with the fix, ENOENT: unplugged).
  UsbDevice(std::shared_ptr<Kernel> k, const UsbDeviceInfo& info);
  // Discards URBs still in flight (waiting at most 1 s for them), releases the interfaces it
  // claimed, gives each kernel driver it detached its interface back, and closes the node.
  // Never throws; after a disconnect it only closes.
  ~UsbDevice();
  UsbDevice(const UsbDevice&) = delete;
  UsbDevice& operator=(const UsbDevice&) = delete;

  const std::string& name() const { return name_; }

  // Takes the interface: a kernel driver bound to it (usb-storage, uas) is detached first
  // (USBDEVFS_IOCTL USBDEVFS_DISCONNECT; given back on release); one held by usbfs
  // belongs to another program and is refused (EBUSY). Claiming one already claimed is a no-op.
  void claim_interface(uint8_t ifnum);
  void release_interface(uint8_t ifnum);
  void set_alt_setting(uint8_t ifnum, uint8_t alt);
  // USBDEVFS_ALLOC_STREAMS: `streams` bulk streams on each endpoint (USB 3 UAS-style
  // endpoints; the ASM2464 firmware tags its transfers with stream ids, tinygrad
  // runtime/support/usb.py). Returns the number the host controller granted.
  unsigned alloc_streams(unsigned streams, const std::vector<uint8_t>& endpoints);

  // A control transfer on endpoint 0; the direction is request_type's bit 7. Returns the
  // bytes moved. `length` at most 4096 (usbfs refuses more: devio.c do_proc_control).
  size_t control(const UsbSetup& setup, void* data, uint16_t length, int timeout_ms,
                 UsbLength need = UsbLength::Exact);
  // Synchronous bulk (or interrupt) transfers. Returns the bytes moved.
  size_t bulk_out(uint8_t ep, const void* data, size_t length, int timeout_ms);
  size_t bulk_in(uint8_t ep, void* data, size_t length, int timeout_ms,
                 UsbLength need = UsbLength::Exact);

  // Asynchronous bulk transfers for pipelining. `buffer` stays the caller's and must live
  // until the URB is waited for (or the device is destroyed); an IN URB's bytes land in it
  // when it is reaped. stream_id 0: no stream.
  using UrbId = uint64_t;
  UrbId submit_bulk(uint8_t ep, void* buffer, size_t length, unsigned stream_id = 0);
  // Waits at most timeout_ms for the URB and returns its bytes moved; errors as above. On
  // timeout the URB is discarded first, so the buffer is the caller's again either way.
  size_t wait(UrbId id, int timeout_ms, UsbLength need = UsbLength::Exact);
  // Cancels an URB in flight (USBDEVFS_DISCARDURB) and waits at most timeout_ms until it is
  // reaped; false if it could not be cancelled in time.
  bool discard(UrbId id, int timeout_ms = 1000);
  size_t in_flight() const;

  // USBDEVFS_CLEAR_HALT: clears a stalled endpoint on the device and the host's data toggle.
  void clear_halt(uint8_t ep);
  // USBDEVFS_RESET, then claims again the interfaces it held: a reset unbinds usbfs and lets
  // kernel drivers bind again (libusb os/linux_usbfs.c op_reset_device does the same).
  void reset();

 private:
  struct Urb {
    // Apart, because usbdevfs_urb ends in a flexible array (iso_frame_desc).
    std::unique_ptr<usbdevfs_urb> urb = std::make_unique<usbdevfs_urb>();
    bool done = false;
  };
  struct Claim {
    std::string detached;  // the kernel driver to give the interface back to; empty: none
  };
  [[noreturn]] void fail(const std::string& what, int err, uint8_t ep, int timeout_ms) const;
  void check_length(const std::string& what, size_t asked, size_t got, UsbLength need) const;
  std::string driver_of(uint8_t ifnum);
  // Reaps whatever completed, waiting at most timeout_ms for the first. Called by one thread
  // at a time (the one that set reaping_), without mu_.
  void reap_some(int timeout_ms);
  // Waits until `u` is done or the deadline passes; false on timeout. Takes lk (on mu_).
  bool wait_done(std::unique_lock<std::mutex>& lk, Urb& u, int timeout_ms);

  std::shared_ptr<Kernel> k_;
  UsbDeviceInfo info_;
  std::string name_;
  int fd_ = -1;
  std::map<uint8_t, Claim> claims_;
  mutable std::mutex mu_;  // urbs_, reaping_
  std::condition_variable cv_;
  std::map<UrbId, std::unique_ptr<Urb>> urbs_;
  UrbId next_id_ = 1;
  bool reaping_ = false;
  std::atomic<bool> disconnected_{false};
};

}  // namespace hcq::os
