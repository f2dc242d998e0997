#include "io/pickle.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support.h"

// Its own namespace, so that test files can share a unity batch.
namespace pickle_test {

namespace {

using tensordict::Json;
using tensordict::detail::pickled_to_json;
using tensordict::detail::PickledValue;
using tensordict::detail::unpickle;
using Kind = tensordict::detail::PickledValue::Kind;

// Pickles written by Python 3.11 (numpy 2.4, torch 2.13) with
// `pickle.dumps(value, protocol=...)`; the value is in each test.
constexpr const char* kDictOfPlain =
    "80049558000000000000007d948c0464617461947d94288c016b944b014b0286944b"
    "0343027879948c0166944740040000000000008c016e944e8c017494888c03626967"
    "948a09ffffffffffffffff008c036e6567948a08000000000000008075732e";
constexpr const char* kArrayF4 =
    "800495a3000000000000008c166e756d70792e5f636f72652e6d756c746961727261"
    "79948c0c5f7265636f6e7374727563749493948c056e756d7079948c076e64617272"
    "61799493944b0085944301629487945294284b014b024b03869468038c0564747970"
    "659493948c02663494898887945294284b038c013c944e4e4e4affffffff4affffff"
    "ff4b00749462894318000000000000803f0000004000004040000080400000a04094"
    "7494622e";
constexpr const char* kArrayI2Fortran =
    "80049597000000000000008c166e756d70792e5f636f72652e6d756c746961727261"
    "79948c0c5f7265636f6e7374727563749493948c056e756d7079948c076e64617272"
    "61799493944b0085944301629487945294284b014b024b03869468038c0564747970"
    "659493948c02693294898887945294284b038c013c944e4e4e4affffffff4affffff"
    "ff4b0074946288430c000003000100040002000500947494622e";
constexpr const char* kArrayBigEndianI4 =
    "80049595000000000000008c166e756d70792e5f636f72652e6d756c746961727261"
    "79948c0c5f7265636f6e7374727563749493948c056e756d7079948c076e64617272"
    "61799493944b0085944301629487945294284b014b03859468038c05647479706594"
    "93948c02693494898887945294284b038c013e944e4e4e4affffffff4affffffff4b"
    "0074946289430c000000000000000100000002947494622e";
constexpr const char* kArrayBool =
    "8004958c000000000000008c166e756d70792e5f636f72652e6d756c746961727261"
    "79948c0c5f7265636f6e7374727563749493948c056e756d7079948c076e64617272"
    "61799493944b0085944301629487945294284b014b03859468038c05647479706594"
    "93948c02623194898887945294284b038c017c944e4e4e4affffffff4affffffff4b"
    "00749462894303010001947494622e";
constexpr const char* kArrayU8F2C8 =
    "80049529010000000000005d94288c166e756d70792e5f636f72652e6d756c746961"
    "72726179948c0c5f7265636f6e7374727563749493948c056e756d7079948c076e64"
    "61727261799493944b0085944301629487945294284b014b02859468048c05647479"
    "70659493948c02753894898887945294284b038c013c944e4e4e4affffffff4affff"
    "ffff4b007494628943100100000000000000ffffffffffffffff9474946268036806"
    "4b008594680887945294284b014b028594680d8c02663294898887945294284b0368"
    "114e4e4e4affffffff4affffffff4b00749462894304003800c09474946268036806"
    "4b008594680887945294284b014b018594680d8c02633894898887945294284b0368"
    "114e4e4e4affffffff4affffffff4b007494628943080000803f0000004094749462"
    "652e";
constexpr const char* kProtocol5Array =
    "80059594000000000000008c136e756d70792e5f636f72652e6e756d65726963948c"
    "0b5f66726f6d62756666657294939428962000000000000000000000000000000000"
    "0000000000f03f00000000000000400000000000000840948c056e756d7079948c05"
    "64747970659493948c02663894898887945294284b038c013c944e4e4e4affffffff"
    "4affffffff4b007494624b0485948c014394749452942e";
constexpr const char* kProtocol2Bytes =
    "80027d7100285801000000627101635f636f646563730a656e636f64650a71025803"
    "00000000c3bf710358060000006c6174696e31710486710552710658010000006171"
    "07636e756d70792e5f636f72652e6d756c746961727261790a5f7265636f6e737472"
    "7563740a7108636e756d70790a6e6461727261790a71094b0085710a680258010000"
    "0062710b680486710c52710d87710e52710f284b014b02857110636e756d70790a64"
    "747970650a71115802000000693871128988877113527114284b0358010000003c71"
    "154e4e4e4affffffff4affffffff4b00747116628968025810000000000000000000"
    "000001000000000000007117680486711852711974711a62752e";
constexpr const char* kScalars =
    "800495fd000000000000005d94288c166e756d70792e5f636f72652e6d756c746961"
    "72726179948c067363616c61729493948c056e756d7079948c056474797065949394"
    "8c02663494898887945294284b038c013c944e4e4e4affffffff4affffffff4b0074"
    "946243040000c03f9486945294680368068c02693894898887945294284b03680a4e"
    "4e4e4affffffff4affffffff4b007494624308fdffffffffffffff94869452946803"
    "68068c02623194898887945294284b038c017c944e4e4e4affffffff4affffffff4b"
    "007494624301019486945294680368068c02753194898887945294284b0368194e4e"
    "4e4affffffff4affffffff4b007494624301079486945294652e";
constexpr const char* kSize =
    "8004951c000000000000008c05746f726368948c0453697a659493944b034b048694"
    "859452942e";
constexpr const char* kOrderedDict =
    "80049530000000000000008c0b636f6c6c656374696f6e73948c0b4f726465726564"
    "44696374949394295294288c017a944b018c0161944b02752e";
constexpr const char* kMalicious =
    "80049535000000000000007d948c0464617461948c05706f736978948c0673797374"
    "656d9493948c10746f756368202f746d702f70776e65649485945294732e";
constexpr const char* kSet = "80049509000000000000008f94284b014b02902e";
constexpr const char* kStrArray =
    "8004958b000000000000008c166e756d70792e5f636f72652e6d756c746961727261"
    "79948c0c5f7265636f6e7374727563749493948c056e756d7079948c076e64617272"
    "61799493944b0085944301629487945294284b014b01859468038c05647479706594"
    "93948c02553294898887945294284b038c013c944e4e4e4b084b044b087494628943"
    "086100000062000000947494622e";

std::string from_hex(const char* hex) {
  std::string out;
  for (const char* p = hex; p[0] != '\0' && p[1] != '\0'; p += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(p, 2), nullptr, 16)));
  }
  return out;
}

