#pragma once

// SHA-256 (FIPS 180-4), for the content hashes of `tensordict dump` and the
// interop tests, which compare them with Python's hashlib. Not for security
// use: no constant-time guarantees, no zeroing of state.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Computes a SHA-256 digest incrementally: any split of the input into
/// `update` calls gives the digest of the concatenation. Reading the digest
/// does not finish the hasher, so more data can follow.
///
/// Example:
///   Sha256 h;
///   h.update("ab", 2);
///   h.update("c", 1);
///   h.hex_digest();  // "ba7816bf...f20015ad", as sha256_hex("abc", 3)
class Sha256 {
 public:
  /// Creates a hasher holding the empty message.
  Sha256() noexcept;

  /// Appends `n` bytes at `data` to the message; `data` may be null when `n`
  /// is 0. Throws std::length_error past 2^61 - 1 bytes, the limit of the
  /// 64-bit bit count in the padding.
  void update(const void* data, size_t n);

  /// Returns the 32-byte digest of the message so far.
  std::array<uint8_t, 32> digest() const noexcept;

  /// Returns the digest of the message so far as 64 lowercase hex digits.
  std::string hex_digest() const;

 private:
  void compress(const uint8_t* block) noexcept;

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes hashed so far, buffered ones included
};

/// Returns the SHA-256 of `n` bytes at `data` as 64 lowercase hex digits.
std::string sha256_hex(const void* data, size_t n);

}  // namespace detail
TENSORDICT_END_NAMESPACE
