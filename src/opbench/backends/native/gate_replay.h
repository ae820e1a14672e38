// opbench's C++ gate: launch replay. For one call signature a backend's Python kernel
// makes the same launches every time; opbench.backends.native.replay records them while
// the gate runs the Python function, and the gate repeats them from then on (buffers,
// cuLaunchKernel, memsets, the same views). Included by gate.cpp alone: one translation
// unit (the anonymous namespace is gate.cpp's).
#pragma once

#include <torch/extension.h>

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gate_driver.h"
#include "gate_replay_key.h"

namespace py = pybind11;

namespace {

// An op's Python function makes the same launches every time for one call signature (see
// opbench.backends.native.replay, which records them): the plan of those launches, as the
// recorder hands it over. Codes as replay.py names them.
constexpr int kStepLaunch = 0, kStepZero = 1;
constexpr int kArgRaw = 0, kArgInput = 1, kArgBuffer = 2, kArgKept = 3, kArgTmap = 4;
constexpr int kOutNone = 0, kOutInput = 1, kOutBuffer = 2;
// a launch's parameters (8 bytes each: cuLaunchKernel takes 4 KB of them on every GPU)
constexpr size_t kReplayMaxParams = 256;
// signatures remembered per operator: past it, new signatures stay Python calls
constexpr size_t kReplayMaxKeys = 512;
// recordings of one signature before it is given up on (two in a row must agree)
constexpr int kReplayMaxRecordings = 4;

// A tensor descriptor's map, encoded again on every replay over the call's address, as
// Triton's fill_tma_descriptor encodes it (dims, box and strides innermost first).
struct ReplayTmap {
  int dtype = 0, swizzle = 0, padding = 0;
  uint32_t rank = 0;
  std::array<uint64_t, 5> dims{}, strides{};  // strides in bytes, rank - 1 of them
  std::array<uint32_t, 5> box{};
  bool operator==(const ReplayTmap& o) const {
    return dtype == o.dtype && swizzle == o.swizzle &&
           padding == o.padding && rank == o.rank && dims == o.dims && strides == o.strides &&
           box == o.box;
  }
};

struct ReplayArg {
  int kind = kArgRaw;
  // where the address lies (a tensor map's base included): kArgInput, kArgBuffer or
  // kArgKept, the index-th of them; kArgRaw for raw bits
  int region = kArgRaw;
  int64_t index = 0;
  uint64_t value = 0;  // raw bits, or a byte offset (two's complement) from the region
  ReplayTmap tmap;     // kArgTmap
  bool operator==(const ReplayArg& o) const {
    return kind == o.kind && region == o.region && index == o.index && value == o.value &&
           (kind != kArgTmap || tmap == o.tmap);
  }
};

// 128 bytes, 64-byte aligned: a CUtensorMap
struct alignas(64) TensorMap {
  std::array<unsigned char, 128> bytes{};
};

struct ReplayStep {
  int kind = kStepLaunch;
  CUfunction fn = nullptr;
  std::array<unsigned, 3> grid{1, 1, 1};
  unsigned warps = 0, shared = 0;
  int64_t buffer = -1;  // kStepZero: the buffer zeroed
  std::vector<ReplayArg> args;
  bool operator==(const ReplayStep& o) const {
    return kind == o.kind && fn == o.fn && grid == o.grid && warps == o.warps &&
           shared == o.shared && buffer == o.buffer && args == o.args;
  }
};

struct ReplayBuffer {
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype = at::ScalarType::Undefined;
  bool zeroed = false;
  bool operator==(const ReplayBuffer& o) const {
    return sizes == o.sizes && strides == o.strides && dtype == o.dtype && zeroed == o.zeroed;
  }
};

struct ReplayOutput {
  int kind = kOutNone;
  int64_t index = 0, offset = 0;
  std::vector<int64_t> sizes, strides;
  bool operator==(const ReplayOutput& o) const {
    return kind == o.kind && index == o.index && offset == o.offset && sizes == o.sizes &&
           strides == o.strides;
  }
};

// A plan's kept scratch (replay.py's ``kept``: scratch its kernels keep between calls and
// leave as they found it, a reduction's counters): one set per stream, zeroed once when
// the stream first replays the plan, kept with the plan. Launches on one stream run in
// order, so they share a set; another stream gets its own.
struct KeptScratch {
  std::mutex mu;
  std::vector<std::pair<c10::StreamId, std::vector<at::Tensor>>> by_stream;
};

struct ReplayPlan {
  std::vector<ReplayBuffer> buffers;
  std::vector<ReplayStep> steps;
  std::vector<ReplayOutput> outputs;
  std::vector<int64_t> kept;  // bytes of each kept scratch
  std::shared_ptr<KeptScratch> scratch = std::make_shared<KeptScratch>();
  bool operator==(const ReplayPlan& o) const {
    return buffers == o.buffers && steps == o.steps && outputs == o.outputs && kept == o.kept;
  }
};

// One signature: its plan once two recordings in a row agreed, the last recording's
// plan until then, and the recorder's reason where it refused the last one.
struct ReplayEntry {
  std::shared_ptr<const ReplayPlan> ready, last;
  int recordings = 0;
  bool given_up = false;
  std::string why;
};

// One gate's replay: the Python recorder (None: off), the signatures seen, and how many
// calls were replayed and recorded.
struct Replayer {
  std::string name;  // the operator, for messages
  py::object recorder;
  bool on = false;  // recorder is set (read without the GIL)
  std::mutex mu;
  std::unordered_map<std::string, ReplayEntry> entries;
  std::atomic<int64_t> n_replayed{0}, n_recorded{0};
  // a recording is under way: a call of the same operator inside it (the Python
  // function calling its own op) is a plain Python call
  std::atomic<bool> recording{false};
  // the recorder's reason for refusing the signature of the last dry call (under mu)
  std::string dry_why;
};

// replay.py's descriptor spec (region kind, region index, host dtype code, element bytes,
// swizzle, padding, box, shape, strides; outermost first) as fill_tma_descriptor reads it:
// the base's region into the argument, dims and box reversed, the byte strides of all but
// the innermost dim. Called with the GIL held.
bool tmap_of(const py::handle& spec, ReplayArg& arg, std::string& why) {
  const auto t = spec.cast<py::tuple>();
  arg.region = t[0].cast<int>();
  arg.index = t[1].cast<int64_t>();
  ReplayTmap& m = arg.tmap;
  m.dtype = t[2].cast<int>();
  const auto elem = t[3].cast<uint64_t>();
  m.swizzle = t[4].cast<int>();
  m.padding = t[5].cast<int>();
  const auto box = t[6].cast<std::vector<uint32_t>>();
  const auto shape = t[7].cast<std::vector<uint64_t>>();
  const auto strides = t[8].cast<std::vector<uint64_t>>();
  const size_t rank = box.size();
  if (rank == 0 || rank > 5 || shape.size() != rank || strides.size() != rank) {
    why = "a tensor descriptor of rank " + std::to_string(rank);
    return false;
  }
  m.rank = static_cast<uint32_t>(rank);
  for (size_t i = 0; i < rank; ++i) {
    m.box[rank - 1 - i] = box[i];
    m.dims[rank - 1 - i] = shape[i];
  }
  for (size_t i = 0; i + 1 < rank; ++i) m.strides[rank - 2 - i] = elem * strides[i];
  return true;
}

// The recorder's plan (replay.py's tuples) as a ReplayPlan; null, with ``why`` set, where
// it names a tensor the call does not have or a launch has more parameters than the gate
// passes. Called with the GIL held.
std::shared_ptr<ReplayPlan> plan_of(const py::handle& plan, const std::vector<at::Tensor>& tensors,
                                    std::string& why) {
  auto out = std::make_shared<ReplayPlan>();
  const auto t = plan.cast<py::tuple>();
  for (const py::handle b : t[0].cast<py::tuple>()) {
    const auto bt = b.cast<py::tuple>();
    ReplayBuffer rb;
    rb.sizes = bt[0].cast<std::vector<int64_t>>();
    rb.strides = bt[1].cast<std::vector<int64_t>>();
    rb.dtype = static_cast<at::ScalarType>(bt[2].cast<int>());
    rb.zeroed = bt[3].cast<bool>();
    if (rb.sizes.size() != rb.strides.size()) {
      why = "a buffer whose sizes and strides differ in rank";
      return nullptr;
    }
    out->buffers.push_back(std::move(rb));
  }
  if (t.size() > 3) {
    for (const py::handle k : t[3].cast<py::tuple>()) {
      const auto bytes = k.cast<int64_t>();
      if (bytes <= 0) {
        why = "a kept scratch of no bytes";
        return nullptr;
      }
      out->kept.push_back(bytes);
    }
  }
  const auto n_buffers = static_cast<int64_t>(out->buffers.size());
  const auto n_tensors = static_cast<int64_t>(tensors.size());
  const auto n_kept = static_cast<int64_t>(out->kept.size());
  for (const py::handle st : t[1].cast<py::tuple>()) {
    const auto s = st.cast<py::tuple>();
    ReplayStep step;
    step.kind = s[0].cast<int>();
    if (step.kind == kStepZero) {
      step.buffer = s[1].cast<int64_t>();
      if (step.buffer < 0 || step.buffer >= n_buffers) {
        why = "a memset of no buffer";
        return nullptr;
      }
    } else if (step.kind == kStepLaunch) {
      step.fn = reinterpret_cast<CUfunction>(s[1].cast<uintptr_t>());
      step.grid = {s[2].cast<unsigned>(), s[3].cast<unsigned>(), s[4].cast<unsigned>()};
      step.warps = s[5].cast<unsigned>();
      step.shared = s[6].cast<unsigned>();
      for (const py::handle a : s[7].cast<py::tuple>()) {
        const auto at = a.cast<py::tuple>();
        ReplayArg arg;
        arg.kind = at[0].cast<int>();
        arg.index = at[1].cast<int64_t>();
        arg.value = arg.kind == kArgRaw ? at[2].cast<uint64_t>()
                                        : static_cast<uint64_t>(at[2].cast<int64_t>());
        arg.region = arg.kind;
        if (arg.kind == kArgTmap && !tmap_of(at[3], arg, why)) return nullptr;
        const int64_t bound = arg.region == kArgInput  ? n_tensors
                              : arg.region == kArgKept ? n_kept
                                                       : n_buffers;
        if (arg.kind < kArgRaw || arg.kind > kArgTmap ||
            (arg.kind != kArgRaw && (arg.region < kArgInput || arg.region > kArgKept ||
                                     arg.index < 0 || arg.index >= bound)) ||
            (arg.region == kArgInput && !tensors[arg.index].defined())) {
          why = "a launch argument naming no tensor of the call";
          return nullptr;
        }
        step.args.push_back(arg);
      }
      if (step.fn == nullptr || step.args.size() > kReplayMaxParams) {
        why = "a launch of " + std::to_string(step.args.size()) + " parameters (the gate passes " +
              std::to_string(kReplayMaxParams) + ")";
        return nullptr;
      }
    } else {
      why = "a step of kind " + std::to_string(step.kind);
      return nullptr;
    }
    out->steps.push_back(std::move(step));
  }
  for (const py::handle o : t[2].cast<py::tuple>()) {
    const auto ot = o.cast<py::tuple>();
    ReplayOutput ro;
    ro.kind = ot[0].cast<int>();
    ro.index = ot[1].cast<int64_t>();
    ro.offset = ot[2].cast<int64_t>();
    ro.sizes = ot[3].cast<std::vector<int64_t>>();
    ro.strides = ot[4].cast<std::vector<int64_t>>();
    const int64_t bound = ro.kind == kOutInput ? n_tensors : n_buffers;
    if (ro.kind != kOutNone && (ro.index < 0 || ro.index >= bound)) {
      why = "an output naming no tensor";
      return nullptr;
    }
    out->outputs.push_back(std::move(ro));
  }
  return out;
}

void check_launch(CUresult r, const std::string& name, const char* what) {
  if (r == 0) return;
  const char* msg = nullptr;
  if (driver().error_string) driver().error_string(r, &msg);
  TORCH_CHECK(false, "opbench replay of ", name, ": ", what, " failed: CUDA error ", r, " (",
              msg ? msg : "?", ")");
}

// The plan's launches on this call's tensors: allocate its buffers, zero and launch in
// order on the current stream, push its outputs in place of the arguments. False, with
// nothing done, where the plan keeps scratch this stream has none of yet and the stream
// is capturing a CUDA graph: the zeroing of new scratch would be captured, not run, and
// the scratch would stay unzeroed for the stream's later calls outside the graph.
bool run_replay(const std::string& name, const ReplayPlan& plan, torch::jit::Stack& stack,
                const std::vector<at::Tensor>& tensors, size_t n_args) {
  at::Device device(at::kCUDA);
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.is_cuda()) {
      device = t.device();
      break;
    }
  }
  c10::DeviceGuard guard(device);
  const Driver& drv = driver();
  TORCH_CHECK(drv.launch != nullptr, "opbench replay: ", drv.why);
  const c10::Stream stream =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device);
  const auto native_stream = static_cast<CUstream>(stream.native_handle());
  // the kept scratch of this stream: made (zeroed) on the stream's first replay
  std::vector<uint64_t> kept;
  if (!plan.kept.empty()) {
    std::lock_guard<std::mutex> lock(plan.scratch->mu);
    auto& by_stream = plan.scratch->by_stream;
    auto it = std::find_if(by_stream.begin(), by_stream.end(),
                           [&](const auto& e) { return e.first == stream.id(); });
    if (it == by_stream.end()) {
      int capturing = 0;
      if (drv.is_capturing != nullptr &&
          (drv.is_capturing(native_stream, &capturing) != 0 || capturing != 0)) {
        return false;
      }
      std::vector<at::Tensor> made;
      for (const int64_t bytes : plan.kept) {
        made.push_back(at::zeros({bytes}, at::TensorOptions().dtype(at::kByte).device(device)));
      }
      by_stream.emplace_back(stream.id(), std::move(made));
      it = std::prev(by_stream.end());
    }
    for (const at::Tensor& k : it->second) kept.push_back(reinterpret_cast<uint64_t>(k.data_ptr()));
  }
  std::vector<at::Tensor> bufs;
  bufs.reserve(plan.buffers.size());
  auto zero = [&](const at::Tensor& b) {
    const size_t bytes = b.storage().nbytes();
    if (bytes == 0) return;
    TORCH_CHECK(drv.memset != nullptr, "opbench replay: libcuda.so.1 has no cuMemsetD8Async");
    check_launch(drv.memset(reinterpret_cast<uint64_t>(b.data_ptr()), 0, bytes, native_stream),
                 name, "a memset");
  };
  for (const ReplayBuffer& b : plan.buffers) {
    bufs.push_back(at::empty_strided(b.sizes, b.strides,
                                     at::TensorOptions().dtype(b.dtype).device(device)));
    // torch.zeros and its like: a fresh buffer, zeroed before any step reads it
    if (b.zeroed) zero(bufs.back());
  }
  std::array<uint64_t, kReplayMaxParams> slots{};
  std::array<void*, kReplayMaxParams> params{};
  std::vector<TensorMap> maps;
  for (const ReplayStep& st : plan.steps) {
    if (st.kind == kStepZero) {
      zero(bufs[st.buffer]);
      continue;
    }
    maps.clear();
    for (const ReplayArg& a : st.args) maps.resize(maps.size() + (a.kind == kArgTmap ? 1 : 0));
    size_t n_maps = 0;
    for (size_t k = 0; k < st.args.size(); ++k) {
      const ReplayArg& a = st.args[k];
      uint64_t v = a.value;
      if (a.region == kArgInput) {
        v += reinterpret_cast<uint64_t>(tensors[a.index].data_ptr());
      } else if (a.region == kArgBuffer) {
        v += reinterpret_cast<uint64_t>(bufs[a.index].data_ptr());
      } else if (a.region == kArgKept) {
        v += kept[a.index];
      }
      if (a.kind == kArgTmap) {
        const ReplayTmap& m = a.tmap;
        TORCH_CHECK(drv.encode_tiled != nullptr,
                    "opbench replay: libcuda.so.1 has no cuTensorMapEncodeTiled");
        const std::array<uint32_t, 5> ones{1, 1, 1, 1, 1};
        TensorMap& map = maps[n_maps++];
        // interleave none, L2 promotion 128 B, out-of-bounds fill NaN where padded: as
        // Triton's fill_tma_descriptor
        check_launch(drv.encode_tiled(map.bytes.data(), m.dtype, m.rank,
                                      reinterpret_cast<void*>(v), m.dims.data(),
                                      m.strides.data(), m.box.data(), ones.data(), 0, m.swizzle,
                                      2, m.padding),
                     name, "a tensor map's encoding");
        params[k] = map.bytes.data();
        continue;
      }
      slots[k] = v;
      params[k] = &slots[k];
    }
    check_launch(drv.launch(st.fn, st.grid[0], st.grid[1], st.grid[2], 32 * st.warps, 1, 1,
                            st.shared, native_stream, params.data(), nullptr),
                 name, "a launch");
  }
  std::vector<c10::IValue> outs;
  for (const ReplayOutput& o : plan.outputs) {
    if (o.kind == kOutNone) {
      outs.emplace_back(at::Tensor());
    } else if (o.kind == kOutInput) {
      outs.emplace_back(tensors[o.index]);
    } else {
      const at::Tensor& b = bufs[o.index];
      const bool whole =
          o.offset == 0 && b.sizes().vec() == o.sizes && b.strides().vec() == o.strides;
      outs.emplace_back(whole ? b : b.as_strided(o.sizes, o.strides, o.offset));
    }
  }
  torch::jit::drop(stack, n_args);
  for (c10::IValue& v : outs) torch::jit::push(stack, std::move(v));
  return true;
}

