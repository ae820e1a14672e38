"""aten.abs.default in CUDA through load_inline, for contiguous floating inputs. Other
inputs are declined with NotImplementedError here; a complete kernel handles them
(strides passed to the kernel)."""

import torch
from torch.utils.cpp_extension import load_inline

_DECLARATION = "torch::Tensor abs_contiguous(torch::Tensor x);"

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <typename scalar_t>
__global__ void abs_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst,
                           int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = static_cast<float>(src[i]);  // half and bfloat16 computed in float
    dst[i] = static_cast<scalar_t>(v < 0.0f ? -v : v);
  }
}

torch::Tensor abs_contiguous(torch::Tensor x) {
  auto out = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "abs", [&] {
    abs_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

_ext = load_inline(
    name="opbench_example_abs_cuda",
    cpp_sources=_DECLARATION,
    cuda_sources=_CUDA,
    functions=["abs_contiguous"],
)


def abs__default_kernel_impl(self):
    if not self.is_cuda or not self.is_contiguous():
        raise NotImplementedError("this example handles contiguous CUDA tensors only")
    if self.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise NotImplementedError("this example handles f16/bf16/f32 only")
    return _ext.abs_contiguous(self)
