#!/bin/bash
# rdma/'s verbs transport against a real kernel with Soft-RoCE (rdma_rxe): boots Debian's
# kernel in QEMU guests (TCG, no KVM needed) and runs tests/qemu/rdma_verbs_test there as the
# init's test. Exits with the test's status; 124 when a guest did not finish in time, 125 when
# it stopped without reporting a status.
#
#   scripts/qemu_rdma_test.sh [BUILD_DIR]          one guest, rxe on lo: 64 MiB both ways,
#                                                  registration paths, exact errors, a peer
#                                                  killed mid-transfer
#   scripts/qemu_rdma_test.sh --two [BUILD_DIR]    two guests as two machines joined by a QEMU
#                                                  socket network on 127.0.0.1, rxe on
#                                                  virtio-net: 64 MiB both ways between them
#
# As root (installs QEMU and busybox from Debian). The kernel package is downloaded once and
# kept in BUILD_DIR/qemu-rdma with the modules rxe needs.
set -euo pipefail
cd "$(dirname "$0")/.."
two=0
if [ "${1:-}" = --two ]; then two=1; shift; fi
build=${1:-build}
work=$build/qemu-rdma
timeout_s=${HCQ_QEMU_TIMEOUT:-300}
start=$(date +%s)
. scripts/qemu_common.sh
qemu_need qemu-system-x86 busybox-static ibverbs-providers rdma-core iproute2

ninja -C "$build" tests/qemu/rdma_verbs_test >/dev/null
# rdma_rxe needs the crypto "crc32" hash: without crc32_generic `rdma link add` fails with
# ENOENT. virtio-net for the two-guest link.
qemu_kernel "$work" "crypto/crc32_generic drivers/infiniband/core/ib_core
  drivers/infiniband/core/ib_uverbs net/ipv4/udp_tunnel net/ipv6/ip6_udp_tunnel
  drivers/infiniband/sw/rxe/rdma_rxe drivers/virtio/virtio_ring drivers/virtio/virtio
  drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci
  net/core/failover drivers/net/net_failover drivers/net/virtio_net"
qemu_root "$work" ip sed sleep
qemu_add "$build/tests/qemu/rdma_verbs_test" /bin/rdma_verbs_test
qemu_add /usr/bin/rdma /bin/rdma
# libibverbs finds its rxe provider through /etc/libibverbs.d.
mkdir -p "$QEMU_ROOT/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$QEMU_ROOT/etc/libibverbs.d/"
for p in /usr/lib/x86_64-linux-gnu/libibverbs/librxe-*.so; do qemu_add "$p" "$p"; done
qemu_initrd "$work" '
ip link set lo up
role=$(sed -n "s/.*role=\([a-z]*\).*/\1/p" /proc/cmdline)
if [ -z "$role" ]; then
  rdma link add rxe0 type rxe netdev lo && /bin/rdma_verbs_test
else
  ip link set eth0 up
  ip addr add $(sed -n "s/.*myip=\([0-9.]*\).*/\1/p" /proc/cmdline)/24 dev eth0
  rdma link add rxe0 type rxe netdev eth0 && /bin/rdma_verbs_test
fi'

qemu=(qemu-system-x86_64 -accel tcg -cpu max -m 2048 -smp 2 -nographic -no-reboot
      -kernel "$QEMU_KDIR/vmlinuz" -initrd "$work/initrd.gz")
args="console=ttyS0 quiet panic=-1"
log=$work/guest.log
echo "== booting $QEMU_KPKG in QEMU (timeout ${timeout_s} s)"
set +e
if [ $two = 0 ]; then
  timeout "$timeout_s" "${qemu[@]}" -nic none -append "$args" < /dev/null 2>&1 | sed -u 's/\r$//' | tee "$log"
  qemu_rc=${PIPESTATUS[0]}
else
  # The server guest listens on the socket network; the client's test retries its TCP
  # connection until the server's test is up.
  port=${HCQ_QEMU_NET_PORT:-15555}
  timeout "$timeout_s" "${qemu[@]}" -netdev socket,id=n,listen=127.0.0.1:$port \
    -device virtio-net-pci,netdev=n,mac=52:54:00:00:00:01 \
    -append "$args role=server myip=192.0.2.1" < /dev/null 2>&1 | sed -u 's/\r$//' > "$work/server.log" &
  server=$!
  sleep 2
  timeout "$timeout_s" "${qemu[@]}" -netdev socket,id=n,connect=127.0.0.1:$port \
    -device virtio-net-pci,netdev=n,mac=52:54:00:00:00:02 \
    -append "$args role=client myip=192.0.2.2" < /dev/null 2>&1 | sed -u 's/\r$//' | tee "$log"
  qemu_rc=${PIPESTATUS[0]}
  wait $server
  echo "== the server guest"; grep -E "PASS|FAIL|HCQ_QEMU_STATUS|  " "$work/server.log" || true
  server_status=$(sed -n 's/^HCQ_QEMU_STATUS=\([0-9]*\)$/\1/p' "$work/server.log" | tail -1)
  if [ "${server_status:-x}" != 0 ]; then
    echo "qemu_rdma_test: FAIL: the server guest's status is '${server_status:-none}' (log: $work/server.log)"
    exit 1
  fi
fi
set -e
qemu_result qemu_rdma_test "$log" "$qemu_rc" "$timeout_s" "$start"
