// Loading a file (or a range of it) straight into device memory: io_uring reads into host
// staging slots, each followed by a copy-queue copy into the buffer as soon as it lands, so
// reading and copying overlap; several reads are in flight. O_DIRECT where the file system
// supports it (any offset and size: reads are widened to aligned windows), buffered reads
// where not. A UMA device (or a host-visible buffer) is read into directly. A device that
// cannot reach host memory stages in its own CPU-visible memory instead (buffered reads, then
// device-to-device copies).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/device.hpp"

namespace hcq::io {

struct LoadOptions {
  // One read and one copy per slot (a multiple of 4096), and the staging slots (reads in
  // flight take at most half). 0, the default, lets the device choose: 16 MiB x 8 where the
  // staging is host memory (fewer, larger copies: 4 MiB x 4 reached 0.78x of a warm read() on
  // the 2-vCPU machine, 16 MiB x 8 0.93-0.97x; docs/performance.md), 4 MiB x 4 in a device's
  // own CPU-visible memory (scarce: a small BAR). Slots never exceed the load.
  uint64_t slot_bytes = 0;
  uint32_t slots = 0;
  bool direct = true;             // try O_DIRECT first
};

// What a load did, for tests and tools.
struct LoadResult {
  uint64_t done = 0;     // the point on dev's timeline the last copy signalled (reached)
  bool direct = false;   // O_DIRECT was used
  bool staged = false;   // through staging slots and copies (else read into the buffer)
  uint64_t slot_bytes = 0;  // the slots used (staged loads)
  uint32_t slots = 0;
};

// Copies bytes [file_offset, file_offset + size) of `path` into `dst` at `dst_offset`.
// Returns once the data is in the buffer (the staging slots go with the call). Errors, each
// after the
// work already submitted finished so the buffer and queues stay usable: InvalidInput for a
// range past the end of the buffer or the file (naming both), OsError for a file that cannot
// be opened or read (naming the path), Error for a short read (the file shrank).
LoadResult load_file(Device& dev, const Buffer& dst, uint64_t dst_offset, const std::string& path,
                     uint64_t file_offset, uint64_t size, const LoadOptions& options = {});

// Reads bytes [offset, offset + size) of `path` into host memory at `to`, `chunk` bytes per
// read with up to `depth` reads in flight (io_uring; pread where it is unavailable). Every
// error starts with `who`: OsError for a file that cannot be opened or read (the read's file
// offset named), Error for a file that ends before offset + size (where it ends named).
// A FIFO, pipe or character device is read in order (its first `offset` bytes dropped), and
// a reader waiting for its writer stops with an Error soon after `*cancel` becomes true.
void read_range(const std::string& path, uint64_t offset, void* to, uint64_t size,
                const std::string& who, uint64_t chunk = 4 << 20, uint32_t depth = 4,
                const std::atomic<bool>* cancel = nullptr);

}  // namespace hcq::io
