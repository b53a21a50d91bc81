#include "os/pci_bar.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>

#include "core/error.hpp"

namespace hcq::os {

PciBarMap::PciBarMap(std::shared_ptr<Kernel> k, const PciFunction& fn, int bar,
                     bool write_combined)
    : MappedMmio("BAR" + std::to_string(bar) + " of " + fn.address), k_(std::move(k)) {
  const std::string& what = name();
  const PciBar* b = fn.bar(bar);
  if (!b) throw InvalidInput(fn.address + " has no BAR" + std::to_string(bar));
  if (b->io) throw InvalidInput(what + " is an I/O port range; only memory BARs map");
  if (write_combined && !b->prefetchable)
    throw InvalidInput(what + " is not prefetchable, so it has no write-combined map");
  std::string file = pci_sysfs_dir(fn.address) + "/resource" + std::to_string(bar) +
                     (write_combined ? "_wc" : "");
  int fd = k_->open(file, O_RDWR | O_SYNC);
  if (fd < 0)
    throw OsError(fn.address + ": open " + file + (fd == -EACCES ? " (mapping a BAR needs root)" : ""),
                  -fd);
  void* p = k_->mmap(nullptr, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  k_->close(fd);  // the mapping keeps the BAR
  if (p == MAP_FAILED) throw OsError(fn.address + ": mmap " + file, err);
  attach(p, b->size);
}

PciBarMap::~PciBarMap() { k_->munmap(base(), size()); }

}  // namespace hcq::os
