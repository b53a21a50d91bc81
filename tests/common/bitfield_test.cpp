#include "common/bitfield.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>

namespace hcq::desc {
namespace {

struct TestField {
  const char* name;
  uint8_t dword, lo, width;
};
constexpr TestField kMode{"MODE", 1, 4, 3};
constexpr TestField kAddrLo{"ADDR_LO", 2, 0, 32};
constexpr TestField kAddrHi{"ADDR_HI", 3, 0, 32};

TEST(Bits, PutsReadsAndReplacesAValue) {
  constexpr Bits b{4, 3};
  EXPECT_EQ(b(5), 0x50u);
  EXPECT_EQ(b.get(0xFFu), 7u);
  EXPECT_EQ(b.replace(0xFFFFFFFFu, 2), 0xFFFFFFAFu);
  EXPECT_TRUE(b.fits(7));
  EXPECT_FALSE(b.fits(8));
  EXPECT_EQ((Bits{0, 32}.mask()), 0xFFFFFFFFu);
  EXPECT_FALSE((Bits{0, 32}.fits(0x100000000ull)));
}

TEST(Bits, CheckedNamesTheFieldAndTheLimitAtEachSide) {
  EXPECT_EQ(checked(kMode, 7, "PKT"), 0x70u);
  try {
    checked(kMode, 8, "PKT");
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "PKT.MODE: 8 does not fit in 3 bits (at most 7)");
  }
}

TEST(PacketWriter, WritesFieldsWhereTheDescriptionPlacesThemAndRecordsSites) {
  CommandStream cs;
  cs.grow(2)[0] = 0xAAAAAAAA;  // a packet before this one: sites are stream offsets
  std::vector<PatchSite> sites;
  PacketWriter w(cs, 4, &sites);
  w.set(kMode, 5).set64(kAddrLo, kAddrHi, 0x1122334455667788ull, PatchRole::SignalAddress, 8);
  ASSERT_EQ(cs.size(), 6u);
  EXPECT_EQ(cs.data()[2], 0u);
  EXPECT_EQ(cs.data()[3], 0x50u);
  EXPECT_EQ(cs.data()[4], 0x55667788u);
  EXPECT_EQ(cs.data()[5], 0x11223344u);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].dword, 4u);
  EXPECT_EQ(sites[0].format, PatchFormat::LoHi64);
  EXPECT_EQ(sites[0].add, 8u);
  // HI before LO (NVIDIA's UPPER/LOWER method pairs) gives a HiLo64 site at the HI dword.
  sites.clear();
  PacketWriter(cs, 4, &sites).set64(kAddrHi, kAddrLo, 1, PatchRole::WaitAddress);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].dword, 8u);
  EXPECT_EQ(sites[0].format, PatchFormat::HiLo64);
}

}  // namespace
}  // namespace hcq::desc
