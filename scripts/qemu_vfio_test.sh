#!/bin/bash
# hcq's os::VfioDevice against a real Linux kernel: boots Debian's kernel in a QEMU guest
# (TCG, no KVM needed) on a q35 machine with an emulated Intel IOMMU and QEMU's edu PCI device,
# and runs tests/qemu/vfio_edu_test there as the init's test: find and bind the device through
# hcq's PCI layer, BAR map, DMA map, DMA verified, a DMA to an unmapped IOVA blocked with the
# DMAR fault in the guest's kernel log. Exits with the test's status; 124 when the guest did
# not finish in time, 125 when it stopped without reporting a status.
#
#   scripts/qemu_vfio_test.sh [BUILD_DIR]     (as root: installs QEMU and busybox from Debian)
#
# The kernel package is downloaded (not installed) once and its vmlinuz and VFIO modules kept in
# BUILD_DIR/qemu-vfio, so reruns only rebuild the initramfs and boot.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=$build/qemu-vfio
timeout_s=${HCQ_QEMU_TIMEOUT:-300}
start=$(date +%s)

. scripts/qemu_common.sh
qemu_need qemu-system-x86 busybox-static

ninja -C "$build" tests/qemu/vfio_edu_test >/dev/null
test_bin=$build/tests/qemu/vfio_edu_test

# The VFIO modules in load order (Debian builds them as modules; the Intel IOMMU is built in).
qemu_kernel "$work" "virt/lib/irqbypass drivers/vfio/vfio drivers/vfio/vfio_iommu_type1
  drivers/vfio/vfio_virqfd drivers/vfio/pci/vfio-pci-core drivers/vfio/pci/vfio-pci"
qemu_root "$work"
qemu_add "$test_bin" /bin/vfio_edu_test
qemu_initrd "$work" /bin/vfio_edu_test

echo "== booting $QEMU_KPKG in QEMU (timeout ${timeout_s} s)"
log=$work/guest.log
set +e
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -M q35,kernel-irqchip=split -m 512 \
  -smp 1 -nographic -no-reboot -nic none -device intel-iommu,intremap=on -device edu \
  -kernel "$QEMU_KDIR/vmlinuz" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 quiet panic=-1 intel_iommu=on" < /dev/null 2>&1 | sed -u 's/\r$//' | tee "$log"
qemu_rc=${PIPESTATUS[0]}
set -e
qemu_result qemu_vfio_test "$log" "$qemu_rc" "$timeout_s" "$start"
