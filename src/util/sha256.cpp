#include "util/sha256.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

TENSORDICT_BEGIN_NAMESPACE
namespace detail {
namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the
// cube roots of the first 64 primes.
constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// FIPS 180-4 section 5.3.3: the first 32 bits of the fractional parts of the
// square roots of the first 8 primes.
constexpr std::array<uint32_t, 8> kInitialState = {
    0x6a09e667,
    0xbb67ae85,
    0x3c6ef372,
    0xa54ff53a,
    0x510e527f,
    0x9b05688c,
    0x1f83d9ab,
    0x5be0cd19,
};

// The padding stores the message length in bits in 64 bits.
constexpr uint64_t kMaxMessageBytes = (uint64_t{1} << 61) - 1;

constexpr uint32_t rotr(uint32_t x, int n) noexcept {
  return (x >> n) | (x << (32 - n));
}

// Words are big-endian whatever the host order (FIPS 180-4 section 3.1).
uint32_t load_be32(const uint8_t* p) noexcept {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void store_be32(uint32_t x, uint8_t* p) noexcept {
  p[0] = static_cast<uint8_t>(x >> 24);
  p[1] = static_cast<uint8_t>(x >> 16);
  p[2] = static_cast<uint8_t>(x >> 8);
  p[3] = static_cast<uint8_t>(x);
}

}  // namespace

Sha256::Sha256() noexcept : state_(kInitialState) {}

void Sha256::compress(const uint8_t* block) noexcept {
  // Message schedule, FIPS 180-4 section 6.2.2 step 1.
  std::array<uint32_t, 64> w{};
  for (size_t t = 0; t < 16; ++t) {
    w[t] = load_be32(block + 4 * t);
  }
  for (size_t t = 16; t < 64; ++t) {
    const uint32_t s0 =
        rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 =
        rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }

  uint32_t a = state_[0];
  uint32_t b = state_[1];
  uint32_t c = state_[2];
  uint32_t d = state_[3];
  uint32_t e = state_[4];
  uint32_t f = state_[5];
  uint32_t g = state_[6];
  uint32_t h = state_[7];
  for (size_t t = 0; t < 64; ++t) {
    const uint32_t big_sigma1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const uint32_t ch = (e & f) ^ (~e & g);
    const uint32_t t1 = h + big_sigma1 + ch + kRoundConstants[t] + w[t];
    const uint32_t big_sigma0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = big_sigma0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(const void* data, size_t n) {
  if (n == 0) {
    return;
  }
  if (n > kMaxMessageBytes - length_) {
    throw std::length_error("SHA-256 input longer than 2^61 - 1 bytes");
  }
  length_ += n;
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (buffered_ > 0) {
    const size_t take = std::min(n, buffer_.size() - buffered_);
    std::memcpy(buffer_.data() + buffered_, bytes, take);
    buffered_ += take;
    bytes += take;
    n -= take;
    if (buffered_ < buffer_.size()) {
      return;
    }
    compress(buffer_.data());
    buffered_ = 0;
  }
  // Whole blocks are hashed in place rather than copied through the buffer.
  for (; n >= buffer_.size(); n -= buffer_.size(), bytes += buffer_.size()) {
    compress(bytes);
  }
  std::memcpy(buffer_.data(), bytes, n);
  buffered_ = n;
}

std::array<uint8_t, 32> Sha256::digest() const noexcept {
  // Pad a copy, so that the hasher itself can take more data afterwards.
  Sha256 last = *this;
  // FIPS 180-4 section 5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, then the
  // bit length as a big-endian 64-bit number.
  last.buffer_[last.buffered_++] = 0x80;
  if (last.buffered_ > 56) {
    std::memset(last.buffer_.data() + last.buffered_, 0, 64 - last.buffered_);
    last.compress(last.buffer_.data());
    last.buffered_ = 0;
  }
  std::memset(last.buffer_.data() + last.buffered_, 0, 56 - last.buffered_);
  const uint64_t bits = length_ * 8;
  store_be32(static_cast<uint32_t>(bits >> 32), last.buffer_.data() + 56);
  store_be32(static_cast<uint32_t>(bits), last.buffer_.data() + 60);
  last.compress(last.buffer_.data());

  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < last.state_.size(); ++i) {
    store_be32(last.state_[i], out.data() + 4 * i);
  }
  return out;
}

std::string Sha256::hex_digest() const {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  const std::array<uint8_t, 32> bytes = digest();
  std::string out;
  out.reserve(2 * bytes.size());
  for (const uint8_t byte : bytes) {
    out.push_back(kHexDigits[byte >> 4]);
    out.push_back(kHexDigits[byte & 0x0f]);
  }
  return out;
}

std::string sha256_hex(const void* data, size_t n) {
  Sha256 hasher;
  hasher.update(data, n);
  return hasher.hex_digest();
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