// What replay_call did with a call.
enum class Replayed { kNot, kReplayed, kRecorded };

// A signature's plan, once ready: launched (kReplayed). Otherwise, on a signature not yet
// ready, the Python function ``python`` runs under the recorder (kRecorded: the call was
// made) and its plan is kept; kNot sends the call to the Python function as usual (replay
// off, an argument replay does not read, a signature given up on, too many signatures, a
// recording of this operator under way).
Replayed replay_call(Replayer& r, size_t n_args, const c10::SafeKernelFunction& python,
                     const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                     torch::jit::Stack& stack) {
  if (!r.on) return Replayed::kNot;
  std::string key;
  std::vector<at::Tensor> tensors;
  if (!replay_key(stack, stack.size() - n_args, n_args, key, tensors)) return Replayed::kNot;
  std::shared_ptr<const ReplayPlan> ready;
  bool give_up = false;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.entries.find(key);
    if (it != r.entries.end()) {
      ready = it->second.ready;
      give_up = it->second.given_up;
    } else {
      give_up = r.entries.size() >= kReplayMaxKeys;
    }
  }
  if (ready) {
    if (!run_replay(r.name, *ready, stack, tensors, n_args)) return Replayed::kNot;
    r.n_replayed++;
    return Replayed::kReplayed;
  }
  if (give_up) return Replayed::kNot;
  bool idle = false;
  if (!r.recording.compare_exchange_strong(idle, true)) return Replayed::kNot;
  struct Done {
    std::atomic<bool>& flag;
    ~Done() { flag = false; }
  } done{r.recording};
  r.n_recorded++;
  {
    py::gil_scoped_acquire gil;
    py::list inputs;
    for (const at::Tensor& t : tensors) {
      if (t.defined()) {
        inputs.append(py::cast(t));
      } else {
        inputs.append(py::none());
      }
    }
    r.recorder.attr("begin")(inputs);
  }
  try {
    python.callBoxed(op, ks, &stack);
  } catch (...) {
    py::gil_scoped_acquire gil;
    r.recorder.attr("abort")();
    throw;
  }
  const size_t n_returns = op.schema().returns().size();
  std::shared_ptr<ReplayPlan> plan;
  std::string why;
  {
    py::gil_scoped_acquire gil;
    py::list outputs, same;
    bool readable = stack.size() >= n_returns;
    for (size_t i = stack.size() - std::min(n_returns, stack.size()); i < stack.size(); ++i) {
      const c10::IValue& v = stack[i];
      int64_t input = -1;
      if (v.isTensor() && v.toTensor().defined()) {
        const at::Tensor& t = v.toTensor();
        for (size_t j = 0; j < tensors.size(); ++j) {
          if (tensors[j].defined() &&
              tensors[j].unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
            input = static_cast<int64_t>(j);
            break;
          }
        }
        outputs.append(py::cast(t));
      } else if (v.isNone() || v.isTensor()) {
        outputs.append(py::none());
      } else {
        readable = false;  // a list of tensors, a number
        outputs.append(py::none());
      }
      same.append(input);
    }
    py::tuple got = r.recorder.attr("end")(outputs, same);
    if (!readable) {
      why = "an output that is not a tensor";
    } else if (got[0].is_none()) {
      why = got[1].cast<std::string>();
    } else {
      plan = plan_of(got[0], tensors, why);
    }
  }
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.entries.size() >= kReplayMaxKeys && !r.entries.count(key)) return Replayed::kRecorded;
  ReplayEntry& e = r.entries[key];
  e.recordings++;
  e.why = why;
  if (plan && e.last && *plan == *e.last) {
    e.ready = plan;
  } else {
    e.last = plan;
  }
  if (!e.ready && e.recordings >= kReplayMaxRecordings) e.given_up = true;
  return Replayed::kRecorded;
}

// A dry call: whether the call's signature has a ready plan (and, in ``r.dry_why``, the
// recorder's reason for refusing it, if it did).
bool replay_ready(Replayer& r, size_t n_args, const torch::jit::Stack& stack) {
  if (!r.on) return false;
  std::string key;
  std::vector<at::Tensor> tensors;
  if (!replay_key(stack, stack.size() - n_args, n_args, key, tensors)) return false;
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.entries.find(key);
  r.dry_why = it != r.entries.end() ? it->second.why : std::string();
  return it != r.entries.end() && it->second.ready != nullptr;
}

}  // namespace
