#include "common/base/sha256.h"

#include <string>

#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(Sha256, MatchesFips180TestVectors) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, InPiecesEqualsAtOnce) {
  Sha256Hasher hasher;
  hasher.Update("a");
  hasher.Update("");
  hasher.Update("bc");
  EXPECT_EQ(hasher.FinishHex(), Sha256Hex("abc"));
  const std::string big(100000, 'x');
  Sha256Hasher pieces;
  for (size_t i = 0; i < big.size(); i += 4096) pieces.Update(absl::string_view(big).substr(i, 4096));
  EXPECT_EQ(pieces.FinishHex(), Sha256Hex(big));
}

}  // namespace
}  // namespace mtb
