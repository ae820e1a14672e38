"""aten.abs.default in C++ through load_inline: any strides (non-contiguous and stride-0
inputs read in place, the output laid out as eager's), zero-size and 0-dim tensors,
floating and integer dtypes (half and bfloat16 computed in float, as eager's opmath)."""

import torch
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/OpMathType.h>
#include <cmath>
#include <type_traits>
#include <vector>

torch::Tensor abs_any_strides(torch::Tensor x) {
  auto out = torch::empty_like(x);  // eager's layout: dense inputs keep their strides
  const int64_t n = x.numel();
  const int64_t nd = x.dim();
  const auto sizes = x.sizes();
  const auto xs = x.strides();
  const auto os = out.strides();
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "abs", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* src = x.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    std::vector<int64_t> index(nd, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t xo = 0, oo = 0;
      for (int64_t d = 0; d < nd; ++d) {
        xo += index[d] * xs[d];
        oo += index[d] * os[d];
      }
      const acc_t v = static_cast<acc_t>(src[xo]);
      if constexpr (std::is_floating_point<acc_t>::value) {
        dst[oo] = static_cast<scalar_t>(std::abs(v));  // NaN stays NaN, -0.0 becomes 0.0
      } else {
        dst[oo] = static_cast<scalar_t>(v < 0 ? -v : v);
      }
      for (int64_t d = nd - 1; d >= 0; --d) {  // the next index, last dim fastest
        if (++index[d] < sizes[d]) break;
        index[d] = 0;
      }
    }
  });
  return out;
}
"""

_ext = load_inline(
    name="opbench_example_abs_cpp", cpp_sources=_SOURCE, functions=["abs_any_strides"]
)


def abs__default_kernel_impl(self):
    if self.dtype.is_complex or self.dtype == torch.bool:
        raise NotImplementedError(f"abs on {self.dtype} is not written here")
    return _ext.abs_any_strides(self)
