// opbench's C++ gate: the native path. An elementwise call on CUDA that the operator's
// NativeSpec (from Python, opbench.backends.native.spec) declares is launched here with
// cuLaunchKernel on a kernel Triton compiled (the same kernel the Python path launches for
// that call): the call's checks, its kernel variant (compiled once per key, under the
// GIL) and the launch. Included by gate.cpp alone: one translation unit (the anonymous
// namespace is gate.cpp's).
#pragma once

#include <torch/extension.h>

#include <ATen/ScalarOps.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gate_driver.h"
#include "gate_strided.h"

namespace py = pybind11;

namespace {

// ------------------------------------------------------------------ the native path

// operand modes, as opbench.kernels._lib.pointwise names them
constexpr int kAbsent = 0, kTensor = 1, kElement = 2, kNumber = 3;

// NativeSpec::other, in spec.OTHER_KINDS's order
constexpr int kOperand = 0, kMask = 1, kSource = 2;

struct NativeSpec {
  int operands = 0;  // 0: the operator has no native path
  bool inplace = false;
  std::array<int, 2> param_args{-1, -1};  // argument positions passed as p0 / p1
  std::array<double, 2> param_defaults{0.0, 0.0};
  int choice_arg = -1;  // a string argument that picks the kernel (gelu's approximate)
  std::vector<std::string> choices;
  // or a number argument's exact values (pow's exponent); any other value: the last kernel
  std::vector<double> choice_numbers;
  std::vector<int> none_args;  // arguments that must be None (clone's memory_format)
  // a bool (self_is_result): when true, a negative p0 goes to Python (eager's error)
  int is_result_arg = -1;
  // what the second operand may be (spec.OTHER_KINDS): an operand (a tensor promoting
  // into self, a 0-dim tensor, a number), a bool mask that broadcasts to self
  // (masked_fill's), or a source tensor on self's device promoting into it (copy_'s)
  int other = kOperand;
  // p0 is a fill value: a finite one past self's dtype goes to Python (eager's overflow
  // error)
  bool fill_value = false;
  // p0 / p1 must be given (clamp's bounds: a None bound is another kernel)
  bool params_required = false;
  // integer tensors too (clamp keeps an integer self's dtype for integer numbers)
  bool integers = false;
  int64_t max_numel = 0;
  int64_t spread = 132, min_block = 128, max_block = 1024;
  py::object compile;  // (choice, a dtype code, b mode, b dtype code, block, div16) -> tuple|None
  // the strided kernel, for broadcast and strided calls (see plan_strided); None: such
  // calls go to Python. (choice, a dtype code, b mode, b dtype code, block, ndim, idx64)
  py::object compile_strided;
  bool strided = false;  // compile_strided is set (read without the GIL)
};

struct Variant {
  CUfunction fn = nullptr;
  unsigned warps = 0;
  unsigned shared = 0;
  int params = 0;
  bool usable = false;
};

bool is_native_float(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble;
}

bool is_native_int(at::ScalarType t) {
  return t == at::kLong || t == at::kInt || t == at::kShort || t == at::kChar || t == at::kByte;
}

// 2^53: integers of smaller magnitude a float64 holds exactly (the kernel receives every
// number as one; the Python path refuses larger integer bounds and fill values)
constexpr int64_t kExactInt = int64_t{1} << 53;

// A number that keeps an integer self's dtype, as the Python path's result_type decides:
// an int (or a bool) under kExactInt. A float number promotes the result to a floating
// type, which the gate's output (self's dtype) is not: that call goes to Python.
bool integer_number(const c10::IValue& v) {
  if (v.isNone() || v.isBool()) return true;  // None: the parameter's default
  if (!v.isInt()) return false;
  const int64_t x = v.toInt();
  return x > -kExactInt && x < kExactInt;
}

// A tensor operand of type ``b`` beside ``a`` leaves the result ``a``'s type, which the
// gate's output has (an f16 bias beside f32 activations; not the other way round): both
// floating or both integer, and ``a`` the wider. The kernel loads b as its own type.
bool promotes_into(at::ScalarType b, at::ScalarType a) {
  if (b == a) return true;
  const bool floats = is_native_float(a) && is_native_float(b);
  const bool ints = is_native_int(a) && is_native_int(b);
  return (floats || ints) && c10::promoteTypes(a, b) == a;
}

// The largest finite value of a floating dtype (torch.finfo(dtype).max); an integer
// dtype's fill values are never launched (the spec's integers is off for masked_fill).
double finite_max(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return 65504.0;
    case at::kBFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::max());
    case at::kFloat: return static_cast<double>(std::numeric_limits<float>::max());
    default: return std::numeric_limits<double>::max();
  }
}

