// The metadata JSON reader (src/io/json_reader.cpp): it reads what
// nlohmann's Json::parse reads, to the same document, and refuses what it
// refuses, checked on hand-picked texts and on thousands of mutations of
// them; plus Python's NaN/Infinity literals and the reader's own messages.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/format.h"
#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace json_reader_test {

using tensordict::Json;
using tensordict::detail::parse_meta_json;

const std::string kSource = "test.json";

Json parse(const std::string& text, int64_t max_depth = 1000) {
  return parse_meta_json(text, max_depth, kSource);
}

// The type of every value, so that 1, 1u and 1.0 do not compare equal.
std::string typed_dump(const Json& value) {
  std::string out = value.type_name();
  if (value.is_number_unsigned()) {
    out += "u";
  } else if (value.is_number_integer()) {
    out += "i";
  }
  out += "(";
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      out += Json(it.key()).dump() + ":" + typed_dump(it.value()) + ",";
    }
  } else if (value.is_array()) {
    for (const Json& item : value) {
      out += typed_dump(item) + ",";
    }
  } else {
    out += value.dump();
  }
  return out + ")";
}

const std::vector<std::string>& seeds() {
  static const std::vector<std::string> texts = {
      R"({})",
      R"({"a": 1})",
      R"( {"a" : [1, 2.5, -3, 0, -0, 0.0, 1e3, 1E-2, -1.5e+10]} )",
      R"({"s": "plain", "e": "\" \\ \/ \b \f \n \r \t", "u": "\u00e9\u4e2d\ud83d\ude00\u0000"})",
      "{\"raw\": \"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"}",
      R"({"nested": {"deeper": {"list": [[], {}, [[1]], {"k": null}]}}})",
      R"({"t": true, "f": false, "n": null})",
      R"({"big": 18446744073709551615, "bigger": 18446744073709551616, "min": -9223372036854775808, "less": -9223372036854775809})",
      R"({"tiny": 4.9e-324, "max": 1.7976931348623157e308, "under": 1e-400})",
      R"({"dup": 1, "other": 2, "dup": [3]})",
      R"({"x0": {"device": "cpu", "shape": [1024], "dtype": "torch.float32", "is_nested": false}, "_type": "<class 'tensordict._td.TensorDict'>"})",
      "{\"ws\":\t\r\n[1 ,\n2]\n}",
      "\xEF\xBB\xBF{\"bom\": 1}",
  };
  return texts;
}

// Both readers agree: the same document, or both refuse. A top value that
// is not an object is refused by parse_meta_json alone.
void expect_same_as_nlohmann(const std::string& text) {
  std::optional<Json> expected;
  try {
    expected = Json::parse(text);
  } catch (const nlohmann::json::exception&) {
  }
  std::optional<Json> actual;
  std::string error;
  try {
    actual = parse(text);
  } catch (const c10::Error& e) {
    error = e.msg();
  }
  if (expected && expected->is_object()) {
    ASSERT_TRUE(actual.has_value())
        << "refused what nlohmann reads: " << text << "\n"
        << error;
    EXPECT_EQ(typed_dump(*actual), typed_dump(*expected)) << text;
  } else {
    ASSERT_FALSE(actual.has_value()) << "read what nlohmann refuses: " << text;
    EXPECT_NE(error.find(kSource), std::string::npos) << error;
  }
}

TEST(JsonReaderTest, HandPickedTextsReadAsNlohmannReadsThem) {
  for (const std::string& text : seeds()) {
    expect_same_as_nlohmann(text);
  }
  const std::vector<std::string> refused = {
      "",
      " ",
      "{",
      "{\"a\"}",
      "{\"a\" 1}",
      "{\"a\": 1,}",
      "{,}",
      "[1,]",
      "{\"a\": 01}",
      "{\"a\": 1.}",
      "{\"a\": .5}",
      "{\"a\": 1e}",
      "{\"a\": -}",
      "{\"a\": +1}",
      "{\"a\": 1e400}",
      "{\"a\": tru}",
      "{\"a\": nul}",
      "{\"a\": \"\\x\"}",
      "{\"a\": \"\\u12\"}",
      "{\"a\": \"\\ud800\"}",
      "{\"a\": \"\\udc00\"}",
      "{\"a\": \"\\ud800\\u0041\"}",
      "{\"a\": \"tab\there\"}",
      "{\"a\": \"\xff\"}",
      "{\"a\": \"\xc0\xaf\"}",
      "{\"a\": \"\xed\xa0\x80\"}",
      "{\"a\": \"\xf4\x90\x80\x80\"}",
      "{\"a\": \"\xe4\xb8\"}",
      "{\"a\": \"unterminated}",
      "{} {}",
      "{}x",
      "\xEF\xBB{}",
      "[1, 2]",
      "\"top\"",
      "3",
  };
  for (const std::string& text : refused) {
    expect_same_as_nlohmann(text);
  }
}

