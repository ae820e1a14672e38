// opbench's C++ gate: what a backend's registered operator costs when the call never
// enters Python.
//
// Why: a call through torch.library into a Python kernel costs 30-36 us on the H100 where
// eager's whole call costs 7-9 (benchmarks/results/triton-launch-bandwidth-h100.md), so a
// model whose ops take 5-20 us trains slower on a backend whose kernels are faster. This
// module puts one boxed C++ kernel (a Gate) in front of a registered operator, on the
// same dispatch key, and decides every call there:
//
//   1. the native path, where the operator has one (a NativeSpec from Python) and the
//      serve policy's device verdict takes the call's shape class: an elementwise call
//      on CUDA (same-shape contiguous operands, or where the spec has a strided kernel a
//      broadcast or sliced one whose result eager makes contiguous) is launched here
//      with cuLaunchKernel on a kernel Triton compiled (the same kernel the Python path
//      launches for that call); allocation, shape rules and the launch are C++;
//   2. the backend's Python wrapper, captured when the gate was installed (the reference
//      and the fallback, unchanged), where the policy's host verdict takes the class;
//   3. anything else goes to eager's own kernel, captured before the backend registered
//      anything (opbench.backends.serve_policy: the judged run did not find it faster).
//
// Built with torch.utils.cpp_extension against PyTorch's headers only: no CUDA headers
// and no CUDA library at link time. The driver's cuLaunchKernel is opened with dlopen
// at the first native launch (the process already holds libcuda.so.1 by then: PyTorch
// and Triton loaded it), and the current stream comes from c10's device-guard interface,
// so the same source builds on a CPU-only machine, where only steps 1 and 3 run.
//
// Files: this one (the native path, the gate's kernel and its Python face) includes
// gate_driver.h (the driver functions), gate_strided.h (planning a strided call) and
// gate_replay.h (launch replay): one translation unit, built by build.py, which rebuilds
// when any of them changes.
//
// Threads: counters are atomics; a kernel variant is compiled at most once per key under
// the GIL (Python compiles it), the variant table is guarded by a mutex that is never held
// while Python runs. Python objects are dropped only with the GIL held (close()).

#include <torch/extension.h>
#include <torch/library.h>

#include <ATen/ScalarOps.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

#include "gate_driver.h"
#include "gate_replay.h"
#include "gate_strided.h"

namespace {

// ------------------------------------------------------------------ shape classes

// serve_policy's dtype names, set from Python (set_dtype_names) so both sides spell a
// class the same way; a dtype without a name never matches a policy class.
std::array<std::string, 64> g_dtype_names;

// serve_policy._bucket: int(math.log(numel, 4)), the same libm log on both sides.
int size_bucket(int64_t numel) {
  if (numel <= 1) return 0;
  return static_cast<int>(std::log(static_cast<double>(numel)) / std::log(4.0));
}

// serve_policy.shape_class_of_args: the dtype and size bucket of the call's largest
// tensor (the first of equal ones), tensors inside list arguments included; "" when the
// call has no tensor.
std::string shape_class(const torch::jit::Stack& stack, size_t begin) {
  int64_t best_n = -1;
  at::ScalarType best_t = at::ScalarType::Undefined;
  auto consider = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    int64_t n = t.numel();
    if (n > best_n) {
      best_n = n;
      best_t = t.scalar_type();
    }
  };
  for (size_t i = begin; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      consider(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) consider(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) consider(e.toTensor());
      }
    }
  }
  if (best_n < 0) return std::string();
  const std::string& name = g_dtype_names[static_cast<size_t>(best_t) % g_dtype_names.size()];
  if (name.empty()) return std::string("?");
  return name + ":4^" + std::to_string(size_bucket(best_n));
}

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

// ------------------------------------------------------------------ one gated operator

// One side's serve policy: every call, none, or by shape class (a class the run did not
// time takes the operator's default), as serve_policy.OpPolicy.serves answers.
struct Verdict {
  enum Mode { kAll, kNone, kClasses } mode = kAll;
  std::unordered_map<std::string, bool> classes;
  bool fallback = true;

