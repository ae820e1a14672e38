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
// Files: this one (shape classes, the gate's kernel and its Python face) includes
// gate_driver.h (the driver functions), gate_native.h (the native path: a call's checks,
// its kernel variant and the launch), gate_strided.h (planning a strided call) and
// gate_replay.h (launch replay, with gate_replay_key.h: its call signatures): one
// translation unit, built by build.py, which rebuilds when any of them changes.
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
#include "gate_native.h"
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
  NativePath native;  // the native path (gate_native.h)
  std::atomic<int64_t> n_native{0}, n_declined{0}, n_python{0};
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


class GateKernel final : public c10::OperatorKernel {
 public:
  explicit GateKernel(std::shared_ptr<State> s) : s_(std::move(s)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                  torch::jit::Stack* stack) {
    State& s = *s_;
    if (s.dry.load()) {
      s.dry_native = (s.native.spec.operands > 0 &&
                       try_native(s.native, s.name, s.n_args, s.dry_any_device, *stack,
                                  /*dry=*/true)) ||
                     replay_ready(s.replay, s.n_args, *stack);
      torch::jit::drop(*stack, s.n_args);
      torch::jit::push(*stack, at::Tensor());
      return;
    }
    std::string cls;
    if (s.python_verdict.mode == Verdict::kClasses ||
        (s.native.spec.operands > 0 && s.native_verdict.mode == Verdict::kClasses)) {
      cls = shape_class(*stack, stack->size() - s.n_args);
    }
    if (s.native.spec.operands > 0 && s.native_verdict.serves(cls) &&
        try_native(s.native, s.name, s.n_args, false, *stack)) {
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
    NativeSpec& sp = s_->native.spec;
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
    s_->native.spec.compile = py::none();
    s_->native.spec.compile_strided = py::none();
    s_->native.spec.strided = false;
  }

  py::dict counts() const {
    py::dict d;
    d["native"] = s_->n_native.load();
    d["declined"] = s_->n_declined.load();
    d["python"] = s_->n_python.load();
    d["compiled"] = s_->native.n_compiled.load();
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
