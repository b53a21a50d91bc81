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

export DEBIAN_FRONTEND=noninteractive
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

ninja -C "$build" tests/qemu/vfio_edu_test >/dev/null
test_bin=$build/tests/qemu/vfio_edu_test

# Debian's kernel: the package linux-image-amd64 depends on (linux-image-<version>-amd64).
mkdir -p "$work"
kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$kpkg" ] || { echo "qemu_vfio_test: apt-cache knows no linux-image-amd64 dependency (apt-get update?)"; exit 1; }
kver=${kpkg#linux-image-}
kdir=$work/kernel-$kver
# The VFIO modules in load order (Debian builds them as modules; the Intel IOMMU is built in).
mods="virt/lib/irqbypass drivers/vfio/vfio drivers/vfio/vfio_iommu_type1 drivers/vfio/vfio_virqfd
  drivers/vfio/pci/vfio-pci-core drivers/vfio/pci/vfio-pci"
if [ ! -f "$kdir/vmlinuz" ]; then
  echo "== downloading $kpkg"
  rm -rf "$work/unpack" && mkdir -p "$work/unpack"
  # (apt warns that it downloads as root, not as _apt: harmless here)
  (cd "$work/unpack" && apt-get download "$kpkg" >/dev/null) ||
    { echo "qemu_vfio_test: cannot download $kpkg"; exit 1; }
  dpkg-deb -x "$work"/unpack/"$kpkg"_*.deb "$work/unpack/x"
  mkdir -p "$kdir.tmp/modules"
  cp "$work/unpack/x/boot/vmlinuz-$kver" "$kdir.tmp/vmlinuz"
  for m in $mods; do cp "$work/unpack/x/lib/modules/$kver/kernel/$m.ko" "$kdir.tmp/modules/"; done
  rm -rf "$work/unpack" "$kdir" && mv "$kdir.tmp" "$kdir"
fi

# The initramfs: busybox, the test with the shared libraries it loads, the modules, an init.
root=$work/root
rm -rf "$root" && mkdir -p "$root"/{bin,proc,sys,dev,lib/modules}
cp /bin/busybox "$root/bin/"
for a in sh mount insmod cat echo poweroff; do ln -s busybox "$root/bin/$a"; done
cp "$test_bin" "$root/bin/vfio_edu_test"
ldd "$test_bin" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"
done
cp "$kdir"/modules/*.ko "$root/lib/modules/"
order=""
for m in $mods; do order="$order $(basename "$m")"; done
cat > "$root/init" <<INIT
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in$order; do insmod /lib/modules/\$m.ko || echo "insmod \$m failed"; done
/bin/vfio_edu_test
echo "HCQ_QEMU_STATUS=\$?"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initrd.gz"

echo "== booting $kpkg in QEMU (timeout ${timeout_s} s)"
log=$work/guest.log
set +e
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -M q35,kernel-irqchip=split -m 512 \
  -smp 1 -nographic -no-reboot -nic none -device intel-iommu,intremap=on -device edu \
  -kernel "$kdir/vmlinuz" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 quiet panic=-1 intel_iommu=on" < /dev/null 2>&1 | tr -d '\r' | tee "$log"
qemu_rc=${PIPESTATUS[0]}
set -e
elapsed=$(($(date +%s) - start))
status=$(sed -n 's/^HCQ_QEMU_STATUS=\([0-9]*\)$/\1/p' "$log" | tail -1)
if [ "$qemu_rc" = 124 ]; then
  echo "qemu_vfio_test: FAIL: the guest did not finish within ${timeout_s} s (log: $log)"
  exit 124
fi
if [ -z "$status" ]; then
  echo "qemu_vfio_test: FAIL: the guest stopped (QEMU exit $qemu_rc) without the test's status: it did not boot or the test did not run (log: $log)"
  exit 125
fi
echo "qemu_vfio_test: vfio_edu_test exited with $status; ${elapsed} s in all"
exit "$status"