  bool serves(const std::string& cls) const {
    if (mode != kClasses) return mode == kAll;
    auto it = classes.find(cls);
    return it != classes.end() ? it->second : fallback;
  }
};

struct State {
  std::string name;  // "aten::add.Tensor", for messages
  c10::OperatorHandle op;
  c10::DispatchKey key;
  size_t n_args = 0;
  std::optional<c10::SafeKernelFunction> eager;   // captured before the backend registered
  std::optional<c10::SafeKernelFunction> python;  // the backend's wrapper
  // the serve policy's answers: for the Python path (host-inclusive speedups) and for the
  // native launch (device speedups: its host cost is eager's)
  Verdict python_verdict, native_verdict;
  NativeSpec native;
  std::mutex mu;
  std::unordered_map<uint64_t, Variant> variants;
  std::atomic<int64_t> n_native{0}, n_declined{0}, n_python{0}, n_compiled{0};
  Replayer replay;  // launch replay (gate_replay.h)
  // dry calls (the judge's worker asking whether a call would be launched here): read
  // the call, run nothing, return an undefined tensor
  std::atomic<bool> dry{false}, dry_native{false};
  // dry calls on any device read as CUDA ones would (the CPU tests of the decisions)
  std::atomic<bool> dry_any_device{false};

  State(std::string n, c10::OperatorHandle h, c10::DispatchKey k)
      : name(std::move(n)), op(std::move(h)), key(k) {
    replay.name = name;
  }
};

// The flat kernel's arguments (a, b, c, out, n, na, nb, nc, p0, p1), and the strided
// kernel's (a, b, c, out, its 20 integers, na, nb, nc, p0, p1); then Triton's scratch
// pointers, passed as null.
constexpr int kFlatParams = 10, kStridedParams = 29, kMaxParams = 32;

