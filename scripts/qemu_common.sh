# What the QEMU guest tests share (sourced by scripts/qemu_vfio_test.sh and
# scripts/qemu_rdma_test.sh): Debian packages, Debian's kernel unpacked with the modules a test
# needs, a busybox initramfs with the test and the shared libraries it loads, and the guest's
# exit status read from its console. Guests run under TCG: no KVM needed.

# qemu_need PKG...: installs the Debian packages that are missing (as root).
qemu_need() {
  local need=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "== installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

# qemu_kernel WORK "MODULES": Debian's kernel (the package linux-image-amd64 depends on),
# downloaded once, not installed, and kept beside WORK in qemu-deb/ (the VFIO and RDMA tests
# of one build directory share one download); its vmlinuz and MODULES (paths under
# lib/modules/<version>/kernel, without .ko, in load order) kept in WORK/kernel-<version>.
# Sets QEMU_KPKG, QEMU_KDIR and QEMU_MODULE_ORDER (the modules' names in load order).
qemu_kernel() {
  local work=$1 mods=$2 kver m
  mkdir -p "$work"
  QEMU_KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$QEMU_KPKG" ] || { echo "qemu: apt-cache knows no linux-image-amd64 dependency (apt-get update?)"; exit 1; }
  kver=${QEMU_KPKG#linux-image-}
  QEMU_KDIR=$work/kernel-$kver
  if [ ! -f "$QEMU_KDIR/vmlinuz" ]; then
    local debs
    debs=$(dirname "$work")/qemu-deb
    mkdir -p "$debs"
    if ! ls "$debs/$QEMU_KPKG"_*.deb >/dev/null 2>&1; then
      echo "== downloading $QEMU_KPKG"
      # (apt warns that it downloads as root, not as _apt: harmless here)
      (cd "$debs" && apt-get download "$QEMU_KPKG" >/dev/null) ||
        { echo "qemu: cannot download $QEMU_KPKG"; exit 1; }
    fi
    rm -rf "$work/unpack" && mkdir -p "$work/unpack"
    dpkg-deb -x "$debs/$QEMU_KPKG"_*.deb "$work/unpack/x"
    mkdir -p "$QEMU_KDIR.tmp/modules"
    cp "$work/unpack/x/boot/vmlinuz-$kver" "$QEMU_KDIR.tmp/vmlinuz"
    for m in $mods; do cp "$work/unpack/x/lib/modules/$kver/kernel/$m.ko" "$QEMU_KDIR.tmp/modules/"; done
    rm -rf "$work/unpack" "$QEMU_KDIR" && mv "$QEMU_KDIR.tmp" "$QEMU_KDIR"
  fi
  QEMU_MODULE_ORDER=""
  for m in $mods; do QEMU_MODULE_ORDER="$QEMU_MODULE_ORDER $(basename "$m")"; done
}

# qemu_root WORK APPLET...: a fresh initramfs tree in WORK/root (QEMU_ROOT) with busybox,
# the applets named, and the kernel's modules from qemu_kernel.
qemu_root() {
  local work=$1 a
  shift
  QEMU_ROOT=$work/root
  rm -rf "$QEMU_ROOT" && mkdir -p "$QEMU_ROOT"/{bin,proc,sys,dev,tmp,lib/modules}
  cp /bin/busybox "$QEMU_ROOT/bin/"
  for a in sh mount insmod cat echo poweroff "$@"; do ln -sf busybox "$QEMU_ROOT/bin/$a"; done
  cp "$QEMU_KDIR"/modules/*.ko "$QEMU_ROOT/lib/modules/"
}

# qemu_add FILE [DEST]: FILE into the tree (at DEST, default /bin/<name>) with every shared
# library it loads, at the paths the loader looks for them; the build's own libraries (found
# through a run path relative to the build tree) go to /lib, where the loader looks by default.
# The build's files lose their debug information: a smaller initramfs boots faster under TCG.
qemu_add() {
  local file=$1 dest=${2:-/bin/$(basename "$1")} lib
  mkdir -p "$QEMU_ROOT$(dirname "$dest")"
  case $file in
    /lib/* | /lib64/* | /usr/*) cp -L "$file" "$QEMU_ROOT$dest" ;;
    *) strip --strip-debug -o "$QEMU_ROOT$dest" "$file" ;;
  esac
  ldd "$file" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | while read -r lib; do
    case $lib in
      /lib/* | /lib64/* | /usr/lib/*) mkdir -p "$QEMU_ROOT$(dirname "$lib")" && cp -L "$lib" "$QEMU_ROOT$lib" ;;
      *) mkdir -p "$QEMU_ROOT/lib" && strip --strip-debug -o "$QEMU_ROOT/lib/$(basename "$lib")" "$lib" ;;
    esac
  done
}

# qemu_initrd WORK BODY: the init script (mounts, the modules loaded in order, then BODY, then
# the status line and poweroff) and WORK/initrd.gz packed from the tree. BODY's last command's
# status is the guest's status.
qemu_initrd() {
  local work=$1 body=$2
  cat > "$QEMU_ROOT/init" <<INIT
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/shm; mount -t tmpfs shm /dev/shm
for m in$QEMU_MODULE_ORDER; do insmod /lib/modules/\$m.ko || echo "insmod \$m failed"; done
$body
echo "HCQ_QEMU_STATUS=\$?"
poweroff -f
INIT
  chmod +x "$QEMU_ROOT/init"
  (cd "$QEMU_ROOT" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initrd.gz"
}

# qemu_result NAME LOG QEMU_RC TIMEOUT START: exits with the status the guest's test printed;
# 124 when the guest did not finish in time, 125 when it stopped without a status.
qemu_result() {
  local name=$1 log=$2 rc=$3 timeout_s=$4 start=$5 status
  status=$(sed -n 's/^HCQ_QEMU_STATUS=\([0-9]*\)$/\1/p' "$log" | tail -1)
  if [ "$rc" = 124 ]; then
    echo "$name: FAIL: the guest did not finish within ${timeout_s} s (log: $log)"
    exit 124
  fi
  if [ -z "$status" ]; then
    echo "$name: FAIL: the guest stopped (QEMU exit $rc) without the test's status: it did not boot or the test did not run (log: $log)"
    exit 125
  fi
  echo "$name: the test exited with $status; $(($(date +%s) - start)) s in all"
  exit "$status"
}
