// Worker addresses as hex text and their short labels.
#include "deepinfer/transfer/address.h"

#include <gtest/gtest.h>

namespace deepinfer::transfer {
namespace {

TEST(Address, HexRoundTripsEveryByte) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  const std::string hex = hex_encode(all.data(), all.size());
  EXPECT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.substr(0, 8), "00010203");
  EXPECT_EQ(hex.substr(hex.size() - 4), "feff");
  auto back = hex_decode(hex);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(*back, all);
  auto upper = hex_decode("ABff");
  ASSERT_TRUE(upper.is_ok());
  EXPECT_EQ(*upper, (std::vector<uint8_t>{0xab, 0xff}));
}

TEST(Address, BadHexIsAnInvalidArgumentThatSaysWhere) {
  auto odd = hex_decode("abc");
  ASSERT_FALSE(odd.is_ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("length 3"), std::string::npos) << odd.status().message();
  auto bad = hex_decode("00zz");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("character 2"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(hex_decode("").is_ok());
}

TEST(Address, LabelIsShortStableAndTellsAddressesApart) {
  const std::string a = "0123456789abcdef0123", b = "0123456789abcdef0124";
  EXPECT_EQ(peer_label(a), peer_label(a));
  EXPECT_NE(peer_label(a), peer_label(b));
  EXPECT_EQ(peer_label(a).rfind("peer ", 0), 0u);
  EXPECT_EQ(peer_label(a).size(), 13u);  // "peer " + 8 hex digits
}

}  // namespace
}  // namespace deepinfer::transfer
