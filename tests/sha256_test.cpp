#include "util/sha256.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

// Its own namespace, so that test files can share a unity batch.
namespace sha256_test {

namespace {

using tensordict::detail::Sha256;
using tensordict::detail::sha256_hex;

std::string hex_of(const std::string& message) {
  return sha256_hex(message.data(), message.size());
}

// Pseudo-random bytes the test can regenerate without storing them:
// xorshift32, the top byte of each state. The expected digests below were
// computed by Python's hashlib on the same bytes.
std::vector<uint8_t> xorshift_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed;
  for (auto& byte : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    byte = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

std::string hex_in_chunks(const std::vector<uint8_t>& data, size_t chunk) {
  Sha256 hasher;
  for (size_t at = 0; at < data.size(); at += chunk) {
    hasher.update(data.data() + at, std::min(chunk, data.size() - at));
  }
  return hasher.hex_digest();
}

constexpr char kEmpty[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kAbc[] =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

}  // namespace

// FIPS 180-2 appendix B and the NIST example vectors.
TEST(Sha256Test, HashesTheEmptyMessage) {
  EXPECT_EQ(hex_of(""), kEmpty);
  EXPECT_EQ(sha256_hex(nullptr, 0), kEmpty);
  EXPECT_EQ(Sha256().hex_digest(), kEmpty);
}

TEST(Sha256Test, HashesAbc) {
  EXPECT_EQ(hex_of("abc"), kAbc);
}

TEST(Sha256Test, HashesTheTwoBlock448BitMessage) {
  EXPECT_EQ(
      hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, Hashes896BitMessage) {
  EXPECT_EQ(
      hex_of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
             "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256Test, HashesOneMillionA) {
  const std::string million(1000000, 'a');
  constexpr char kExpected[] =
      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  EXPECT_EQ(hex_of(million), kExpected);

  Sha256 hasher;
  const std::string thousand(1000, 'a');
  for (int i = 0; i < 1000; ++i) {
    hasher.update(thousand.data(), thousand.size());
  }
  EXPECT_EQ(hasher.hex_digest(), kExpected);
}

TEST(Sha256Test, GivesTheSameDigestForAnySplitOfTheInput) {
  const std::vector<uint8_t> data = xorshift_bytes(1000, 0x9E3779B9 ^ 1000);
  constexpr char kExpected[] =
      "eb5fc026dae1ce28e720f7db581ed926a41450e8cf31409ce1c192a06a012cd7";
  for (const size_t chunk : {1, 2, 7, 55, 56, 63, 64, 65, 127, 128, 999}) {
    EXPECT_EQ(hex_in_chunks(data, chunk), kExpected) << "chunk " << chunk;
  }
}

TEST(Sha256Test, GivesTheSameDigestWhenSplitAtBlockBoundaries) {
  const std::vector<uint8_t> data = xorshift_bytes(1000, 0x9E3779B9 ^ 1000);
  const std::string expected = sha256_hex(data.data(), data.size());
  for (const size_t first : {1, 63, 64, 65}) {
    for (const size_t second : {0, 1, 63, 64, 65, 128}) {
      Sha256 hasher;
      hasher.update(data.data(), first);
      hasher.update(data.data() + first, second);
      hasher.update(nullptr, 0);
      hasher.update(data.data() + first + second, data.size() - first - second);
      EXPECT_EQ(hasher.hex_digest(), expected)
          << "split at " << first << " and " << first + second;
    }
  }
}

TEST(Sha256Test, ReadingTheDigestLetsMoreDataFollow) {
  Sha256 hasher;
  hasher.update("ab", 2);
  const std::string partial = hasher.hex_digest();
  EXPECT_EQ(partial, hex_of("ab"));
  EXPECT_EQ(hasher.hex_digest(), partial);
  hasher.update("c", 1);
  EXPECT_EQ(hasher.hex_digest(), kAbc);
}

TEST(Sha256Test, DigestIsTheBinaryFormOfTheHexDigest) {
  Sha256 hasher;
  hasher.update("abc", 3);
  const auto bytes = hasher.digest();
  EXPECT_EQ(bytes[0], 0xba);
  EXPECT_EQ(bytes[1], 0x78);
  EXPECT_EQ(bytes[31], 0xad);
}

// Lengths on both sides of the padding boundaries (55/56/57 bytes leave room
// for the length or not; 63/64/65 straddle a block) and of several blocks.
TEST(Sha256Test, MatchesPythonHashlibOnPseudoRandomBytes) {
  struct Vector {
    size_t length;
    const char* hex;
  };
  const Vector vectors[] = {
      {1, "4ae81572f06e1b88fd5ced7a1a000945432e83e1551e6f721ee9c00b8cc33260"},
      {3, "eb1291d66a08005b78d9cc1221221735248a20d47da85cb8cb2c8a315b1b988b"},
      {55, "d6fc69e092f5a39a86d8f919cfe25a29a5d86986c82583a8341ead5f9b044917"},
      {56, "6400ba470be72871400d5f73ee6548a276bdb77ea97d64fcb83a4637b0a0ac99"},
      {57, "b76ad81e2c47c4aaf4bf048abb6dbdfb7e68732639b593d88177152eb95dd313"},
      {63, "40ca76c238a049d8a1a179960c9748e91672f18963228082bc7273f0abcca5c8"},
      {64, "b3d094f9759f14d1079dcc8ba369eea6260caae2317ee37e4f708123949240f6"},
      {65, "cc3bd84be449c7ec6130ffdc93eb8dfdcaf54a03b2a10421b75ee8b96d8b45a3"},
      {119, "554871c539a4b58b4c7da9b387630b0f020ac2689d877ff91a800b0399aced0c"},
      {120, "24a4d2a5976803068b36ecac9d712da954ac5773a1d8bf3b901ce23f0d31fd58"},
      {127, "52eacd23fd82087e5829ec4fad665fb36068a0c28bdd2978801b364c013cc630"},
      {128, "87afd6d5308258a1cc83811655cf7b0c7679bce02da2b718b60e600a3dd48d43"},
      {129, "0d8f01f80ec4196505d0fb851c95dda906d85e360a3f09aa9cc6ea94456e3624"},
      {1000,
       "eb5fc026dae1ce28e720f7db581ed926a41450e8cf31409ce1c192a06a012cd7"},
      {4097,
       "f2927e945e58b1ae765abe2fc36a30bff229688b14b6c734820769b9cb189aca"},
      {65543,
       "9e8e530e256a3ec82ee4e60387c14bbddd009f39a91f787bbc7f64939251734a"},
  };
  for (const auto& v : vectors) {
    const std::vector<uint8_t> data =
        xorshift_bytes(v.length, 0x9E3779B9 ^ static_cast<uint32_t>(v.length));
    EXPECT_EQ(sha256_hex(data.data(), data.size()), v.hex)
        << "length " << v.length;
  }
}

TEST(Sha256Test, HashesEveryByteValue) {
  std::string data;
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (int byte = 0; byte < 256; ++byte) {
      data.push_back(static_cast<char>(byte));
    }
  }
  EXPECT_EQ(
      hex_of(data),
      "f3a25aa93aa2fbba28d79260535bbd6a5eb0fc1c24a8b0f04e12b484c1dfe363");
}

TEST(Sha256Test, UpdateThrowsPastTheLengthLimitOfThePadding) {
  Sha256 hasher;
  hasher.update("abc", 3);
  // The data is never read: the length is checked first.
  try {
    hasher.update("x", std::numeric_limits<size_t>::max());
    FAIL() << "expected std::length_error";
  } catch (const std::length_error& e) {
    EXPECT_STREQ(e.what(), "SHA-256 input longer than 2^61 - 1 bytes");
  }
  EXPECT_EQ(hasher.hex_digest(), kAbc);
}

}  // namespace sha256_test
