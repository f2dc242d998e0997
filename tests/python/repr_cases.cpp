// Builds a fixed set of named cases and prints one JSON object to stdout:
//
//   {"repr":    {case: td.repr(), ...},      // PrintOptions().compact(false)
//    "compact": {case: td.repr(), ...},      // the default options
//    "options": {case: td.repr(), ...},      // other print options
//    "keys":   {case: [key, ...], ...},     // key: "a" or ["a", "b"]
//    "errors": {case: e.msg(), ...}}
//
// test_parity.py builds the same cases with Python's tensordict and compares
// every string. Keep the two files in step: a case added here must be added
// there under the same name (the script reports cases missing on either side).

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using tensordict::Item;
using tensordict::Json;
using tensordict::KeyError;
using tensordict::lazy_stack;
using tensordict::NestedKey;
using tensordict::NonTensorData;
using tensordict::NonTensorStack;
using tensordict::PrintOptions;
using tensordict::PrintOptionsGuard;
using tensordict::SortKeys;
using tensordict::TensorDict;

namespace {

// An empty dict of the given batch size. Spelled out because `TensorDict({})`
// and `TensorDict({2})` would pick the item-list constructor.
TensorDict empty_td(std::vector<int64_t> batch_size) {
  return TensorDict(c10::IntArrayRef(batch_size));
}

at::Tensor zeros(
    std::vector<int64_t> shape, c10::ScalarType dtype = at::kFloat) {
  return torch::zeros(shape, torch::TensorOptions().dtype(dtype));
}

// --- repr cases --------------------------------------------------------------

Json lazy_cases();

Json repr_cases() {
  Json out = Json::object();

  out["empty"] = TensorDict().repr();

  out["empty_batch"] = empty_td({2, 3}).repr();

  {
    TensorDict td(
        {{"f32", zeros({4, 3})},
         {"f64", zeros({4}, at::kDouble)},
         {"f16", zeros({4}, at::kHalf)},
         {"bf16", zeros({4}, at::kBFloat16)},
         {"i64", zeros({4}, at::kLong)},
         {"i32", zeros({4, 2}, at::kInt)},
         {"i16", zeros({4}, at::kShort)},
         {"i8", zeros({4}, at::kChar)},
         {"u8", zeros({4}, at::kByte)},
         {"flag", zeros({4, 2}, at::kBool)},
         {"c64", zeros({4, 1}, at::kComplexFloat)},
         {"c128", zeros({4}, at::kComplexDouble)}},
        /*batch_size=*/{4});
    out["dtypes"] = td.repr();
  }

  {
    TensorDict td(
        {{"obs", zeros({4, 3})},
         {"next",
          {{"reward", zeros({4, 1})},
           {"done", zeros({4, 1}, at::kBool)},
           {"info", {{"count", zeros({4}, at::kLong)}}}}}},
        /*batch_size=*/{4});
    out["nested"] = td.repr();
  }

  {
    // A nested dict with more batch dims than its parent.
    TensorDict td({{"x", zeros({2})}}, /*batch_size=*/{2});
    td.set("sub", TensorDict({{"y", zeros({2, 5, 3})}}, /*batch_size=*/{2, 5}));
    out["nested_deeper_batch"] = td.repr();
  }

  {
    TensorDict td({{"x", zeros({2})}}, /*batch_size=*/{2});
    td.set("sub", empty_td({2}));
    td.set("deep", TensorDict({{"inner", empty_td({2})}}, /*batch_size=*/{2}));
    out["empty_nested"] = td.repr();
  }

  {
    TensorDict td;
    td.set_non_tensor("s", "text");
    td.set_non_tensor("spaces", "with spaces and 'quotes'");
    td.set_non_tensor("blank", "");
    td.set_non_tensor("multiline", "line1\nline2");
    td.set_non_tensor("unicode", "h\u00e9llo \u2713");
    out["non_tensor_strings"] = td.repr();
  }

  {
    TensorDict td;
    td.set_non_tensor("int", 3);
    td.set_non_tensor("neg", -7);
    td.set_non_tensor("big", 12345678901234LL);
    td.set_non_tensor("zero", 0);
    td.set_non_tensor("half", 2.5);
    td.set_non_tensor("tenth", 0.1);
    td.set_non_tensor("one", 1.0);
    td.set_non_tensor("negzero", -0.0);
    td.set_non_tensor("small", 0.0001);
    out["non_tensor_numbers"] = td.repr();
  }

  {
    // Floats where Python's repr switches between fixed and exponent form:
    // exponent when the decimal exponent is < -4 or >= 16.
    TensorDict td;
    td.set_non_tensor("e15", 1e15);
    td.set_non_tensor("e16", 1e16);
    td.set_non_tensor("e_5", 1e-5);
    td.set_non_tensor("e_7", 2.5e-7);
    td.set_non_tensor("mixed", Json::array({123456.789, 1.5e300, -3.25e-10}));
    out["non_tensor_float_format"] = td.repr();
  }

  {
    TensorDict td;
    td.set_non_tensor("list", Json::array({1, 2}));
    td.set_non_tensor("empty_list", Json::array());
    td.set_non_tensor(
        "nested_list",
        Json::array(
            {Json::array({1, "a"}), Json::array({true, nullptr}), 2.5}));
    td.set_non_tensor(
        "quotes",
        Json::array({"it's", "say \"hi\"", "both ' and \"", "tab\there"}));
    // Objects keep insertion order, as Python dicts do.
    td.set_non_tensor("obj", Json{{"k", Json::array({1, 2})}});
    td.set_non_tensor("unsorted_obj", Json{{"b", 1}, {"a", 2}, {"_", 3}});
    td.set_non_tensor("empty_obj", Json::object());
    td.set_non_tensor(
        "nested_obj",
        Json{
            {"a", Json{{"b", nullptr}}},
            {"c", "it's"},
            {"d", Json::array({false, 1.5})}});
    out["non_tensor_containers"] = td.repr();
  }

  {
    // Python's repr escapes non-printable characters inside containers.
    TensorDict td;
    td.set_non_tensor(
        "escapes",
        Json::array(
            {"back\\slash",
             "cr\r",
             "bell\x07",
             "del\x7f",
             "zw\u200b",
             "caf\u00e9"}));
    out["non_tensor_string_escapes"] = td.repr();
  }

  {
    TensorDict td;
    td.set_non_tensor("none", nullptr);
    td.set_non_tensor("yes", true);
    td.set_non_tensor("no", false);
    out["non_tensor_null_bool"] = td.repr();
  }

  {
    // Non-tensor data in a batched dict takes the dict's batch size.
    TensorDict td({{"t", zeros({3})}}, /*batch_size=*/{3});
    td.set_non_tensor("s", "text");
    td.set_non_tensor({"sub", "n"}, 5);
    out["non_tensor_batched"] = td.repr();
  }

  {
    TensorDict td({{"t", zeros({3})}}, /*batch_size=*/{3});
    td.set("st", NonTensorStack({"x", "y", "z"}));
    td.set({"sub", "nums"}, NonTensorStack({1, 2, 3}));
    td.set({"sub", "deeper", "words"}, NonTensorStack({"it's", "b", "c"}));
    out["non_tensor_stack"] = td.repr();
  }

  {
    TensorDict td(
        {{"a", zeros({2, 3})}, {"n", {{"x", zeros({2})}}}},
        /*batch_size=*/{2},
        c10::Device("cpu"));
    td.set_non_tensor("s", "hi");
    td.set({"n", "st"}, NonTensorStack({"p", "q"}));
    out["device_cpu"] = td.repr();
  }

  {
    TensorDict td(
        {{"a", zeros({4, 2})}, {"n", {{"x", zeros({4})}}}},
        /*batch_size=*/{4},
        c10::Device("meta"));
    td.set_non_tensor("s", "hi");
    td.set("st", NonTensorStack({"x", "y", "z", "w"}));
    out["device_meta"] = td.repr();
  }

  {
    // Names are not part of the repr.
    TensorDict td(
        {{"a", zeros({2, 3, 4})}, {"n", {{"x", zeros({2, 3})}}}},
        /*batch_size=*/{2, 3},
        std::nullopt,
        {"x", "y"});
    out["names"] = td.repr();
  }

  {
    TensorDict td(
        {{"b", zeros({2})},
         {"a", zeros({2})},
         {"B", zeros({2})},
         {"_x", zeros({2})},
         {"a1", zeros({2})},
         {"A_", zeros({2})},
         {"10", zeros({2})},
         {"9", zeros({2})},
         {"nested", {{"z", zeros({2})}, {"Z", zeros({2})}, {"m", zeros({2})}}}},
        /*batch_size=*/{2});
    out["sorted_keys"] = td.repr();
  }

  // The compact form keeps a level on one line up to 80 columns (80 here,
  // 81 in wrap_81); columns count code points, not UTF-8 bytes.
  using SizedCase = std::pair<std::string, size_t>;
  for (const auto& [name, n] :
       std::vector<SizedCase>{{"wrap_80", 24}, {"wrap_81", 25}}) {
    TensorDict td(
        {{std::string(n, 'k'), zeros({2, 3})}, {"b", zeros({2, 4}, at::kLong)}},
        /*batch_size=*/{2});
    out[name] = td.repr();
  }
  {
    std::string key;
    for (int i = 0; i < 24; ++i) {
      key += "\u00e9";
    }
    TensorDict td(
        {{key, zeros({2, 3})}, {"b", zeros({2, 4}, at::kLong)}},
        /*batch_size=*/{2});
    out["wrap_80_unicode"] = td.repr();
  }
  for (const auto& [name, n] :
       std::vector<SizedCase>{{"wrap_nested_80", 12}, {"wrap_nested_81", 13}}) {
    TensorDict td(
        {{"outer",
          {{std::string(n, 'k'), zeros({2, 3})},
           {"inner",
            {{std::string(n, 'x'), zeros({2, 4}, at::kLong)},
             {"y", zeros({2, 1, 1, 1})}}}}},
         {"zz", zeros({2})}},
        /*batch_size=*/{2});
    out[name] = td.repr();
  }

  {
    TensorDict td = empty_td({4});
    for (int64_t i = 0; i < 8; ++i) {
      td.set("key_number_" + std::to_string(i), zeros({4, i}));
    }
    out["wrap_long"] = td.repr();
  }

  {
    TensorDict td = empty_td({4});
    for (int64_t i = 0; i < 6; ++i) {
      td.set({"nested_level_one", "key_" + std::to_string(i)}, zeros({4, i}));
    }
    for (int64_t i = 0; i < 9; ++i) {
      td.set(
          {"other", "deeper", "k" + std::to_string(i)},
          zeros({4, 3}, at::kChar));
    }
    td.set("z", zeros({4}));
    out["wrap_deep"] = td.repr();
  }

  {
    // A tensor off the cpu in a dict without a device: "@meta".
    TensorDict td(
        {{"a", torch::zeros({2, 3}, torch::TensorOptions().device("meta"))},
         {"n", {{"x", zeros({2})}}}},
        /*batch_size=*/{2});
    out["tensor_device_no_dict_device"] = td.repr();
  }

  out.update(lazy_cases());
  return out;
}

Json lazy_cases() {
  Json out = Json::object();

  {
    TensorDict a(
        {{"x", zeros({3}, at::kInt)},
         {"y", zeros({4})},
         {"n", {{"q", zeros({2})}}},
         {"s", "hi"},
         {"only_a", zeros({1})}});
    TensorDict b(
        {{"x", zeros({5})},
         {"y", zeros({4})},
         {"n", {{"q", zeros({2, 1})}}},
         {"s", "ho"},
         {"only_b", {{"deep", zeros({2})}}}});
    out["lazy_exclusive"] = lazy_stack({a, b}).repr();
  }

  {
    TensorDict member({{"x", zeros({3, 2})}}, /*batch_size=*/{3});
    out["lazy_stack_dim1"] = lazy_stack({member, member.clone()}, 1).repr();
  }

  out["lazy_ragged_rank"] = lazy_stack({TensorDict({{"x", zeros({3})}}),
                                        TensorDict({{"x", zeros({3, 2})}})})
                                .repr();

  // The last element holding a non-tensor names the entry.
  out["lazy_mixed_tensor_first"] =
      lazy_stack({TensorDict({{"x", zeros({3})}}),
                  TensorDict({{"x", "s"}}),
                  TensorDict({{"x", NonTensorData(3)}})})
          .repr();
  out["lazy_mixed_str_first"] =
      lazy_stack({TensorDict({{"x", "s"}}), TensorDict({{"x", zeros({3})}})})
          .repr();

  out["lazy_promoted"] =
      lazy_stack({TensorDict({{"a", zeros({2}, at::kLong)}}),
                  TensorDict({{"a", zeros({2}, at::kHalf)}})})
          .repr();

  {
    const c10::Device cpu("cpu");
    out["lazy_device_cpu"] =
        lazy_stack({TensorDict({{"x", zeros({3})}}, {}, cpu),
                    TensorDict({{"x", zeros({3})}}, {}, cpu)})
            .repr();
  }

  {
    TensorDict nested({{"a", zeros({2, 1})}}, /*batch_size=*/{2});
    out["lazy_nested_extra_dims"] =
        lazy_stack(
            {TensorDict({{"n", nested}}), TensorDict({{"n", nested.clone()}})})
            .repr();
  }

  out["lazy_nested_common"] =
      lazy_stack({TensorDict({{"n", {{"a", zeros({1})}, {"b", zeros({2})}}}}),
                  TensorDict({{"n", {{"a", zeros({1})}}}})})
          .repr();

  {
    TensorDict st(
        {{"a", zeros({2, 1})}, {"s", NonTensorStack({"a", "b"})}},
        /*batch_size=*/{2});
    out["lazy_non_tensor_stack"] = lazy_stack({st, st.clone()}).repr();
  }

  {
    std::vector<Item> first;
    std::vector<Item> second;
    for (int i = 0; i < 4; ++i) {
      first.emplace_back("long_key_name_" + std::to_string(i), zeros({3}));
      second.emplace_back("long_key_name_" + std::to_string(i), zeros({3}));
    }
    for (int i = 0; i < 3; ++i) {
      first.emplace_back("exclusive_number_" + std::to_string(i), zeros({2}));
    }
    for (int i = 0; i < 5; ++i) {
      second.emplace_back("other_exclusive_" + std::to_string(i), zeros({2}));
    }
    out["lazy_wrap_exclusive"] =
        lazy_stack({TensorDict(first), TensorDict(second)}).repr();
  }

  out["lazy_short_exclusive"] =
      lazy_stack({TensorDict({{"a", zeros({1})}}),
                  TensorDict({{"a", zeros({1})}, {"bb", zeros({1})}})})
          .repr();

  // A dict in some elements only: the compact form fails and the repr
  // falls back to the detailed one.
  out["lazy_mixed_dict"] = lazy_stack({TensorDict({{"x", {{"a", zeros({1})}}}}),
                                       TensorDict({{"x", zeros({3})}})})
                               .repr();

  return out;
}

// Python's detailed repr raises on these (it stacks the leaves).
Json compact_only_cases() {
  Json out = Json::object();
  out["lazy_devices"] =
      lazy_stack(
          {TensorDict({{"x", zeros({3})}}),
           TensorDict(
               {{"x",
                 torch::zeros({3}, torch::TensorOptions().device("meta"))}})})
          .repr();
  return out;
}

// --- print options cases -----------------------------------------------------

Json options_cases() {
  Json out = Json::object();
  const TensorDict td(
      {{"b", zeros({2})},
       {"a", {{"y", zeros({2, 3}, at::kLong)}, {"x", "text"}}}},
      /*batch_size=*/{2},
      c10::Device("cpu"));
  const std::vector<std::pair<std::string, PrintOptions>> cases = {
      {"insertion", PrintOptions().sort_keys(SortKeys::kInsertion)},
      {"no_dtype", PrintOptions().show_dtype(false)},
      {"no_batch_size", PrintOptions().show_batch_size(false)},
      {"no_device", PrintOptions().show_device(false)},
      {"detailed_insertion",
       PrintOptions().compact(false).sort_keys(SortKeys::kInsertion)},
      {"detailed_no_batch_size_no_device",
       PrintOptions().compact(false).show_batch_size(false).show_device(false)},
  };
  for (const auto& [name, options] : cases) {
    PrintOptionsGuard guard(options);
    out[name] = td.repr();
    out[name + "_lazy"] = lazy_stack({td, td.clone()}).repr();
  }
  return out;
}

// --- keys cases --------------------------------------------------------------

TensorDict keys_dict() {
  TensorDict td(
      {{"b", zeros({3})},
       {"a", {{"z", zeros({3})}, {"y", "text"}, {"x", {{"w", zeros({3, 2})}}}}},
       {"s", "str"},
       {"e", empty_td({3})},
       {"A", zeros({3})}},
      /*batch_size=*/{3});
  td.set({"a", "st"}, NonTensorStack({"p", "q", "r"}));
  return td;
}

Json key_json(const NestedKey& key) {
  if (key.size() == 1) {
    return std::string(key[0]);
  }
  return key.to_vector();
}

Json keys_cases() {
  Json out = Json::object();
  const TensorDict td = keys_dict();
  for (bool nested : {false, true}) {
    for (bool leaves : {false, true}) {
      for (bool sort : {false, true}) {
        Json keys = Json::array();
        for (const NestedKey& key : td.keys(nested, leaves, sort)) {
          keys.push_back(key_json(key));
        }
        const std::string name = std::string("nested") + (nested ? "1" : "0") +
                                 "_leaves" + (leaves ? "1" : "0") + "_sort" +
                                 (sort ? "1" : "0");
        out[name] = keys;
      }
    }
  }
  return out;
}

// --- error cases -------------------------------------------------------------

// Runs `f` and returns the message of the c10::Error it throws (KeyError
// derives from it); exits if it throws nothing, so a missing error cannot
// pass unnoticed.
std::string error_of(const std::string& name, const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.msg();
  }
  std::cerr << "repr_cases: error case '" << name << "' did not throw\n";
  std::exit(2);
}

