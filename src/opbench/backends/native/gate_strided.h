// opbench's C++ gate: planning a broadcast or strided elementwise call for the strided
// kernel, as opbench.kernels._lib.pointwise plans it. Included by gate.cpp alone: one
// translation unit (the anonymous namespace is gate.cpp's).
#pragma once

#include <torch/extension.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace {

// pointwise.MAX_DIMS and pointwise.I32_SAFE
constexpr int kMaxDims = 4;
constexpr int64_t kI32Safe = (int64_t{1} << 31) - 1 - 16384;

// The strided kernel's launch (pointwise_kernels._strided_kernel) for a call whose
// operands the flat kernel cannot read: a broadcast second operand ([16, 128, 768] /
// [16, 128, 1]), a sliced or strided one. ``ints`` are the kernel's 20 integers as
// pointwise._strided_plan computes them: the element count, the merged dims d1..d3, and
// a's, b's, c's (absent: 0) and the output's strides, 4 each; ``ndim`` the merged rank.
struct StridedPlan {
  bool ok = false;
  std::vector<int64_t> shape;  // the result's
  int64_t n = 0;
  int ndim = 1;
  bool idx64 = false;
  std::array<int64_t, 20> ints{};
};

// ``t``'s strides broadcast to ``shape`` (0 where broadcast), as pointwise._expanded_strides.
std::vector<int64_t> expanded_strides(const at::Tensor& t, const std::vector<int64_t>& shape) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t pad = nd - t.dim();
  std::vector<int64_t> out(shape.size(), 0);
  for (int64_t i = 0; i < t.dim(); ++i) {
    out[pad + i] = (t.size(i) == 1 && shape[pad + i] != 1) ? 0 : t.stride(i);
  }
  return out;
}

// Over the dims of more than one element, the operand's non-zero strides fall strictly
// from the outermost dim in: a row-major order, with gaps (a slice) and broadcast dims
// anywhere. Where every operand has it and one operand has the result's shape,
// TensorIterator's reorder_dimensions keeps the identity order (the full operand decides
// every pair of such dims, and never swaps them), so eager's result is contiguous, as
// the gate's is; the Python path's (pointwise._new_plan) is then contiguous too, since no
// operand is channels-last. A transposed or channels-last operand fails it: eager keeps
// such layouts, and those calls go to Python.
bool row_major(const std::vector<int64_t>& strides, const std::vector<int64_t>& shape) {
  int64_t prev = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1 || strides[i] == 0) continue;
    if (strides[i] < 0 || strides[i] >= prev) return false;
    prev = strides[i];
  }
  return true;
}

// No two elements of a written tensor share memory: with row_major strides, each dim's
// stride passes the largest offset of the dims inside it. (at::has_internal_overlap says
// "too hard" for any slice; eager then writes anyway, the gate leaves it to Python.)
bool no_self_overlap(const std::vector<int64_t>& strides, const std::vector<int64_t>& shape) {
  int64_t extent = 0;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 1) continue;
    if (strides[k] <= extent) return false;
    extent += (shape[k] - 1) * strides[k];
  }
  return true;
}

// The bytes [first, last) an operand's elements span (strides are never negative).
std::pair<uint64_t, uint64_t> span(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t i = 0; i < t.dim(); ++i) last += (t.size(i) - 1) * t.stride(i);
  const uint64_t p = reinterpret_cast<uint64_t>(t.data_ptr());
  return {p, p + static_cast<uint64_t>((last + 1) * t.element_size())};
}

// The plan for ``a`` (and ``b``, a tensor with dims, or null) into a new contiguous result
// or, ``inplace``, into ``a``; ok false sends the call to Python (not broadcastable, a
// layout eager keeps, an in-place write that may overlap an input, more than kMaxDims
// merged dims).
StridedPlan plan_strided(const at::Tensor& a, const at::Tensor* b, bool inplace) {
  StridedPlan p;
  const int64_t nd = std::max<int64_t>(a.dim(), b != nullptr ? b->dim() : 0);
  std::vector<int64_t> shape(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t ia = i - (nd - a.dim()), ib = b != nullptr ? i - (nd - b->dim()) : -1;
    const int64_t sa = ia >= 0 ? a.size(ia) : 1, sb = ib >= 0 ? b->size(ib) : 1;
    if (sa != sb && sa != 1 && sb != 1) return p;  // Python raises eager's error
    shape[i] = sa == 1 ? sb : sa;
  }
  const bool a_full = a.sizes().equals(shape);
  if (inplace && !a_full) return p;
  if (!a_full && (b == nullptr || !b->sizes().equals(shape))) return p;
  std::array<std::vector<int64_t>, 4> st;  // a, b, c, out
  st[0] = expanded_strides(a, shape);
  st[1] = b != nullptr ? expanded_strides(*b, shape) : std::vector<int64_t>(shape.size(), 0);
  st[2] = std::vector<int64_t>(shape.size(), 0);
  if (!row_major(st[0], shape) || !row_major(st[1], shape)) return p;
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  if (n == 0) return p;  // [1, 4] + [0, 4]: nothing to launch (a grid of 0 is an error)
  if (inplace) {
    if (!no_self_overlap(st[0], shape)) return p;
    if (b != nullptr) {
      const auto [a0, a1] = span(a);
      const auto [b0, b1] = span(*b);
      const bool same = b->data_ptr() == a.data_ptr() && b->sizes().equals(a.sizes()) &&
                        b->strides().equals(a.strides());
      if (!same && b0 < a1 && a0 < b1) return p;
    }
    st[3] = st[0];
  } else {
    st[3].assign(shape.size(), 0);
    int64_t run = 1;
    for (size_t k = shape.size(); k-- > 0;) {
      st[3][k] = run;
      run *= shape[k];
    }
  }
  // pointwise._merge_dims: drop size-1 dims, merge neighbours contiguous in every operand
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, 4> ms;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = !dims.empty();
    for (int k = 0; k < 4 && merge; ++k) merge = ms[k].back() == st[k][i] * shape[i];
    if (merge) {
      dims.back() *= shape[i];
      for (int k = 0; k < 4; ++k) ms[k].back() = st[k][i];
    } else {
      dims.push_back(shape[i]);
      for (int k = 0; k < 4; ++k) ms[k].push_back(st[k][i]);
    }
  }
  if (dims.size() > static_cast<size_t>(kMaxDims)) return p;  // Python splits the launch
  const size_t pad = kMaxDims - dims.size();
  std::array<int64_t, kMaxDims> d{1, 1, 1, 1};
  for (size_t i = 0; i < dims.size(); ++i) d[pad + i] = dims[i];
  p.ints[0] = n;
  p.ints[1] = d[1];
  p.ints[2] = d[2];
  p.ints[3] = d[3];
  p.idx64 = n > kI32Safe;
  for (int k = 0; k < 4; ++k) {
    int64_t reach = 0;
    for (size_t i = 0; i < dims.size(); ++i) {
      p.ints[4 + 4 * k + pad + i] = ms[k][i];
      reach += (dims[i] - 1) * std::abs(ms[k][i]);
    }
    if (reach > kI32Safe) p.idx64 = true;
  }
  p.ndim = std::max<int>(1, static_cast<int>(dims.size()));
  p.n = n;
  p.shape = std::move(shape);
  p.ok = true;
  return p;
}

}  // namespace