TEST(JsonReaderTest, MutatedTextsReadAsNlohmannReadsThem) {
  // Mutations that keep most of a text intact reach far into the grammar:
  // a byte replaced by one of the grammar's own, inserted, deleted, or the
  // text cut short.
  const std::string alphabet =
      "{}[]:,\"\\ -+.0123456789eEtrufalsn\x01\x7f\xc3\xa9\xed\xf0";
  std::mt19937 rng(1234);
  int checked = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = seeds()[rng() % seeds().size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      const char byte = alphabet[rng() % alphabet.size()];
      switch (rng() % 4) {
        case 0:
          text[at] = byte;
          break;
        case 1:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), byte);
          break;
        case 2:
          text.erase(at, 1);
          break;
        default:
          text.resize(at);
      }
    }
    // nlohmann reads no NaN or Infinity; those are checked on their own.
    if (text.find("NaN") != std::string::npos ||
        text.find("Infinity") != std::string::npos) {
      continue;
    }
    expect_same_as_nlohmann(text);
    if (::testing::Test::HasFatalFailure()) {
      return;
    }
    ++checked;
  }
  EXPECT_GT(checked, 19000);
}

TEST(JsonReaderTest, PythonFloatLiteralsAreRead) {
  const Json parsed = parse(
      R"({"nan": NaN, "inf": [Infinity, -Infinity], "NaN": "NaN", "s": "Infinity"})");
  EXPECT_TRUE(std::isnan(parsed.at("nan").get<double>()));
  EXPECT_EQ(
      parsed.at("inf")[0].get<double>(),
      std::numeric_limits<double>::infinity());
  EXPECT_EQ(
      parsed.at("inf")[1].get<double>(),
      -std::numeric_limits<double>::infinity());
  EXPECT_EQ(parsed.at("NaN"), "NaN");
  EXPECT_EQ(parsed.at("s"), "Infinity");
  // Strings the old reader used as markers are plain strings now.
  EXPECT_EQ(
      parse("{\"m\": \"\\u0001tensordict:NaN\", \"n\": NaN}").at("m"),
      "\x01tensordict:NaN");
  EXPECT_THROWS_WITH(parse("{\"a\": Nan}"), c10::Error, "expected a value");
  EXPECT_THROWS_WITH(parse("{\"a\": -Inf}"), c10::Error, "expected a digit");
}

TEST(JsonReaderTest, NumbersKeepNlohmannsTypes) {
  const Json parsed = parse(
      R"({"u": 7, "i": -7, "z": -0, "d": 7.0, "big": 18446744073709551615,)"
      R"( "bigger": 18446744073709551616, "under": -1e-400})");
  EXPECT_TRUE(parsed.at("u").is_number_unsigned());
  EXPECT_TRUE(parsed.at("i").is_number_integer());
  EXPECT_FALSE(parsed.at("i").is_number_unsigned());
  EXPECT_TRUE(parsed.at("z").is_number_integer());
  EXPECT_TRUE(parsed.at("d").is_number_float());
  EXPECT_EQ(parsed.at("big").get<uint64_t>(), UINT64_MAX);
  EXPECT_TRUE(parsed.at("bigger").is_number_float());
  EXPECT_EQ(parsed.at("under").get<double>(), 0.0);
  EXPECT_TRUE(std::signbit(parsed.at("under").get<double>()));
}

TEST(JsonReaderTest, ErrorsNameTheFileAndTheByte) {
  EXPECT_THROWS_WITH(
      parse("{\"a\": [1, 2}"),
      c10::Error,
      "test.json is not valid JSON: at byte 11: expected ',' or ']'");
  EXPECT_THROWS_WITH(
      parse("{\"a\": \"\xff\"}"),
      c10::Error,
      "at byte 7: invalid UTF-8 byte in a string");
  EXPECT_THROWS_WITH(
      parse("{\"a\": 1e999}"), c10::Error, "number overflow: 1e999");
  EXPECT_THROWS_WITH(
      parse("{\"a\": 1"),
      c10::Error,
      "expected ',' or '}', found the end of the text");
  EXPECT_THROWS_WITH(
      parse("[]"),
      c10::Error,
      "test.json must hold a JSON object, found array");
}

TEST(JsonReaderTest, DeepNestingIsBoundedAndNeverRecurses) {
  EXPECT_THROWS_WITH(
      parse(R"({"a": [[1]]})", 2),
      c10::Error,
      "test.json nests JSON deeper than 2 levels "
      "(LoadMemmapOptions::max_depth)");
  EXPECT_NO_THROW(parse(R"({"a": [[]]})", 2));
  // A million levels, allowed: read without a stack to overflow.
  constexpr int kLevels = 1000000;
  const std::string deep =
      "{\"a\": " + std::string(kLevels, '[') + std::string(kLevels, ']') + "}";
  const Json parsed = parse(deep, int64_t{1} << 40);
  const Json* level = &parsed.at("a");
  int depth = 1;
  while (!level->empty()) {
    level = &(*level)[0];
    ++depth;
  }
  EXPECT_EQ(depth, kLevels);
  // Cut short at the bottom: refused, also without recursion.
  EXPECT_THROWS_WITH(
      parse("{\"a\": " + std::string(kLevels, '['), int64_t{1} << 40),
      c10::Error,
      "found the end of the text");
}

}  // namespace json_reader_test
