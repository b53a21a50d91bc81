#!/usr/bin/env python3
"""hcq ls --all, pci and reg as a user runs them: on the real bus (read from
/sys/bus/pci/devices directly and compared; no BAR of a non-GPU is ever mapped) and on the
emulated system (HCQ_EMULATED_PCI=1), with exact output and exact errors."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from cli_check import Cli  # noqa: E402

cli = Cli(sys.argv[1], "HCQ_EMULATED_PCI")
run, expect = cli.run, cli.expect


def pci_ids(path="/usr/share/misc/pci.ids"):
    """{(vendor, device): (vendor name, device name)} from the PCI ID database libpci reads (its
    default path on Debian), so the names expected are the installed file's whatever its
    version; None when it is not installed."""
    if not os.path.exists(path):
        return None
    names, vendor = {}, None
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.startswith("C "):  # the class list follows the vendors
            break
        if line[:1] not in ("", "#", "\n") and line[0] != "\t":
            vendor = (int(line[:4], 16), line[6:].rstrip("\n"))
            names[(vendor[0], None)] = (vendor[1], "")
        elif line.startswith("\t") and not line.startswith("\t\t") and vendor:
            names[(vendor[0], int(line[1:5], 16))] = (vendor[1], line[7:].rstrip("\n"))
    return names


IDS = pci_ids()


def device_name(vendor, device):
    return (IDS or {}).get((vendor, device), ("", ""))[1] or "-"


def pci_section(out):
    lines = out.splitlines()
    at = [i for i, l in enumerate(lines) if l.startswith("PCI FUNCTION")]
    return lines[at[0] + 1:] if at else []


# ---- the real bus ----
sysfs = "/sys/bus/pci/devices"
real = sorted(os.listdir(sysfs)) if os.path.isdir(sysfs) else []
rows = pci_section(run(["ls", "--all"], False))
expect("real hcq ls --all lists every function", [r.split()[0] for r in rows], real)
for addr, row in zip(real, rows):
    d = os.path.join(sysfs, addr)
    attr = lambda n: open(os.path.join(d, n)).read().strip()
    cls = int(attr("class"), 16)
    drv = os.path.basename(os.readlink(os.path.join(d, "driver"))) if os.path.islink(
        os.path.join(d, "driver")) else "-"
    cols = row.split(None, 4)
    vendor, device = int(attr("vendor"), 16), int(attr("device"), 16)
    expect(f"{addr} row", cols[1:4], [f"{vendor:04x}:{device:04x}", f"0x{cls:06x}", drv])
    expect(f"{addr} name (pci.ids)", cols[4].startswith(device_name(vendor, device) + "  "), True)
    if cls >> 16 != 3:
        expect(f"{addr} is not a GPU", cols[4].endswith("  not a GPU"), True)
        expect(f"hcq reg {addr} refuses before mapping", run(["reg", addr, "read", "0"], False, ok=False),
               f"hcq: {addr} is not a GPU (class 0x{cls:06x}); hcq reg maps GPU register BARs only\n")
if not any(int(open(os.path.join(sysfs, a, "class")).read(), 16) >> 16 == 3 for a in real):
    expect("real hcq ls without a GPU", (run(["ls"], False).splitlines() or [""])[-1],
           f"no GPU on the PCI bus ({len(real)} functions; hcq ls --all lists them)")

# ---- the emulated system ----
NV_PATH = "none: bound to nouveau; hcq opens NVIDIA GPUs through the open nvidia.ko (RM) or vfio-pci"
EMULATED = [("0000:00:00.0", 0x8086, 0x9a14, "0x060000", "-", "not a GPU"),
            ("0000:00:01.0", 0x8086, 0x9a09, "0x060400", "pcieport", "not a GPU"),
            ("0000:00:02.0", 0x8086, 0x9a49, "0x030000", "i915", "none: hcq has no driver for vendor 8086 GPUs"),
            ("0000:00:06.0", 0x8086, 0x9a09, "0x060400", "pcieport", "not a GPU"),
            ("0000:00:07.0", 0x8086, 0x9a23, "0x060400", "pcieport", "not a GPU"),
            ("0000:01:00.0", 0x1002, 0x744c, "0x030000", "amdgpu", "KFD (amdgpu, amd:N)"),
            ("0000:03:00.0", 0x1002, 0x744c, "0x030000", "vfio-pci", "VFIO: hcq boots it itself (am:0000:03:00.0)"),
            ("0000:20:00.0", 0x8086, 0x15ef, "0x060400", "pcieport", "not a GPU"),
            ("0000:21:01.0", 0x8086, 0x15ef, "0x060400", "pcieport", "not a GPU"),
            ("0000:22:00.0", 0x10de, 0x2330, "0x030200", "nouveau", NV_PATH)]
width = max(4, *(len(device_name(v, d)) for _, v, d, *_ in EMULATED))
expect("emulated hcq ls --all", "\n".join(pci_section(run(["ls", "--all"], True))) + "\n", "".join(
    f"{a:13} {v:04x}:{d:04x}  {c:8}  {drv:12} {device_name(v, d):{width}}  {path}\n"
    for a, v, d, c, drv, path in EMULATED) + ("" if IDS else
                                              "(no names: the PCI ID database, pci.ids, is not installed)\n"))
if IDS:  # Debian 12's pci.ids (2023.04) has these: the names come from the database
    expect("a name from pci.ids", device_name(0x1002, 0x744c).startswith("Navi 31 [Radeon RX 7900 XT"), True)
out = run(["ls"], True)
expect("emulated hcq ls keeps the openable devices", "emu:sm_90        NVIDIA H100 80GB HBM3 (emulated)  [emulated]" in out, True)
expect("emulated hcq ls lists GPUs only", [r.split()[0] for r in pci_section(out)],
       ["0000:00:02.0", "0000:01:00.0", "0000:03:00.0", "0000:22:00.0"])

j = json.loads(run(["ls", "--all", "--json"], True))
expect("emulated hcq ls --all --json", [(f["address"], f["vendor"], f["device"], f["class"], f["gpu"],
                                         f["driver"]) for f in j["pci"]][:6],
       [("0000:00:00.0", "0x8086", "0x9a14", "0x060000", False, None),
        ("0000:00:01.0", "0x8086", "0x9a09", "0x060400", False, "pcieport"),
        ("0000:00:02.0", "0x8086", "0x9a49", "0x030000", True, "i915"),
        ("0000:00:06.0", "0x8086", "0x9a09", "0x060400", False, "pcieport"),
        ("0000:00:07.0", "0x8086", "0x9a23", "0x060400", False, "pcieport"),
        ("0000:01:00.0", "0x1002", "0x744c", "0x030000", True, "amdgpu")])
expect("emulated hcq ls --json: GPUs only", [f["address"] for f in json.loads(run(["ls", "--json"], True))["pci"]],
       ["0000:00:02.0", "0000:01:00.0", "0000:03:00.0", "0000:22:00.0"])

NV_NAME = (f"{IDS[(0x10de, None)][0]} {device_name(0x10de, 0x2330)}" if IDS
           else "unknown (the PCI ID database, pci.ids, is not installed)")
expect("hcq pci of the eGPU", run(["pci", "22:00.0"], True), f"""\
function       0000:22:00.0
identity       10de:2330 NVIDIA, subsystem 10de:16c1, revision a1
name           {NV_NAME}
class          0x030200 (GPU)
driver         nouveau
hcq path       {NV_PATH}
IOMMU group    7
NUMA node      0
BAR0           0x0000c2000000, 16 MiB, 32-bit, non-prefetchable
BAR1           0x008200000000, 256 MiB, 64-bit, prefetchable
BAR3           0x008210000000, 32 MiB, 64-bit, prefetchable
resizable BAR  BAR1 at 256 MiB; supports 64 MiB to 128 GiB
PCIe           endpoint
link           2.5 GT/s x4; this end supports 32 GT/s x16, the upstream port 8 GT/s x4
warning        link degraded: trained at 2.5 GT/s x4, both ends support 8 GT/s x4
upstream       0000:21:01.0  8086:15ef  switch downstream port, Thunderbolt, 8 GT/s x4
               0000:20:00.0  8086:15ef  switch upstream port, Thunderbolt, 8 GT/s x4
               0000:00:07.0  8086:9a23  root port, Thunderbolt, 8 GT/s x4
