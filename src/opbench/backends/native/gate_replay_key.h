// opbench's C++ gate: launch replay's call signatures. A recorded plan is repeated only
// for calls whose signature (gate_replay.h keys its plans by it) matches the recorded
// call's in everything the Python path's launches depend on. Included by gate_replay.h
// alone: one translation unit (the anonymous namespace is gate.cpp's).
#pragma once

#include <torch/extension.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

// The call's signature, appended to ``key`` as 64-bit words: every argument's kind and
// value, and of every tensor its dtype, device, layout flags, sizes, strides, storage
// offset, address modulo 16 (what Triton specialises on) and which earlier tensor of the
// call shares its storage, at what distance (an in-place call on an alias takes another
// path). ``tensors`` gets the call's tensors in order (an undefined one for None in a
// tensor slot), as the recorder numbers them. False for an argument replay does not read.
void key_word(std::string& key, int64_t w) {
  key.append(reinterpret_cast<const char*>(&w), sizeof(w));
}

bool key_tensor(const at::Tensor& t, std::string& key, std::vector<at::Tensor>& tensors) {
  if (!t.defined()) {
    key_word(key, -1);
    tensors.push_back(t);
    return true;
  }
  if (t.layout() != at::kStrided || t.is_conj() || t.is_neg()) return false;
  key_word(key, static_cast<int64_t>(t.scalar_type()));
  key_word(key, static_cast<int64_t>(t.device().type()));
  key_word(key, t.device().index());
  key_word(key, t.unsafeGetTensorImpl()->is_wrapped_number());
  key_word(key, t.dim());
  for (const int64_t x : t.sizes()) key_word(key, x);
  for (const int64_t x : t.strides()) key_word(key, x);
  key_word(key, t.storage_offset());
  const auto p = reinterpret_cast<uintptr_t>(t.data_ptr());
  key_word(key, static_cast<int64_t>(p % 16));
  int64_t alias = -1, delta = 0;
  const void* storage = t.storage().data();
  for (size_t i = 0; i < tensors.size() && storage != nullptr; ++i) {
    const at::Tensor& o = tensors[i];
    if (o.defined() && o.storage().data() == storage) {
      alias = static_cast<int64_t>(i);
      delta = static_cast<int64_t>(p - reinterpret_cast<uintptr_t>(o.data_ptr()));
      break;
    }
  }
  key_word(key, alias);
  key_word(key, delta);
  tensors.push_back(t);
  return true;
}

bool key_value(const c10::IValue& v, std::string& key, std::vector<at::Tensor>& tensors) {
  if (v.isNone()) {
    key_word(key, 0);
  } else if (v.isTensor()) {
    key_word(key, 1);
    return key_tensor(v.toTensor(), key, tensors);
  } else if (v.isInt()) {
    key_word(key, 2);
    key_word(key, v.toInt());
  } else if (v.isDouble()) {
    key_word(key, 3);
    const double d = v.toDouble();
    int64_t bits = 0;
    std::memcpy(&bits, &d, sizeof(bits));
    key_word(key, bits);
  } else if (v.isBool()) {
    key_word(key, 4);
    key_word(key, v.toBool());
  } else if (v.isString()) {
    key_word(key, 5);
    const std::string_view sv = v.toStringView();
    key_word(key, static_cast<int64_t>(sv.size()));
    key.append(sv.data(), sv.size());
  } else if (v.isDevice()) {
    key_word(key, 6);
    key_word(key, static_cast<int64_t>(v.toDevice().type()));
    key_word(key, v.toDevice().index());
  } else if (v.isList()) {  // ints, floats, bools, tensors, optional tensors
    const auto list = v.toListRef();
    key_word(key, 7);
    key_word(key, static_cast<int64_t>(list.size()));
    for (const c10::IValue& x : list) {
      if (x.isList() || !key_value(x, key, tensors)) return false;
    }
  } else {
    return false;  // a Generator, a complex number, a stream...
  }
  return true;
}

bool replay_key(const torch::jit::Stack& stack, size_t base, size_t n, std::string& key,
                std::vector<at::Tensor>& tensors) {
  bool cuda = false;
  for (size_t i = base; i < base + n; ++i) {
    if (!key_value(stack[i], key, tensors)) return false;
  }
  for (const at::Tensor& t : tensors) cuda = cuda || (t.defined() && t.is_cuda());
  return cuda;
}

}  // namespace