bool is_real(at::ScalarType t) {
  return is_native_float(t) || is_native_int(t) || t == at::kBool;
}

// The value of a 0-dim CPU tensor, as the Python path's float(t.item()) reads it.
bool cpu_number(const at::Tensor& t, double& out) {
  const void* p = t.const_data_ptr();
  switch (t.scalar_type()) {
    case at::kDouble: out = *static_cast<const double*>(p); return true;
    case at::kFloat: out = *static_cast<const float*>(p); return true;
    case at::kHalf: out = static_cast<float>(*static_cast<const c10::Half*>(p)); return true;
    case at::kBFloat16: out = static_cast<float>(*static_cast<const c10::BFloat16*>(p)); return true;
    case at::kLong: out = static_cast<double>(*static_cast<const int64_t*>(p)); return true;
    case at::kInt: out = *static_cast<const int32_t*>(p); return true;
    case at::kShort: out = *static_cast<const int16_t*>(p); return true;
    case at::kChar: out = *static_cast<const int8_t*>(p); return true;
    case at::kByte: out = *static_cast<const uint8_t*>(p); return true;
    case at::kBool: out = *static_cast<const bool*>(p) ? 1.0 : 0.0; return true;
    default: return false;
  }
}

// A Scalar argument (alpha, a threshold) as a double; false for complex or other kinds.
bool scalar_arg(const c10::IValue& v, double fallback, double& out) {
  if (v.isNone()) { out = fallback; return true; }
  if (v.isDouble()) { out = v.toDouble(); return true; }
  if (v.isInt()) { out = static_cast<double>(v.toInt()); return true; }
  if (v.isBool()) { out = v.toBool() ? 1.0 : 0.0; return true; }
  return false;
}

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// One operator's native path: its spec, the kernel variants compiled for it (guarded by
// ``mu``, never held while Python runs) and how many were compiled.
struct NativePath {
  NativeSpec spec;
  std::mutex mu;
  std::unordered_map<uint64_t, Variant> variants;
  std::atomic<int64_t> n_compiled{0};
};

// The flat kernel's arguments (a, b, c, out, n, na, nb, nc, p0, p1), and the strided
// kernel's (a, b, c, out, its 20 integers, na, nb, nc, p0, p1); then Triton's scratch
// pointers, passed as null.
constexpr int kFlatParams = 10, kStridedParams = 29, kMaxParams = 32;

// ``strided``: the strided kernel for ``ndim`` merged dims and ``idx64`` indexing
// (compile_strided), else the flat one (compile).
Variant compile_variant(NativePath& np, uint64_t key, int choice, at::ScalarType a_type, int mode_b,
                        at::ScalarType b_type, int64_t block, bool div16, bool strided,
                        int ndim, bool idx64) {
  Variant v;
  {
    py::gil_scoped_acquire gil;
    const py::object& fn = strided ? np.spec.compile_strided : np.spec.compile;
    if (!fn.is_none()) {
      py::object r = strided ? fn(choice, static_cast<int>(a_type), mode_b,
                                  static_cast<int>(b_type), block, ndim, idx64)
                             : fn(choice, static_cast<int>(a_type), mode_b,
                                  static_cast<int>(b_type), block, div16);
      if (!r.is_none()) {
        auto t = r.cast<py::tuple>();
        v.fn = reinterpret_cast<CUfunction>(t[0].cast<uintptr_t>());
        v.warps = t[1].cast<unsigned>();
        v.shared = t[2].cast<unsigned>();
        v.params = t[3].cast<int>();
        const int least = strided ? kStridedParams : kFlatParams;
        v.usable = v.fn != nullptr && v.params >= least && v.params <= least + 6 &&
                   v.params <= kMaxParams;
      }
    }
  }
  np.n_compiled++;
  std::lock_guard<std::mutex> lock(np.mu);
  np.variants.emplace(key, v);
  return v;
}