TensorDict ab() {
  return TensorDict({{"a", zeros({4})}, {"b", zeros({4})}}, /*batch_size=*/{4});
}

Json errors_cases() {
  Json out = Json::object();
  auto add = [&out](const std::string& name, const std::function<void()>& f) {
    out[name] = error_of(name, f);
  };

  add("lock_set_new_key", [] {
    TensorDict td = ab();
    td.lock_();
    td.set("c", zeros({4}));
  });
  add("lock_del", [] {
    TensorDict td = ab();
    td.lock_();
    td.del_("a");
  });
  add("lock_pop", [] {
    TensorDict td = ab();
    td.lock_();
    (void)td.pop("a");
  });
  add("lock_rename_key", [] {
    TensorDict td = ab();
    td.lock_();
    td.rename_key_("a", "c");
  });
  add("batch_mismatch", [] { ab().set("c", zeros({3})); });
  add("batch_mismatch_2d", [] { ab().set("a", zeros({5, 4})); });
  add("batch_mismatch_constructor", [] {
    TensorDict td({{"x", zeros({3})}}, /*batch_size=*/{4});
  });
  add("missing_key", [] { (void)ab().get("zz"); });
  add("missing_key_empty", [] { (void)TensorDict().get("zz"); });
  add("missing_key_unsorted", [] {
    TensorDict td(
        {{"b", zeros({4})}, {"B", zeros({4})}, {"a", zeros({4})}}, {4});
    (void)td.get("zz");
  });
  add("names_length", [] {
    TensorDict td(c10::IntArrayRef({2, 3}), std::nullopt, {"x"});
  });
  add("names_length_set", [] { empty_td({2, 3}).set_names({"x"}); });
  add("names_non_unique", [] {
    TensorDict td(c10::IntArrayRef({2, 3}), std::nullopt, {"x", "x"});
  });
  add("refine_names_conflict", [] {
    TensorDict td(c10::IntArrayRef({2, 3}), std::nullopt, {"x", std::nullopt});
    td.refine_names({"y", "z"});
  });
  add("flatten_keys_collision_leaf_last", [] {
    TensorDict td({{"a", {{"b", zeros({4})}}}, {"a.b", zeros({4})}}, {4});
    (void)td.flatten_keys();
  });
  add("flatten_keys_collision_nested_last", [] {
    TensorDict td({{"a.b", zeros({4})}, {"a", {{"b", zeros({4})}}}}, {4});
    (void)td.flatten_keys();
  });
  add("rename_key_safe_existing",
      [] { ab().rename_key_("a", "b", /*safe=*/true); });
  return out;
}

}  // namespace

int main() {
  Json out;
  {
    PrintOptionsGuard detailed(PrintOptions().compact(false));
    out["repr"] = repr_cases();
  }
  // The default options: the compact form.
  out["compact"] = repr_cases();
  out["compact"].update(compact_only_cases());
  out["options"] = options_cases();
  out["keys"] = keys_cases();
  out["errors"] = errors_cases();
  std::cout << out.dump(2) << '\n';
  return 0;
}