// ``strided``: the strided kernel for ``ndim`` merged dims and ``idx64`` indexing
// (compile_strided), else the flat one (compile).
Variant compile_variant(State& s, uint64_t key, int choice, at::ScalarType a_type, int mode_b,
                        at::ScalarType b_type, int64_t block, bool div16, bool strided,
                        int ndim, bool idx64) {
  Variant v;
  {
    py::gil_scoped_acquire gil;
    const py::object& fn = strided ? s.native.compile_strided : s.native.compile;
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
  s.n_compiled++;
  std::lock_guard<std::mutex> lock(s.mu);
  s.variants.emplace(key, v);
  return v;
}

// The native path; false (nothing done, the stack untouched) for any call it does not
// take, which then goes to the Python wrapper. ``dry``: only read the call, and say
// whether it would be launched here (the stack untouched; no compile, no launch).
// Contiguous operands of one shape take the flat kernel; where the spec has a strided
// kernel, a broadcast or strided call that plan_strided plans takes that one.
bool try_native(State& s, torch::jit::Stack& stack, bool dry = false) {
  const NativeSpec& sp = s.native;
  const size_t base = stack.size() - s.n_args;
  const c10::IValue& v0 = stack[base];
  if (!v0.isTensor()) return false;
  const at::Tensor& a = v0.toTensor();
  if ((!a.is_cuda() && !(dry && s.dry_any_device.load())) || a.dim() == 0) return false;
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
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.variants.find(key);
    if (it != s.variants.end()) {
      v = it->second;
      found = true;
    }
  }
  if (!found) {
    v = compile_variant(s, key, choice, a_type, mode_b, b_type, block, div16, !flat,
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
    TORCH_CHECK(false, "opbench native launch of ", s.name, " failed: CUDA error ", r, " (",
                msg ? msg : "?", ")");
  }
  at::Tensor result = sp.inplace ? a : out;
  torch::jit::drop(stack, s.n_args);
  torch::jit::push(stack, std::move(result));
  return true;
}

class GateKernel final : public c10::OperatorKernel {
 public:
  explicit GateKernel(std::shared_ptr<State> s) : s_(std::move(s)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                  torch::jit::Stack* stack) {
    State& s = *s_;
    if (s.dry.load()) {
      s.dry_native = (s.native.operands > 0 && try_native(s, *stack, /*dry=*/true)) ||
                     replay_ready(s.replay, s.n_args, *stack);
      torch::jit::drop(*stack, s.n_args);
      torch::jit::push(*stack, at::Tensor());
      return;
    }
    std::string cls;
    if (s.python_verdict.mode == Verdict::kClasses ||
        (s.native.operands > 0 && s.native_verdict.mode == Verdict::kClasses)) {
      cls = shape_class(*stack, stack->size() - s.n_args);
    }
    if (s.native.operands > 0 && s.native_verdict.serves(cls) && try_native(s, *stack)) {
      s.n_native++;
      return;
    }
    if (s.python_verdict.serves(cls)) {
      const Replayed r = replay_call(s.replay, s.n_args, *s.python, op, ks, *stack);
      if (r == Replayed::kReplayed) {
        s.n_native++;
        return;
      }
      if (r == Replayed::kRecorded) {
        s.n_python++;
        return;
      }
      s.n_python++;
      s.python->callBoxed(op, ks, stack);
      return;
    }
    s.n_declined++;
    s.eager->callBoxed(op, ks, stack);
  }

 private:
  std::shared_ptr<State> s_;
};

// ------------------------------------------------------------------ the Python face

class Gate {
 public:
  Gate(const std::string& name, const std::string& overload, const std::string& key) {
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
    s_ = std::make_shared<State>(overload.empty() ? name : name + "." + overload, handle,
                                 c10::parseDispatchKey(key));
    s_->n_args = handle.schema().arguments().size();
  }

  void capture_eager() { s_->eager.emplace(s_->op.getComputedKernelForDispatchKey(s_->key)); }

  // side: "python" or "native"; mode: "all", "none" or "classes" (then classes and the
  // default for a class the run did not time)
  void set_policy(const std::string& side, const std::string& mode,
                  const std::unordered_map<std::string, bool>& classes, bool fallback) {
    TORCH_CHECK(side == "python" || side == "native", "side is python or native, not ", side);
    Verdict& v = side == "python" ? s_->python_verdict : s_->native_verdict;
    if (mode == "all") {
      v.mode = Verdict::kAll;
    } else if (mode == "none") {
      v.mode = Verdict::kNone;
    } else {
      TORCH_CHECK(mode == "classes", "mode is all, none or classes, not ", mode);
      v.mode = Verdict::kClasses;
    }
    v.classes = classes;
    v.fallback = fallback;
  }

  void set_native(int operands, bool inplace, std::vector<int> param_args,
                  std::vector<double> param_defaults, int choice_arg,
                  std::vector<std::string> choices, std::vector<double> choice_numbers,
                  std::vector<int> none_args, int is_result_arg, int other,
                  bool fill_value, bool params_required, bool integers, int64_t max_numel,
                  int64_t spread, int64_t min_block, int64_t max_block, py::object compile,
                  py::object compile_strided) {
    TORCH_CHECK(operands == 1 || operands == 2, "a native path takes 1 or 2 operands");
    TORCH_CHECK(param_args.size() == 2 && param_defaults.size() == 2, "two parameters");
    const int n = static_cast<int>(s_->n_args);
    TORCH_CHECK(operands <= n && param_args[0] < n && param_args[1] < n && choice_arg < n,
                s_->name, " has ", n, " arguments: a native spec names a position past them");
    for (const int i : none_args) {
      TORCH_CHECK(i >= operands && i < n, s_->name, ": none_args names position ", i);
    }
    NativeSpec& sp = s_->native;
    sp.operands = operands;
    sp.inplace = inplace;
    sp.param_args = {param_args[0], param_args[1]};
    sp.param_defaults = {param_defaults[0], param_defaults[1]};
    sp.choice_arg = choice_arg;
    sp.choices = std::move(choices);
    TORCH_CHECK(choice_numbers.size() < 255, s_->name, ": too many choice_numbers");
    sp.choice_numbers = std::move(choice_numbers);
    sp.none_args = std::move(none_args);
    TORCH_CHECK(is_result_arg < n, s_->name, ": is_result_arg names position ", is_result_arg);
    sp.is_result_arg = is_result_arg;
    TORCH_CHECK(other >= kOperand && other <= kSource, s_->name, ": other kind ", other);
    TORCH_CHECK(other == kOperand || operands == 2, s_->name,
                ": a mask or a source is the second operand");
    sp.other = other;
    sp.fill_value = fill_value;
    sp.params_required = params_required;
    sp.integers = integers;
    sp.max_numel = max_numel;
    sp.spread = std::max<int64_t>(1, spread);
    sp.min_block = min_block;
    sp.max_block = max_block;
    sp.compile = std::move(compile);
    sp.strided = !compile_strided.is_none();
    sp.compile_strided = std::move(compile_strided);
  }

  // Registers the gate over whatever serves the operator on its key now (the backend's
  // wrapper), which it keeps as the Python path, in the operator's namespace.
  void install(const std::string& dispatcher_name) {
    TORCH_CHECK(!lib_, "gate for ", s_->name, " is installed already");
    TORCH_CHECK(s_->eager.has_value(), "capture_eager() before the backend registers ",
                s_->name);
    s_->python.emplace(s_->op.getComputedKernelForDispatchKey(s_->key));
    // the operator's own namespace: aten for a backend, opbench_candidate for the judge's
    // worker (opbench.instrument.native_calls), which registers a kernel beside aten's
    const std::string ns = s_->name.substr(0, s_->name.find("::"));
    lib_ = std::make_unique<torch::Library>(torch::Library::IMPL, ns, s_->key, __FILE__,
                                            __LINE__);
    lib_->impl(dispatcher_name.c_str(),
               torch::CppFunction::makeFromBoxedFunctor(std::make_unique<GateKernel>(s_)));
  }

  // Launch replay for the calls the Python path serves (see replay_call), with the
  // recorder of opbench.backends.native.replay; None turns it off.
  void set_replay(py::object recorder) {
    s_->replay.on = !recorder.is_none();
    s_->replay.recorder = std::move(recorder);
  }

  // What replay knows of each signature seen: ready or not, recordings, given up, and the
  // recorder's reason for the last one it refused.
  py::list replay_notes() const {
    std::lock_guard<std::mutex> lock(s_->replay.mu);
    py::list out;
    for (const auto& [key, e] : s_->replay.entries) {
      py::dict d;
      d["ready"] = e.ready != nullptr;
      d["recordings"] = e.recordings;
      d["given_up"] = e.given_up;
      d["why"] = e.why;
      d["steps"] = e.ready ? e.ready->steps.size() : 0;
      out.append(d);
    }
    return out;
  }

  // Why the signature of the last dry call is not replayed: the recorder's reason for its
  // last recording, or "" (not recorded yet, or ready).
  std::string dry_replay_why() const {
    std::lock_guard<std::mutex> lock(s_->replay.mu);
    return s_->replay.dry_why;
  }

  // Removes the registration (the backend's wrapper serves again) and drops the Python
  // objects while the GIL is held.
  void close() {
    lib_.reset();
    s_->replay.on = false;
    s_->replay.recorder = py::none();
    s_->native.compile = py::none();
    s_->native.compile_strided = py::none();
    s_->native.strided = false;
  }

  py::dict counts() const {
    py::dict d;
    d["native"] = s_->n_native.load();
    d["declined"] = s_->n_declined.load();
    d["python"] = s_->n_python.load();
    d["compiled"] = s_->n_compiled.load();
    d["replayed"] = s_->replay.n_replayed.load();
    d["recorded"] = s_->replay.n_recorded.load();
    return d;
  }

  // While on, every call is dry: read, not run (see State::dry); ``dry_native`` says
  // whether the last dry call would have been launched natively. ``any_device``: a
  // call on another device is read as a CUDA one would be (so the CPU tests can ask).
  void set_dry(bool on, bool any_device) {
    s_->dry_any_device = on && any_device;
    s_->dry = on;
  }
  bool dry_native() const { return s_->dry_native.load(); }

  void reset_counts() {
    s_->n_native = 0;
    s_->n_declined = 0;
    s_->n_python = 0;
    s_->replay.n_replayed = 0;
    s_->replay.n_recorded = 0;
  }

  ~Gate() { lib_.reset(); }

 private:
  std::shared_ptr<State> s_;
  std::unique_ptr<torch::Library> lib_;
};

int dtype_code(const at::Tensor& t) { return static_cast<int>(t.scalar_type()); }

void set_dtype_names(const std::vector<std::pair<at::Tensor, std::string>>& names) {
  for (const auto& [t, name] : names) {
    g_dtype_names[static_cast<size_t>(t.scalar_type()) % g_dtype_names.size()] = name;
  }
}

// A Python number as aten's own entry hands it to a Tensor argument (``x * 0.125`` in a
// model reaches the gate as this): a 0-dim CPU tensor marked as a wrapped number, which
// type promotion treats as a number. A custom operator's Python entry refuses a number
// for a Tensor argument, so the judge calls the gated twin with one of these
// (opbench.instrument.native_calls.NativeRoute.entry). Overloads in pybind11's order:
// bool, then int, then float.
template <typename T>
at::Tensor wrapped_number(T v) {
  return at::native::wrapped_scalar_tensor(c10::Scalar(v));
}

// plan_strided for the tests (on any device): None where the call goes to Python, else
// (result shape, the kernel's 20 integers, merged rank, 64-bit indexing).
py::object strided_plan(const at::Tensor& a, const std::optional<at::Tensor>& b, bool inplace) {
  const StridedPlan p = plan_strided(a, b.has_value() ? &*b : nullptr, inplace);
  if (!p.ok) return py::none();
  return py::make_tuple(p.shape, std::vector<int64_t>(p.ints.begin(), p.ints.end()), p.ndim,
                        p.idx64);
}

std::string driver_status() {
  const Driver& d = driver();
  return d.launch != nullptr ? std::string() : d.why;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "opbench's C++ gate in front of a backend's registered operators";
  py::class_<Gate>(m, "Gate")
      .def(py::init<const std::string&, const std::string&, const std::string&>())
      .def("capture_eager", &Gate::capture_eager)
      .def("set_policy", &Gate::set_policy)
      .def("set_native", &Gate::set_native, py::arg("operands"), py::arg("inplace"),
           py::arg("param_args"), py::arg("param_defaults"), py::arg("choice_arg"),
           py::arg("choices"), py::arg("choice_numbers"), py::arg("none_args"),
           py::arg("is_result_arg"), py::arg("other"), py::arg("fill_value"),
           py::arg("params_required"), py::arg("integers"), py::arg("max_numel"),
           py::arg("spread"), py::arg("min_block"), py::arg("max_block"), py::arg("compile"),
           py::arg("compile_strided"))
      .def("set_replay", &Gate::set_replay, py::arg("recorder"))
      .def("replay_notes", &Gate::replay_notes)
      .def("dry_replay_why", &Gate::dry_replay_why)
      .def("install", &Gate::install)
      .def("close", &Gate::close)
      .def("counts", &Gate::counts)
      .def("reset_counts", &Gate::reset_counts)
      .def("set_dry", &Gate::set_dry, py::arg("on"), py::arg("any_device") = false)
      .def("dry_native", &Gate::dry_native);
  m.def("dtype_code", &dtype_code);
  m.def("set_dtype_names", &set_dtype_names);
  m.def("driver_status", &driver_status);
  m.def("strided_plan", &strided_plan, py::arg("a"), py::arg("b"), py::arg("inplace"));
  m.def("wrapped_number", &wrapped_number<bool>);
  m.def("wrapped_number", &wrapped_number<int64_t>);
  m.def("wrapped_number", &wrapped_number<double>);
}