// The native path; false (nothing done, the stack untouched) for any call it does not
// take, which then goes to the Python wrapper. ``dry``: only read the call, and say
// whether it would be launched here (the stack untouched; no compile, no launch).
// Contiguous operands of one shape take the flat kernel; where the spec has a strided
// kernel, a broadcast or strided call that plan_strided plans takes that one.
bool try_native(NativePath& np, const std::string& name, size_t n_args, bool any_device,
                torch::jit::Stack& stack, bool dry = false) {
  const NativeSpec& sp = np.spec;
  const size_t base = stack.size() - n_args;
  const c10::IValue& v0 = stack[base];
  if (!v0.isTensor()) return false;
  const at::Tensor& a = v0.toTensor();
  if ((!a.is_cuda() && !(dry && any_device)) || a.dim() == 0) return false;
  bool flat = a.is_contiguous();
  if (!flat && !sp.strided) return false;
  const at::ScalarType a_type = a.scalar_type();
  const bool integral = is_native_int(a_type);
  if (!is_native_float(a_type) && !(sp.integers && integral)) return false;
  if (a.numel() == 0) return false;
  const uint64_t pa = reinterpret_cast<uint64_t>(a.data_ptr());
  if (pa & 15) return false;

  int mode_b = kAbsent;
  at::ScalarType b_type = a_type;
  uint64_t pb = pa;
  double nb = 0.0;
  const at::Tensor* b_strided = nullptr;  // a full tensor b the flat kernel cannot read
  if (sp.operands == 2) {
    const c10::IValue& v1 = stack[base + 1];
    if (v1.isTensor()) {
      const at::Tensor& b = v1.toTensor();
      if (sp.other == kMask && b.scalar_type() != at::kBool) return false;  // Python's error
      if (sp.other == kSource &&
          (b.device() != a.device() || !promotes_into(b.scalar_type(), a_type))) {
        return false;  // a copy between devices, or one that narrows: Python's
      }
      if (b.dim() == 0) {
        if (!is_real(b.scalar_type())) return false;
        // a floating 0-dim tensor promotes an integer self
        if (integral && !at::isIntegralType(b.scalar_type(), /*includeBool=*/true)) return false;
        if (b.is_cpu()) {
          if (!cpu_number(b, nb)) return false;
          if (integral && !(std::abs(nb) < static_cast<double>(kExactInt))) return false;
          mode_b = kNumber;
        } else if (b.device() == a.device()) {
          pb = reinterpret_cast<uint64_t>(b.data_ptr());
          if (pb & 15) return false;
          mode_b = kElement;
          b_type = b.scalar_type();
        } else {
          return false;
        }
      } else if ((sp.other == kMask ? b.scalar_type() == at::kBool
                                    : promotes_into(b.scalar_type(), a_type)) &&
                 b.device() == a.device()) {
        pb = reinterpret_cast<uint64_t>(b.data_ptr());
        if (pb & 15) return false;
        b_type = b.scalar_type();
        if (flat && b.sizes().equals(a.sizes()) && b.is_contiguous()) {
          if (sp.inplace && pb != pa) {
            // a partial overlap of self and other: eager refuses it; Python decides
            const uint64_t n = static_cast<uint64_t>(a.numel());
            const uint64_t a_end = pa + n * a.element_size(), b_end = pb + n * b.element_size();
            if (pb < a_end && pa < b_end) return false;
          }
        } else if (sp.strided) {
          flat = false;
          b_strided = &b;
        } else {
          return false;
        }
        mode_b = kTensor;
      } else {
        return false;
      }
    } else if (sp.other != kOperand || v1.isNone() || !scalar_arg(v1, 0.0, nb) ||
               (integral && !integer_number(v1))) {
      return false;  // no second operand, a complex number, or a float on integers
    } else {
      mode_b = kNumber;
    }
  }
  StridedPlan plan;
  if (!flat) {
    plan = plan_strided(a, b_strided, sp.inplace);
    if (!plan.ok) return false;
  }
  const int64_t n = flat ? a.numel() : plan.n;
  if (n == 0 || n > sp.max_numel) return false;
  std::array<double, 2> p{0.0, 0.0};
  for (int k = 0; k < 2; ++k) {
    p[k] = sp.param_defaults[k];
    if (sp.param_args[k] < 0) continue;
    const c10::IValue& pv = stack[base + sp.param_args[k]];
    if ((sp.params_required && pv.isNone()) || (integral && !integer_number(pv)) ||
        !scalar_arg(pv, sp.param_defaults[k], p[k])) {
      return false;
    }
  }
  for (const int i : sp.none_args) {
    if (!stack[base + i].isNone()) return false;
  }
  if (sp.fill_value && std::isfinite(p[0]) && std::abs(p[0]) > finite_max(a_type)) {
    return false;
  }
  if (sp.is_result_arg >= 0) {
    const c10::IValue& r = stack[base + sp.is_result_arg];
    if (!r.isBool() || (r.toBool() && p[0] < 0)) return false;
  }
  int choice = 0;
  if (sp.choice_arg >= 0 && !sp.choice_numbers.empty()) {
    double x = 0.0;
    if (!scalar_arg(stack[base + sp.choice_arg], std::nan(""), x)) return false;
    choice = static_cast<int>(sp.choice_numbers.size());
    for (size_t i = 0; i < sp.choice_numbers.size(); ++i) {
      if (sp.choice_numbers[i] == x) {
        choice = static_cast<int>(i);
        break;
      }
    }
  } else if (sp.choice_arg >= 0) {
    const c10::IValue& c = stack[base + sp.choice_arg];
    if (!c.isString()) return false;
    const std::string_view want = c.toStringView();
    choice = -1;
    for (size_t i = 0; i < sp.choices.size(); ++i) {
      if (sp.choices[i] == want) choice = static_cast<int>(i);
    }
    if (choice < 0) return false;
  }

  int64_t block = next_pow2((n + sp.spread - 1) / sp.spread);
  block = std::min(sp.max_block, std::max(sp.min_block, block));
  int block_log = 0;
  while ((int64_t{1} << block_log) < block) ++block_log;
  const bool div16 = flat && n % 16 == 0;
  const c10::DeviceIndex device = a.device().index();
  if (dry) return true;
  const uint64_t key = static_cast<uint64_t>(choice & 0xff) |
                       (static_cast<uint64_t>(a_type) << 8) |
                       (static_cast<uint64_t>(mode_b) << 16) |
                       (static_cast<uint64_t>(b_type) << 20) |
                       (static_cast<uint64_t>(block_log) << 28) |
                       (static_cast<uint64_t>(div16) << 34) |
                       (static_cast<uint64_t>(static_cast<uint8_t>(device)) << 36) |
                       (static_cast<uint64_t>(!flat) << 44) |
                       (static_cast<uint64_t>(flat ? 0 : plan.ndim) << 45) |
                       (static_cast<uint64_t>(!flat && plan.idx64) << 48);

  c10::DeviceGuard guard(a.device());
  Variant v;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(np.mu);
    auto it = np.variants.find(key);
    if (it != np.variants.end()) {
      v = it->second;
      found = true;
    }
  }
  if (!found) {
    v = compile_variant(np, key, choice, a_type, mode_b, b_type, block, div16, !flat,
                        plan.ndim, plan.idx64);
  }
  if (!v.usable) return false;
  const Driver& drv = driver();
  if (drv.launch == nullptr) return false;

  at::Tensor out = sp.inplace ? a
                   : flat     ? at::empty(a.sizes(), a.options())
                              : at::empty(plan.shape, a.options());
  const c10::Stream stream =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(a.device());
  uint64_t a_ptr = pa, b_ptr = pb, c_ptr = pa;
  uint64_t out_ptr = reinterpret_cast<uint64_t>(out.data_ptr());
  int64_t count = n;
  double na = 0.0, nc = 0.0, p0 = p[0], p1 = p[1];
  uint64_t scratch = 0;
  void* params[kMaxParams] = {&a_ptr, &b_ptr, &c_ptr, &out_ptr};
  int at_param = 4;
  if (flat) {
    params[at_param++] = &count;
  } else {
    for (int64_t& x : plan.ints) params[at_param++] = &x;
  }
  for (double* x : {&na, &nb, &nc, &p0, &p1}) params[at_param++] = x;
  for (int i = at_param; i < v.params; ++i) params[i] = &scratch;
  const auto grid = static_cast<unsigned>((n + block - 1) / block);
  const CUresult r = drv.launch(v.fn, grid, 1, 1, 32 * v.warps, 1, 1, v.shared,
                                stream.native_handle(), params, nullptr);
  if (r != 0) {
    const char* msg = nullptr;
    if (drv.error_string) drv.error_string(r, &msg);
    TORCH_CHECK(false, "opbench native launch of ", name, " failed: CUDA error ", r, " (",
                msg ? msg : "?", ")");
  }
  at::Tensor result = sp.inplace ? a : out;
  torch::jit::drop(stack, n_args);
  torch::jit::push(stack, std::move(result));
  return true;
}

}  // namespace