PickledValue load(const char* hex) {
  return unpickle(from_hex(hex), "the test");
}

Json load_json(const char* hex) {
  return pickled_to_json(load(hex), "the test");
}

std::vector<uint8_t> bytes_of(const at::Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.const_data_ptr());
  return {p, p + t.nbytes()};
}

TEST(PickleTest, ReadsPlainValuesBytesAndNonStringKeys) {
  // {"data": {"k": (1, 2), 3: b"xy", "f": 2.5, "n": None, "t": True,
  //           "big": 2**64 - 1, "neg": -2**63}}
  const PickledValue value = load(kDictOfPlain);
  ASSERT_EQ(value.kind, Kind::kDict);
  const PickledValue& data = value.items.at(1);
  EXPECT_EQ(data.items.at(1).kind, Kind::kTuple);
  EXPECT_EQ(data.items.at(2).kind, Kind::kInt);
  EXPECT_EQ(data.items.at(3).kind, Kind::kBytes);
  const Json json = pickled_to_json(value, "the test");
  EXPECT_EQ(json["data"]["k"], Json::array({1, 2}));
  EXPECT_EQ(json["data"]["3"], Json::binary({'x', 'y'}));
  EXPECT_EQ(json["data"]["f"], 2.5);
  EXPECT_TRUE(json["data"]["n"].is_null());
  EXPECT_EQ(json["data"]["t"], true);
  EXPECT_EQ(json["data"]["big"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(json["data"]["neg"].get<int64_t>(), INT64_MIN);
  // The key order is the pickle's, as Python's dict.
  EXPECT_EQ(json["data"].begin().key(), "k");
}

TEST(PickleTest, ReadsNumpyArraysAsTensors) {
  // np.arange(6, dtype=np.float32).reshape(2, 3)
  const PickledValue f4 = load(kArrayF4);
  ASSERT_EQ(f4.kind, Kind::kArray);
  EXPECT_TRUE(at::equal(f4.array, at::arange(6, at::kFloat).reshape({2, 3})));
  EXPECT_EQ(
      pickled_to_json(f4, "t"),
      Json::parse("[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]"));
  // np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))
  const PickledValue i2 = load(kArrayI2Fortran);
  EXPECT_TRUE(at::equal(i2.array, at::arange(6, at::kShort).reshape({2, 3})));
  EXPECT_TRUE(i2.array.is_contiguous());
  // np.arange(3, dtype=">i4"): byte-swapped to native order.
  EXPECT_TRUE(
      at::equal(load(kArrayBigEndianI4).array, at::arange(3, at::kInt)));
  // np.array([True, False, True])
  const PickledValue b1 = load(kArrayBool);
  EXPECT_EQ(b1.array.scalar_type(), at::kBool);
  EXPECT_EQ(pickled_to_json(b1, "t"), Json::array({true, false, true}));
}

TEST(PickleTest, ReadsUnsignedHalfAndComplexArrays) {
  // [np.array([1, 2**64 - 1], dtype=np.uint64),
  //  np.array([0.5, -2], dtype=np.float16), np.array([1+2j], np.complex64)]
  const PickledValue list = load(kArrayU8F2C8);
  ASSERT_EQ(list.items.size(), 3U);
  const at::Tensor& u8 = list.items[0].array;
  EXPECT_EQ(u8.scalar_type(), at::kUInt64);
  std::vector<uint8_t> expected(16, 0);
  expected[0] = 1;
  std::fill(expected.begin() + 8, expected.end(), 0xff);
  EXPECT_EQ(bytes_of(u8), expected);
  EXPECT_EQ(pickled_to_json(list.items[0], "t")[1].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(list.items[1].array.scalar_type(), at::kHalf);
  EXPECT_EQ(pickled_to_json(list.items[1], "t"), Json::array({0.5, -2.0}));
  const at::Tensor& c8 = list.items[2].array;
  EXPECT_EQ(c8.scalar_type(), at::kComplexFloat);
  EXPECT_EQ(c8.item<c10::complex<float>>(), c10::complex<float>(1, 2));
  // JSON has no complex numbers: refused, with what was found.
  EXPECT_THROWS_WITH(
      pickled_to_json(list, "the file"),
      c10::ValueError,
      "the file: a complex numpy value (ComplexFloat) has no JSON form");
}

TEST(PickleTest, ReadsProtocolFiveAndProtocolTwoArraysAndBytes) {
  // pickle.dumps(np.arange(4, dtype=np.float64), protocol=5): _frombuffer
  EXPECT_TRUE(
      at::equal(load(kProtocol5Array).array, at::arange(4, at::kDouble)));
  // pickle.dumps({"b": b"\x00\xff", "a": np.arange(2)}, protocol=2):
  // bytes through _codecs.encode(..., "latin1")
  const Json json = load_json(kProtocol2Bytes);
  EXPECT_EQ(json["b"], Json::binary({0x00, 0xff}));
  EXPECT_EQ(json["a"], Json::array({0, 1}));
}

TEST(PickleTest, ReadsNumpyScalarsSizeAndOrderedDict) {
  // [np.float32(1.5), np.int64(-3), np.bool_(True), np.uint8(7)]
  const PickledValue scalars = load(kScalars);
  EXPECT_EQ(scalars.items.at(0).kind, Kind::kNumpyScalar);
  EXPECT_EQ(scalars.items.at(0).array.scalar_type(), at::kFloat);
  EXPECT_EQ(pickled_to_json(scalars, "t"), Json::parse("[1.5, -3, true, 7]"));
  // torch.Size([3, 4])
  const PickledValue size = load(kSize);
  EXPECT_EQ(size.kind, Kind::kSize);
  EXPECT_EQ(pickled_to_json(size, "t"), Json::array({3, 4}));
  // collections.OrderedDict([("z", 1), ("a", 2)])
  const Json ordered = load_json(kOrderedDict);
  EXPECT_EQ(ordered.dump(), R"({"z":1,"a":2})");
}

TEST(PickleTest, RefusesAGlobalThatWouldRunCode) {
  // {"data": Evil()}, Evil.__reduce__ returning (os.system, ("touch ...",))
  EXPECT_THROWS_WITH(
      load(kMalicious),
      c10::ValueError,
      "invalid pickle in the test at byte 37: the global 'posix.system' is "
      "not allowed");
}

TEST(PickleTest, RefusesOtherOpcodesAndDtypesByName) {
  // {1, 2}: EMPTY_SET
  EXPECT_THROWS_WITH(
      load(kSet), c10::ValueError, "opcode 0x8f (EMPTY_SET) is not allowed");
  // np.array(["ab"]): a unicode dtype
  EXPECT_THROWS_WITH(
      load(kStrArray),
      c10::ValueError,
      "the numpy dtype 'U2' has no torch equivalent");
  // INST, OBJ and NEWOBJ would build an instance of any class.
  for (const char* op : {"i", "o", "\x81"}) {
    EXPECT_THROWS_WITH(
        unpickle(std::string("\x80\x04") + op, "t"),
        c10::ValueError,
        "is not allowed");
  }
  // GLOBAL (protocol 2) of builtins.eval
  EXPECT_THROWS_WITH(
      unpickle(
          std::string(
              "\x80\x02"
              "cbuiltins\neval\n.",
              18),
          "t"),
      c10::ValueError,
      "the global 'builtins.eval' is not allowed");
  // An allowed global called with arguments of the wrong kind.
  EXPECT_THROWS_WITH(
      unpickle(
          std::string(
              "\x80\x02"
              "ctorch\nSize\n"
              "X\x01\x00\x00\x00"
              "a"
              "\x85R.",
              23),
          "t"),
      c10::ValueError,
      "torch.Size's argument must be a tuple, found a str");
}

TEST(PickleTest, TruncatedAndDamagedPicklesAreErrors) {
  // Every prefix of every valid pickle is refused, never a crash.
  for (const char* hex :
       {kDictOfPlain,
        kArrayF4,
        kArrayU8F2C8,
        kProtocol5Array,
        kProtocol2Bytes,
        kScalars,
        kSize,
        kOrderedDict}) {
    const std::string bytes = from_hex(hex);
    for (size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_THROW(unpickle(bytes.substr(0, n), "t"), c10::ValueError)
          << "prefix of " << n << " bytes";
    }
    // And every single-byte change either reads or is refused cleanly.
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
      try {
        (void)pickled_to_json(unpickle(damaged, "t"), "t");
      } catch (const c10::ValueError&) {
      }
    }
  }
  EXPECT_THROWS_WITH(
      unpickle(from_hex(kSize).substr(0, 20), "the file"),
      c10::ValueError,
      "invalid pickle in the file at byte 19: expected 1 more bytes, only 0 "
      "remain");
  EXPECT_THROWS_WITH(
      unpickle("not a pickle", "t"), c10::ValueError, "is not allowed");
}

TEST(PickleTest, RefusesArraysWhoseBytesDoNotMatchTheirShape) {
  // kArrayF4 with its shape (2, 3) made (2, 4): 32 bytes needed, 24 given.
  std::string bytes = from_hex(kArrayF4);
  const size_t at = bytes.find(std::string("K\x02K\x03", 4));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] = '\x04';
  EXPECT_THROWS_WITH(
      unpickle(bytes, "t"),
      c10::ValueError,
      "a numpy array of shape [2, 4] and dtype Float needs 32 bytes, but its "
      "data has 24");
}

TEST(PickleTest, RefusesSelfReferenceDeepNestingAndBadText) {
  // l = []; l.append(l)
  EXPECT_THROWS_WITH(
      unpickle(
          std::string(
              "\x80\x04]\x94h\x00"
              "a.",
              8),
          "t"),
      c10::ValueError,
      "a container holds itself");
  EXPECT_THROWS_WITH(
      unpickle(
          "\x80\x04" + std::string(100, ']') + std::string(99, 'a') + ".", "t"),
      c10::ValueError,
      "nesting deeper than 64 levels");
  EXPECT_THROWS_WITH(
      unpickle(std::string("\x80\x04\x8c\x01\xff.", 6), "t"),
      c10::ValueError,
      "a str that is not valid UTF-8");
  // A tuple key has no JSON form.
  EXPECT_THROWS_WITH(
      pickled_to_json(
          unpickle(std::string("\x80\x04}K\x01\x85K\x02s.", 10), "t"), "t"),
      c10::ValueError,
      "t: a dict key of type tuple has no JSON form");
}

}  // namespace
}  // namespace pickle_test