""")
j = json.loads(run(["pci", "0000:01:00.0", "--json"], True))
expect("hcq pci --json", (j["driver"], j["hcq_path"], j["link"]["degraded"], j["resizable_bars"][0]["current"],
                          [b["index"] for b in j["bars"]], [u["address"] for u in j["upstream"]]),
       ("amdgpu", "KFD (amdgpu, amd:N)", False, 256 << 20, [0, 2, 4, 5], ["0000:00:01.0"]))
expect("hcq pci --json names", (j["vendor_name"], j["device_name"]),
       (IDS[(0x1002, None)][0], device_name(0x1002, 0x744c)) if IDS else (None, None))
expect("hcq pci --bind-vfio", [l for l in run(["pci", "22:00.0", "--bind-vfio"], True).splitlines()
                               if l.startswith(("driver", "hcq path"))],
       ["driver         vfio-pci", "hcq path       VFIO"])
expect("hcq pci --unbind", [l for l in run(["pci", "01:00.0", "--unbind"], True).splitlines()
                            if l.startswith(("driver", "hcq path"))],
       ["driver         none",
        "hcq path       none: no driver bound; hcq boots it itself once it is on vfio-pci "
        "(hcq pci 0000:01:00.0 --bind-vfio, then am:0000:01:00.0)"])
expect("hcq pci --bind-vfio of a GPU hcq boots", [l for l in run(["pci", "01:00.0", "--bind-vfio"], True).splitlines()
                                               if l.startswith(("driver", "hcq path"))],
       ["driver         vfio-pci", "hcq path       VFIO: hcq boots it itself (am:0000:01:00.0)"])
# --unbind and --bind-vfio take a GPU (class 0x03) or a processing accelerator (0x12) only,
# anything else (a host bridge, the Thunderbolt bridges the eGPU hangs from) with --force.
for addr, cls, action, opt in [("00:00.0", "0x060000", "unbind", "--unbind"),
                               ("20:00.0", "0x060400", "unbind", "--unbind"),
                               ("00:00.0", "0x060000", "bind to vfio-pci", "--bind-vfio"),
                               ("21:01.0", "0x060400", "bind to vfio-pci", "--bind-vfio")]:
    p = subprocess.run([cli.hcq, "pci", addr, opt], capture_output=True, text=True,
                       env=dict(os.environ, HCQ_EMULATED_PCI="1"))
    expect(f"hcq pci {addr} {opt} without --force", (p.returncode, p.stdout, p.stderr),
           (1, "", f"hcq: refusing to {action} 0000:{addr} (class {cls}, not a display controller "
                   "or processing accelerator) without --force\n"))
expect("hcq pci --unbind --force of a bridge",
       [l for l in run(["pci", "20:00.0", "--unbind", "--force"], True).splitlines() if l.startswith("driver")],
       ["driver         none"])
expect("hcq pci --bind-vfio --force of the host bridge",
       [l for l in run(["pci", "00:00.0", "--bind-vfio", "--force"], True).splitlines() if l.startswith("driver")],
       ["driver         vfio-pci"])
expect("hcq pci of no function", run(["pci", "99:00.0"], True, ok=False),
       "hcq: no PCI function 0000:99:00.0 (hcq ls --all lists them)\n")

expect("hcq reg boot0", run(["reg", "22:00.0", "read", "NV_PMC_BOOT_0"], True),
       "0000:22:00.0 BAR0+0x0 NV_PMC_BOOT_0 = 0x180000a1  chip 0x180 (GH100, Hopper), revision a1\n")
expect("hcq reg by offset", run(["reg", "22:00.0", "read", "0x140"], True),
       "0000:22:00.0 BAR0+0x140 NV_PMC_INTR_EN_0 = 0x0\n")
expect("hcq reg in another BAR", run(["reg", "22:00.0", "read", "0x100", "--bar", "1"], True),
       "0000:22:00.0 BAR1+0x100 = 0x0\n")
expect("hcq reg in a BAR the GPU lacks", run(["reg", "22:00.0", "read", "0", "--bar", "2"], True, ok=False),
       "hcq: 0000:22:00.0 has no BAR2\n")
# AMD registers come from drivers/amd/regs.def, fields included: every field of Linux's
# gc_11_0_0_sh_mask.h GRBM_STATUS__* / GRBM_STATUS2__*, in bit order. The emulated RX 7900 XTX's
# register BAR reads as a GPU in a compute dispatch: GRBM_STATUS 0xa0404000 (GUI_ACTIVE,
# CP_BUSY, SPI_BUSY, TA_BUSY), GRBM_STATUS2 0x24000000 (CPC_BUSY, RLC_BUSY), the rest 0.
STATUS_FIELDS = ["ME0PIPE0_CMDFIFO_AVAIL", "SDMA_RQ_PENDING", "ME0PIPE0_CF_RQ_PENDING",
                 "ME0PIPE0_PF_RQ_PENDING", "GDS_DMA_RQ_PENDING", "DB_CLEAN", "CB_CLEAN", "TA_BUSY",
                 "GDS_BUSY", "GE_BUSY_NO_DMA", "SX_BUSY", "GE_BUSY", "SPI_BUSY", "BCI_BUSY", "SC_BUSY",
                 "PA_BUSY", "DB_BUSY", "ANY_ACTIVE", "CP_COHERENCY_BUSY", "CP_BUSY", "CB_BUSY",
                 "GUI_ACTIVE"]
STATUS2_FIELDS = ["ME0PIPE1_CMDFIFO_AVAIL", "ME0PIPE1_CF_RQ_PENDING", "ME0PIPE1_PF_RQ_PENDING",
                  "ME1PIPE0_RQ_PENDING", "ME1PIPE1_RQ_PENDING", "ME1PIPE2_RQ_PENDING",
                  "ME1PIPE3_RQ_PENDING", "RLC_RQ_PENDING", "UTCL2_BUSY", "EA_BUSY", "RMI_BUSY",
                  "UTCL2_RQ_PENDING", "SDMA_SCH_RQ_PENDING", "EA_LINK_BUSY", "SDMA_BUSY",
                  "SDMA0_RQ_PENDING", "SDMA1_RQ_PENDING", "RLC_BUSY", "TCP_BUSY", "CPF_BUSY",
                  "CPC_BUSY", "CPG_BUSY"]
STATUS_VALUES = {f: int(f in ("TA_BUSY", "SPI_BUSY", "CP_BUSY", "GUI_ACTIVE")) for f in STATUS_FIELDS}
STATUS2_VALUES = {f: int(f in ("RLC_BUSY", "CPC_BUSY")) for f in STATUS2_FIELDS}
GRBM_STATUS = "0000:01:00.0 BAR5+0x8010 GRBM_STATUS = 0xa0404000\n" + "".join(
    f"  {f} = {v}\n" for f, v in STATUS_VALUES.items())
GRBM_STATUS2 = "0000:01:00.0 BAR5+0x8008 GRBM_STATUS2 = 0x24000000\n" + "".join(
    f"  {f} = {v}\n" for f, v in STATUS2_VALUES.items())
expect("hcq reg AMD, with fields", run(["reg", "01:00.0", "read", "GRBM_STATUS"], True), GRBM_STATUS)
expect("hcq reg names in any case", run(["reg", "01:00.0", "read", "grbm_Status"], True), GRBM_STATUS)
expect("hcq reg --count", run(["reg", "01:00.0", "read", "GRBM_STATUS2", "--count", "4"], True),
       GRBM_STATUS2 + "0000:01:00.0 BAR5+0x800c = 0x0\n" + GRBM_STATUS + "0000:01:00.0 BAR5+0x8014 = 0x0\n")
expect("hcq reg --count by offset", run(["reg", "01:00.0", "read", "0x800c", "--count", "2"], True),
       "0000:01:00.0 BAR5+0x800c = 0x0\n" + GRBM_STATUS)
lines = run(["reg", "01:00.0", "read", "0x8008", "--count", "3", "--json"], True).splitlines()
expect("hcq reg --json", [json.loads(l) for l in lines], [
    {"address": "0000:01:00.0", "bar": 5, "offset": "0x8008", "name": "GRBM_STATUS2", "value": "0x24000000",
     "fields": STATUS2_VALUES},
    {"address": "0000:01:00.0", "bar": 5, "offset": "0x800c", "name": None, "value": "0x0", "fields": {}},
    {"address": "0000:01:00.0", "bar": 5, "offset": "0x8010", "name": "GRBM_STATUS", "value": "0xa0404000",
     "fields": STATUS_VALUES}])
expect("hcq reg list PATTERN", run(["reg", "01:00.0", "list", "grbm"], True), f"""\
REGISTER      WHERE         FIELDS
GRBM_STATUS2  BAR5+0x8008   {" ".join(STATUS2_FIELDS)}
GRBM_STATUS   BAR5+0x8010   {" ".join(STATUS_FIELDS)}
""")
GFX11_REFUSAL = ("its BAR5 offset on gfx1100 is not established from a public source (gfx1100's GC "
                 "register base comes from the GPU's IP discovery table)")
expect("hcq reg list: registers refused on the generation", run(["reg", "01:00.0", "list", "PGM_R"], True), f"""\
REGISTER           WHERE         FIELDS
COMPUTE_PGM_RSRC1  -             refused by name: {GFX11_REFUSAL}
COMPUTE_PGM_RSRC2  -             refused by name: {GFX11_REFUSAL}
COMPUTE_PGM_RSRC3  -             refused by name: {GFX11_REFUSAL}
""")
out = run(["reg", "01:00.0", "list"], True).splitlines()
expect("hcq reg list: every register regs.def describes for gfx11, once",
       (len(out), out[1].split()[0], out[2].split()[0], len(set(l.split()[0] for l in out))), (36, "GRBM_STATUS2", "GRBM_STATUS", 36))
expect("hcq reg list of the NVIDIA GPU", run(["reg", "22:00.0", "list"], True), """\
REGISTER          WHERE         FIELDS
NV_PMC_BOOT_0     BAR0+0x0      -
NV_PMC_INTR_0     BAR0+0x100    -
NV_PMC_INTR_EN_0  BAR0+0x140    -
""")
expect("hcq reg list with no match", run(["reg", "01:00.0", "list", "SDMA"], True, ok=False, status=1),
       "hcq: no register of 0000:01:00.0 matches 'SDMA' (hcq reg 0000:01:00.0 list shows all 35)\n")
# A register regs.def describes whose BAR offset no public source gives for gfx11: refused by
# name, not poked at a guessed address.
expect("hcq reg of a register not established on the generation",
       run(["reg", "01:00.0", "read", "COMPUTE_PGM_LO"], True, ok=False, status=1),
       f"hcq: refusing COMPUTE_PGM_LO on 0000:01:00.0: {GFX11_REFUSAL}; hcq does not poke a guessed address\n")
expect("hcq reg write of a register not established on the generation",
       run(["reg", "01:00.0", "write", "compute_pgm_lo", "0", "--force"], True, ok=False, status=1),
       f"hcq: refusing COMPUTE_PGM_LO on 0000:01:00.0: {GFX11_REFUSAL}; hcq does not poke a guessed address\n")
expect("hcq reg unknown AMD name", run(["reg", "01:00.0", "read", "GRBM_STAT"], True, ok=False, status=2),
       "hcq: unknown register GRBM_STAT for 0000:01:00.0 (close: GRBM_STATUS2, GRBM_STATUS); "
       "'hcq reg 0000:01:00.0 list' lists the 35 known; the registers the GPU's IP discovery table "
       "places were not read: BAR5 of 0000:01:00.0: RCC_CONFIG_MEMSIZE reads 0x0, not a VRAM size "
       "in MiB: the GPU does not answer (in reset or powered down)\nRun 'hcq reg --help' for usage.\n")
# The RX 7900 XTX on vfio-pci answers RCC_CONFIG_MEMSIZE (24 GiB) and holds its IP discovery
# table 64 KiB below the end of VRAM, inside its resized BAR0: hcq reg places the AM registers
# (drivers/amd/am/*.def) from it. CP_HQD_ACTIVE is GC segment 0 (0x1260 in the real table)
# + 0x1fab (gc_11_0_0_offset.h) = dword 0x320b, byte 0xc82c.
expect("hcq reg of an AM register placed by IP discovery", run(["reg", "03:00.0", "read", "CP_HQD_ACTIVE"], True),
       "0000:03:00.0 BAR5+0xc82c CP_HQD_ACTIVE = 0x0\n  ACTIVE = 0\n  BUSY_GATE = 0\n")
expect("hcq reg of an AM register past the register BAR",
       run(["reg", "03:00.0", "read", "RCC_DEV0_EPF2_STRAP2"], True, ok=False, status=1),
       "hcq: refusing RCC_DEV0_EPF2_STRAP2 on 0000:03:00.0: at byte 0x10134408, past the register BAR "
       "(0x100000 bytes): reached through the SMN index/data pair; hcq does not poke a guessed address\n")
expect("hcq reg list of the AM registers", len(run(["reg", "03:00.0", "list"], True).splitlines()) > 500, True)
expect("hcq reg --count past the BAR", run(["reg", "01:00.0", "read", "0xffff0", "--count", "5"], True, ok=False, status=1),
       "hcq: --count 5 from 0xffff0 reads past the end of BAR5 of 0000:01:00.0 (0x100000 bytes: at most 4 dwords "
       "from there)\n")
expect("hcq reg --count to the end of the BAR",
       run(["reg", "01:00.0", "read", "0xffff8", "--count", "2"], True),
       "0000:01:00.0 BAR5+0xffff8 = 0x0\n0000:01:00.0 BAR5+0xffffc = 0x0\n")
expect("hcq reg write without --force", run(["reg", "22:00.0", "write", "NV_PMC_INTR_EN_0", "1"], True, ok=False),
       "hcq: refusing to write 0x1 to 0000:22:00.0 BAR0+0x140 NV_PMC_INTR_EN_0 without --force "
       "(an MMIO write can hang the GPU or the machine)\n")
expect("hcq reg write --force", run(["reg", "22:00.0", "write", "0x140", "0x5", "--force"], True),
       "0000:22:00.0 BAR0+0x140 NV_PMC_INTR_EN_0 <- 0x5 (reads back 0x5)\n")
expect("hcq reg outside the BAR", run(["reg", "22:00.0", "read", "0x1000000"], True, ok=False),
       "hcq: 0x1000000 is outside BAR0 of 0000:22:00.0 (0x1000000 bytes)\n")
expect("hcq reg unknown name", run(["reg", "22:00.0", "read", "GRBM_STATUS"], True, ok=False, status=2),
       "hcq: unknown register GRBM_STATUS for 0000:22:00.0; 'hcq reg 0000:22:00.0 list' lists the 3 known\n"
       "Run 'hcq reg --help' for usage.\n")
expect("hcq reg close name", run(["reg", "22:00.0", "read", "nv_pmc_boot0"], True, ok=False, status=2),
       "hcq: unknown register nv_pmc_boot0 for 0000:22:00.0 (close: NV_PMC_BOOT_0); "
       "'hcq reg 0000:22:00.0 list' lists the 3 known\nRun 'hcq reg --help' for usage.\n")
# Numbers: register offsets are hex with 0x (a single digit reads the same either way),
# values decimal or 0x hex up to 32 bits; nothing is truncated or read as octal. These are
# usage errors: status 2 and the usage hint.
for args, msg in [
        (["read", "140"], "register offset '140' needs 0x: register offsets are hex (0x140)"),
        (["read", "0140"], "register offset '0140' needs 0x: register offsets are hex (0x140)"),
        (["read", "0x"], "register offset: '0x' is not a number (decimal, or hex with 0x)"),
        (["read", "0x1x"], "register offset: '0x1x' is not a number (decimal, or hex with 0x)"),
        (["read", "0x10000000000000000"],
         "register offset: '0x10000000000000000' is out of range (at most 0xffffffffffffffff)"),
        (["write", "0x140", "0x100000001", "--force"],
         "VALUE: '0x100000001' is out of range (at most 0xffffffff)"),
        (["write", "0x140", "4294967296", "--force"],
         "VALUE: '4294967296' is out of range (at most 4294967295)"),
        (["write", "0x140", "-1", "--force"],
         "VALUE: '-1' is not a number (decimal, or hex with 0x)"),
        (["write", "0x140", "010", "--force"],
         "VALUE: '010' has a leading 0 (octal is not accepted: write 10 or 0x10)"),
        (["write", "0x140"], "reg: write needs a VALUE"),
        (["read", "0x140", "1"], "reg: read takes no VALUE"),
        (["read", "0", "--bar", "6"], "--bar: '6' is out of range (at most 5)"),
        (["read", "0", "--bar", "one"], "--bar: 'one' is not a number (decimal, or hex with 0x)"),
        (["read", "0", "--count", "0"], "--count: '0' is out of range (at least 1)"),
        (["read", "0", "--count", "4294967296"], "--count: '4294967296' is out of range (at most 4294967295)"),
        (["write", "0x140", "1", "--force", "--count", "2"], "reg: --count is for read"),
        (["list", "--json"], "reg: --json is for read"),
        (["read"], "reg: read needs a REGISTER (a name, or an offset with 0x)")]:
    expect(f"hcq reg {' '.join(args)}", run(["reg", "22:00.0"] + args, True, ok=False, status=2),
           f"hcq: {msg}\nRun 'hcq reg --help' for usage.\n")
expect("hcq reg write of a 32-bit decimal", run(["reg", "22:00.0", "write", "0x140", "4294967295", "--force"], True),
       "0000:22:00.0 BAR0+0x140 NV_PMC_INTR_EN_0 <- 0xffffffff (reads back 0xffffffff)\n")
expect("hcq reg read of offset 4", run(["reg", "22:00.0", "read", "4"], True),
       "0000:22:00.0 BAR0+0x4 = 0x0\n")
expect("hcq reg of a bridge", run(["reg", "21:01.0", "read", "0"], True, ok=False),
       "hcq: 0000:21:01.0 is not a GPU (class 0x060400); hcq reg maps GPU register BARs only\n")

cli.finish(f"ok: {len(real)} real functions, emulated system")
