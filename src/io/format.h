#pragma once

// The vocabulary of Python tensordict's on-disk formats (memmap directories
// and consolidated files): class strings, dtype spellings, file-system key
// encoding, and a JSON writer that reproduces Python's bytes in both of its
// styles. Reading untrusted metadata goes through io/metadata_reader.h.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/key_path.h"
#include "tensordict/fwd.h"
#include "tensordict/nested_key.h"
#include "tensordict/options.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// The format version written (`_format_version`); readers accept up to it.
constexpr int64_t kMemmapFormatVersion = 1;

// `_type` strings: Python's str(cls).
extern const char* const kTensorDictType;
extern const char* const kLazyStackType;
extern const char* const kNonTensorDataType;
extern const char* const kNonTensorStackType;
extern const char* const kMetaDataType;
extern const char* const kTensorDictParamsType;

/// Returns the dtype Python spells `name` ("torch.float32"), or nothing for
/// an unknown or unloadable name.
std::optional<c10::ScalarType> dtype_from_name(std::string_view name);

/// True if leaves of `dtype` can be saved so that Python loads them.
bool is_saveable_dtype(c10::ScalarType dtype);

/// Names an entry in messages: "key ('a', 'b')", or "the root".
std::string describe(const KeyPath& path);

/// Python's `_encode_key_for_filesystem(key, robust=True)`.
std::string encode_key(std::string_view key);

/// Python's `_is_safe_legacy_key`: a raw key that stays below its prefix.
bool is_safe_legacy_key(std::string_view key, bool is_collection);

/// Serializes like Python's json.dumps: `spaced` uses ", " and ": "
/// separators (else "," and ":"), `ascii` escapes non-ASCII as \uXXXX and
/// writes NaN/Infinity (stdlib json; else raw UTF-8 and null, as orjson).
/// Throws if a string is not valid UTF-8.
std::string dump_json(const Json& value, bool spaced, bool ascii);

/// Parses a meta.json; throws with `path` on malformed JSON, nesting deeper
/// than `max_depth`, or a non-object top level. Accepts the NaN, Infinity
/// and -Infinity literals Python's json writes. Reads the grammar of, and
/// builds the same document as, nlohmann's Json::parse, in one pass of its
/// own (src/io/json_reader.cpp).
Json parse_meta_json(
    std::string_view text, int64_t max_depth, const std::string& path);

}  // namespace detail
TENSORDICT_END_NAMESPACE
