// opbench's C++ gate: the CUDA driver functions it calls, opened with dlopen at the first
// launch (no CUDA headers and no CUDA library at build time). Included by gate.cpp alone:
// one translation unit (the anonymous namespace is gate.cpp's).
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstddef>
#include <string>

namespace {

using CUresult = int;
using CUfunction = void*;
using CUstream = void*;
using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, unsigned, CUstream, void**, void**);
using ErrorStringFn = CUresult (*)(CUresult, const char**);
using MemsetD8AsyncFn = CUresult (*)(uint64_t, unsigned char, size_t, CUstream);
// CUstreamCaptureStatus: 0 CU_STREAM_CAPTURE_STATUS_NONE
using StreamIsCapturingFn = CUresult (*)(CUstream, int*);
// cuTensorMapEncodeTiled: (map, data type, rank, address, dims, byte strides, box, element
// strides, interleave, swizzle, L2 promotion, out-of-bounds fill); the enums are ints
using TensorMapEncodeTiledFn = CUresult (*)(void*, int, uint32_t, void*, const uint64_t*,
                                            const uint64_t*, const uint32_t*, const uint32_t*,
                                            int, int, int, int);

struct Driver {
  LaunchKernelFn launch = nullptr;
  ErrorStringFn error_string = nullptr;
  MemsetD8AsyncFn memset = nullptr;  // a replay's zeroed buffers
  StreamIsCapturingFn is_capturing = nullptr;  // a replay's kept scratch
  TensorMapEncodeTiledFn encode_tiled = nullptr;  // a replay's tensor descriptors
  std::string why;  // empty when usable
};

const Driver& driver() {
  static const Driver d = [] {
    Driver d;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      d.why = std::string("cannot open libcuda.so.1: ") + (e ? e : "?");
      return d;
    }
    d.launch = reinterpret_cast<LaunchKernelFn>(dlsym(lib, "cuLaunchKernel"));
    d.error_string = reinterpret_cast<ErrorStringFn>(dlsym(lib, "cuGetErrorString"));
    d.memset = reinterpret_cast<MemsetD8AsyncFn>(dlsym(lib, "cuMemsetD8Async"));
    d.is_capturing = reinterpret_cast<StreamIsCapturingFn>(dlsym(lib, "cuStreamIsCapturing"));
    d.encode_tiled =
        reinterpret_cast<TensorMapEncodeTiledFn>(dlsym(lib, "cuTensorMapEncodeTiled"));
    if (d.launch == nullptr) d.why = "libcuda.so.1 has no cuLaunchKernel";
    return d;
  }();
  return d;
}

}  // namespace
