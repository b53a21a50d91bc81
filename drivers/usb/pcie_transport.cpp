#include "usb/pcie_transport.hpp"

#include <cstdio>
#include <cstring>

namespace hcq::usb {

std::string to_string(const Bdf& f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02x:%02x.%x", f.bus, f.device, f.function);
  return buf;
}

const char* to_string(CompletionStatus s) {
  switch (s) {
    case CompletionStatus::SC: return "successful completion (SC)";
    case CompletionStatus::UR: return "unsupported request (UR)";
    case CompletionStatus::CRS: return "configuration request retry status (CRS)";
    case CompletionStatus::CA: return "completer abort (CA)";
  }
  return "?";
}

const char* to_string(RequestKind k) {
  switch (k) {
    case RequestKind::ConfigRead: return "config read";
    case RequestKind::ConfigWrite: return "config write";
    case RequestKind::MemoryRead: return "memory read";
    case RequestKind::MemoryWrite: return "memory write";
  }
  return "?";
}

namespace {

std::string config_request(RequestKind kind, Bdf f, uint32_t offset) {
  return std::string(to_string(kind)) + " " + to_string(f) + " +" + hex(offset);
}

std::string memory_request(RequestKind kind, uint64_t address, uint64_t bytes) {
  return std::string(to_string(kind)) + " " + hex(address) + " (" + std::to_string(bytes) +
         " bytes)";
}

std::string outcome(CompletionStatus status, const std::string& detail) {
  return std::string(": ") + to_string(status) + (detail.empty() ? "" : ": " + detail);
}

}  // namespace

PcieError::PcieError(RequestKind kind, Bdf function, uint32_t offset, CompletionStatus status,
                     std::string detail)
    : Error(config_request(kind, function, offset) + outcome(status, detail)),
      kind_(kind), function_(function), offset_(offset), status_(status),
      detail_(std::move(detail)) {}

PcieError::PcieError(RequestKind kind, uint64_t address, uint64_t bytes, CompletionStatus status,
                     std::string detail)
    : Error(memory_request(kind, address, bytes) + outcome(status, detail)),
      kind_(kind), address_(address), status_(status), detail_(std::move(detail)) {}

namespace {

// The byte enables of `size` bytes at `offset` inside their dword; InvalidInput when they do
// not fit one dword as a configuration request needs.
uint8_t config_byte_enables(RequestKind kind, Bdf f, uint32_t offset, unsigned size) {
  if (size != 1 && size != 2 && size != 4)
    throw InvalidInput(config_request(kind, f, offset) + ": " + std::to_string(size) +
                       " bytes (1, 2 or 4)");
  if (offset % size)
    throw InvalidInput(config_request(kind, f, offset) + ": " + std::to_string(size) +
                       " bytes must be " + std::to_string(size) + "-byte aligned");
  if (offset > 0xfff)
    throw InvalidInput(config_request(kind, f, offset) + ": beyond the 4 KiB configuration space");
  return uint8_t(((1u << size) - 1) << (offset % 4));
}

void check_memory(RequestKind kind, uint64_t address, uint64_t bytes) {
  if (address % 4 || bytes % 4)
    throw InvalidInput(memory_request(kind, address, bytes) + ": address and length must be "
                       "multiples of 4");
  if (address + bytes < address)
    throw InvalidInput(memory_request(kind, address, bytes) + ": beyond 64-bit addresses");
}

}  // namespace

uint32_t PcieTransport::config_read(Bdf f, uint32_t offset, unsigned size) {
  const uint8_t be = config_byte_enables(RequestKind::ConfigRead, f, offset, size);
  uint32_t dword = 0;
  Completion c = do_config_read(f, offset & ~3u, be, dword);
  if (c.status != CompletionStatus::SC)
    throw PcieError(RequestKind::ConfigRead, f, offset, c.status, std::move(c.detail));
  const uint32_t value = dword >> 8 * (offset % 4);
  return size == 4 ? value : value & ((1u << 8 * size) - 1);
}

void PcieTransport::config_write(Bdf f, uint32_t offset, unsigned size, uint32_t value) {
  const uint8_t be = config_byte_enables(RequestKind::ConfigWrite, f, offset, size);
  if (size < 4 && value >> 8 * size)
    throw InvalidInput(config_request(RequestKind::ConfigWrite, f, offset) + ": " + hex(value) +
                       " does not fit in " + std::to_string(size) + " bytes");
  Completion c = do_config_write(f, offset & ~3u, be, value << 8 * (offset % 4));
  if (c.status != CompletionStatus::SC)
    throw PcieError(RequestKind::ConfigWrite, f, offset, c.status, std::move(c.detail));
}

uint32_t PcieTransport::memory_read32(uint64_t address) {
  uint32_t value = 0;
  memory_read(address, std::as_writable_bytes(std::span(&value, 1)));
  return value;
}

void PcieTransport::memory_write32(uint64_t address, uint32_t value) {
  memory_write(address, std::as_bytes(std::span(&value, 1)));
}

void PcieTransport::memory_read(uint64_t address, std::span<std::byte> out) {
  check_memory(RequestKind::MemoryRead, address, out.size());
  if (out.empty()) return;
  Completion c = do_memory_read(address, out);
  if (c.status != CompletionStatus::SC)
    throw PcieError(RequestKind::MemoryRead, address, out.size(), c.status, std::move(c.detail));
}

void PcieTransport::memory_write(uint64_t address, std::span<const std::byte> data) {
  check_memory(RequestKind::MemoryWrite, address, data.size());
  if (data.empty()) return;
  Completion c = do_memory_write(address, data);
  if (c.status != CompletionStatus::SC)
    throw PcieError(RequestKind::MemoryWrite, address, data.size(), c.status,
                    std::move(c.detail));
}

}  // namespace hcq::usb
