// SPDX-License-Identifier: Apache-2.0
// The FFT layer (fft.hpp): cuFFT on GPUs, FFTW3 or built-in transforms on host devices.
#include <backend/fft/fft.hpp>
#if TESSERA_HAS_CUDA
#include <backend/cuda/strided_copy.hpp>
#endif
#include <backend/runtime/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <string>
#include <vector>

#if TESSERA_HAS_CUDA
#include <cuda_runtime_api.h>
#include <cufft.h>
#endif
#ifndef TESSERA_HAS_FFTW
#define TESSERA_HAS_FFTW 0
#endif
#if TESSERA_HAS_FFTW
#include <fftw3.h>
#endif

namespace tessera::detail::fft {
namespace {

[[maybe_unused]] std::string describe(const FftTask& t) {
  std::string s = t.kind == kind::c2c ? "C2C" : t.kind == kind::r2c ? "R2C" : "C2R";
  s += t.type == precision::f32 ? " float" : " double";
  s += " n = [";
  for (int i = 0; i < t.rank; ++i) s += (i ? ", " : "") + std::to_string(t.dims[i].n);
  s += "]";
  for (int i = 0; i < t.loops; ++i) s += " x " + std::to_string(t.loop[i].n);
  return s;
}

// The key of a cached plan: everything that shapes it (not the pointers: plans are executed on
// new arrays, FFTW's new-array interface and cuFFT's exec calls both allow that).
[[maybe_unused]] std::vector<std::int64_t> plan_key(const FftTask& t, std::int64_t extra0, std::int64_t extra1,
                                                    std::int64_t extra2) {
  std::vector<std::int64_t> k{static_cast<std::int64_t>(t.kind), static_cast<std::int64_t>(t.type), t.rank, t.loops,
                              extra0, extra1, extra2};
  for (int i = 0; i < t.rank; ++i) k.insert(k.end(), {t.dims[i].n, t.dims[i].is, t.dims[i].os});
  for (int i = 0; i < t.loops; ++i) k.insert(k.end(), {t.loop[i].n, t.loop[i].is, t.loop[i].os});
  return k;
}

[[maybe_unused]] std::size_t in_bytes(const FftTask& t) {
  const std::size_t r = t.type == precision::f32 ? 4 : 8;
  return t.kind == kind::r2c ? r : 2 * r;
}
[[maybe_unused]] std::size_t out_bytes(const FftTask& t) {
  const std::size_t r = t.type == precision::f32 ? 4 : 8;
  return t.kind == kind::c2r ? r : 2 * r;
}

// -- host devices: FFTW3 ------------------------------------------------------------------------
#if TESSERA_HAS_FFTW
std::mutex& planner_mutex() {  // FFTW's planner (and plan destruction) is not thread-safe
  static std::mutex m;
  return m;
}

template <class R>
struct fftw_api;
template <>
struct fftw_api<double> {
  using plan = fftw_plan;
  using cx = fftw_complex;
  static int alignment(const void* p) { return fftw_alignment_of(static_cast<double*>(const_cast<void*>(p))); }
  static plan c2c(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* h, void* in, void* out, int sign) {
    return fftw_plan_guru64_dft(r, d, hr, h, static_cast<cx*>(in), static_cast<cx*>(out), sign, FFTW_ESTIMATE);
  }
  static plan r2c(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* h, void* in, void* out) {
    return fftw_plan_guru64_dft_r2c(r, d, hr, h, static_cast<double*>(in), static_cast<cx*>(out), FFTW_ESTIMATE);
  }
  static plan c2r(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* h, void* in, void* out) {
    return fftw_plan_guru64_dft_c2r(r, d, hr, h, static_cast<cx*>(in), static_cast<double*>(out), FFTW_ESTIMATE);
  }
  static void exec(plan p, kind k, const void* in, void* out) {
    void* i = const_cast<void*>(in);
    if (k == kind::c2c) fftw_execute_dft(p, static_cast<cx*>(i), static_cast<cx*>(out));
    else if (k == kind::r2c) fftw_execute_dft_r2c(p, static_cast<double*>(i), static_cast<cx*>(out));
    else fftw_execute_dft_c2r(p, static_cast<cx*>(i), static_cast<double*>(out));
  }
};
template <>
struct fftw_api<float> {
  using plan = fftwf_plan;
  using cx = fftwf_complex;
  static int alignment(const void* p) { return fftwf_alignment_of(static_cast<float*>(const_cast<void*>(p))); }
  static plan c2c(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* h, void* in, void* out, int sign) {
    return fftwf_plan_guru64_dft(r, d, hr, h, static_cast<cx*>(in), static_cast<cx*>(out), sign, FFTW_ESTIMATE);
  }
  static plan r2c(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* h, void* in, void* out) {
    return fftwf_plan_guru64_dft_r2c(r, d, hr, h, static_cast<float*>(in), static_cast<cx*>(out), FFTW_ESTIMATE);
  }
  static plan c2r(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* h, void* in, void* out) {
    return fftwf_plan_guru64_dft_c2r(r, d, hr, h, static_cast<cx*>(in), static_cast<float*>(out), FFTW_ESTIMATE);
  }
  static void exec(plan p, kind k, const void* in, void* out) {
    void* i = const_cast<void*>(in);
    if (k == kind::c2c) fftwf_execute_dft(p, static_cast<cx*>(i), static_cast<cx*>(out));
    else if (k == kind::r2c) fftwf_execute_dft_r2c(p, static_cast<float*>(i), static_cast<cx*>(out));
    else fftwf_execute_dft_c2r(p, static_cast<cx*>(i), static_cast<float*>(out));
  }
};

// Plans live as long as the process (like cuBLAS handles): an FFTW_ESTIMATE plan is small, and a
// program uses few shapes. The key holds the direction, whether the pass is in place and both
// arrays' SIMD alignment, which FFTW's new-array execute requires to match the planned ones.
template <class R>
typename fftw_api<R>::plan host_plan(const FftTask& t) {
  using api = fftw_api<R>;
  static std::map<std::vector<std::int64_t>, typename api::plan> plans;
  const auto key = plan_key(t, t.sign, t.in == t.out, api::alignment(t.in) * 64 + api::alignment(t.out));
  std::lock_guard<std::mutex> lock(planner_mutex());
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  fftw_iodim64 d[max_rank], h[max_loops];
  for (int i = 0; i < t.rank; ++i) d[i] = {t.dims[i].n, t.dims[i].is, t.dims[i].os};
  for (int i = 0; i < t.loops; ++i) h[i] = {t.loop[i].n, t.loop[i].is, t.loop[i].os};
  // FFTW stores the last dimension fastest: our dims are fastest first, so they go in reverse.
  fftw_iodim64 dr[max_rank];
  for (int i = 0; i < t.rank; ++i) dr[i] = d[t.rank - 1 - i];
  // FFTW_ESTIMATE plans without touching the arrays, so the caller's data is safe here.
  typename api::plan p = t.kind == kind::c2c ? api::c2c(t.rank, dr, t.loops, h, const_cast<void*>(t.in), t.out, t.sign)
                         : t.kind == kind::r2c ? api::r2c(t.rank, dr, t.loops, h, const_cast<void*>(t.in), t.out)
                                               : api::c2r(t.rank, dr, t.loops, h, const_cast<void*>(t.in), t.out);
  if (p == nullptr) {
    throw backend_error(std::string("tessera: fftw") + (std::is_same_v<R, float> ? "f" : "") +
                        "_plan_guru64_dft failed (returned no plan) for " + describe(t));
  }
  plans.emplace(key, p);
  return p;
}

template <class R>
void host_fft(const FftTask& t) {
  fftw_api<R>::exec(host_plan<R>(t), t.kind, t.in, t.out);  // new-array execute is thread-safe
}

#else
// -- host devices without FFTW: radix-2 for powers of two, a direct DFT otherwise, in double ----
using cd = std::complex<double>;

void dft_line(std::vector<cd>& v, int sign, std::vector<cd>& tmp) {
  const std::size_t n = v.size();
  if (n <= 1) return;
  const double w0 = sign * 2.0 * std::numbers::pi / double(n);
  if ((n & (n - 1)) == 0) {
    for (std::size_t i = 1, j = 0; i < n; ++i) {  // bit reversal
      std::size_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(v[i], v[j]);
    }
    for (std::size_t len = 2; len <= n; len <<= 1) {
      for (std::size_t i = 0; i < n; i += len) {
        for (std::size_t k = 0; k < len / 2; ++k) {
          // Twiddles from the exact angle each time (no running product), for accuracy.
          const cd w = std::polar(1.0, w0 * double(k * (n / len)));
          const cd a = v[i + k], b = v[i + k + len / 2] * w;
          v[i + k] = a + b;
          v[i + k + len / 2] = a - b;
        }
      }
    }
    return;
  }
  tmp.assign(n, cd(0));
  for (std::size_t k = 0; k < n; ++k) {
    cd s(0);
    for (std::size_t j = 0; j < n; ++j) s += v[j] * std::polar(1.0, w0 * double((j * k) % n));
    tmp[k] = s;
  }
  v.swap(tmp);
}

// Calls f(in_offset, out_offset) for every index of the given dims (an odometer).
template <class F>
void for_each_offset(const std::vector<iodim>& dims, F&& f) {
  for (auto& d : dims)
    if (d.n == 0) return;
  std::vector<std::int64_t> idx(dims.size(), 0);
  std::int64_t ioff = 0, ooff = 0;
  while (true) {
    f(ioff, ooff);
    std::size_t k = 0;
    for (; k < dims.size(); ++k) {
      if (++idx[k] < dims[k].n) {
        ioff += dims[k].is, ooff += dims[k].os;
        break;
      }
      ioff -= (dims[k].n - 1) * dims[k].is, ooff -= (dims[k].n - 1) * dims[k].os;
      idx[k] = 0;
    }
    if (k == dims.size()) return;
  }
}

template <class R>
void host_fft(const FftTask& t) {
  using C = std::complex<R>;
  std::vector<cd> line, tmp;
  for (int p = 0; p < t.rank; ++p) {  // one dimension at a time: the first reads the input
    std::vector<iodim> others;
    for (int i = 0; i < t.rank; ++i)
      if (i != p) others.push_back(p == 0 ? t.dims[i] : iodim{t.dims[i].n, t.dims[i].os, t.dims[i].os});
    for (int i = 0; i < t.loops; ++i)
      others.push_back(p == 0 ? t.loop[i] : iodim{t.loop[i].n, t.loop[i].os, t.loop[i].os});
    const iodim d = p == 0 ? t.dims[p] : iodim{t.dims[p].n, t.dims[p].os, t.dims[p].os};
    const void* src = p == 0 ? t.in : t.out;
    const std::int64_t n = d.n, half = n / 2 + 1;
    for_each_offset(others, [&](std::int64_t io, std::int64_t oo) {
      line.assign(static_cast<std::size_t>(n), cd(0));
      if (t.kind == kind::r2c) {
        const R* x = static_cast<const R*>(src) + io;
        for (std::int64_t j = 0; j < n; ++j) line[j] = cd(double(x[j * d.is]), 0.0);
      } else if (t.kind == kind::c2r) {
        const C* x = static_cast<const C*>(src) + io;
        for (std::int64_t j = 0; j < half && j < n; ++j) line[j] = cd(x[j * d.is].real(), x[j * d.is].imag());
        for (std::int64_t j = half; j < n; ++j) line[j] = std::conj(line[n - j]);
      } else {
        const C* x = static_cast<const C*>(src) + io;
        for (std::int64_t j = 0; j < n; ++j) line[j] = cd(x[j * d.is].real(), x[j * d.is].imag());
      }
      dft_line(line, t.kind == kind::r2c ? -1 : t.kind == kind::c2r ? 1 : t.sign, tmp);
      if (t.kind == kind::c2r) {
        R* y = static_cast<R*>(t.out) + oo;
        for (std::int64_t j = 0; j < n; ++j) y[j * d.os] = R(line[j].real());
      } else {
        C* y = static_cast<C*>(t.out) + oo;
        const std::int64_t m = t.kind == kind::r2c ? half : n;
        for (std::int64_t j = 0; j < m; ++j) y[j * d.os] = C(R(line[j].real()), R(line[j].imag()));
      }
    });
  }
}
#endif

// -- GPUs: cuFFT --------------------------------------------------------------------------------
#if TESSERA_HAS_CUDA
const char* cufft_result_name(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "cuFFT error";
  }
}

void check(cufftResult r, const char* call, int device, const FftTask& t) {
  if (r == CUFFT_SUCCESS) return;
  throw backend_error(std::string("tessera: ") + call + " failed on " + rt::info(device).name + " for " + describe(t) +
                      ": " + cufft_result_name(r) + " (" + std::to_string(int(r)) + ")");
}

struct gpu_plan {
  cufftHandle handle;
  std::size_t work_bytes;
  int batch_loop;  // which loop is cuFFT's batch (-1: none); the other runs on the host
};

// The work area of each GPU, shared by every plan of that device: passes on one device run in
// its stream's order, so one area serves them all. Taken from the runtime's allocator (the
// free-memory guard, the per-device cache); grown, never shrunk. A replaced area goes back to the
// runtime's cache, which reuses it only behind the streams' events, so a queued pass keeps it.
struct work_area {
  std::mutex m;  // also serializes cufftSetWorkArea + exec of this device's plans
  void* p = nullptr;
  std::size_t bytes = 0;
};

work_area& area_of(int device) {
  static std::mutex m;
  static std::map<int, std::unique_ptr<work_area>> areas;
  std::lock_guard<std::mutex> lock(m);
  auto& a = areas[device];
  if (!a) a = std::make_unique<work_area>();
  return *a;
}

// Plans are cached per (shape, type, device) for the life of the process, like cuBLAS handles:
// with auto-allocation off they hold no work area, only their small descriptors.
const gpu_plan& plan_for(const FftTask& t, int device) {
  static std::mutex m;
  static std::map<std::vector<std::int64_t>, gpu_plan> plans;
  const auto key = plan_key(t, device, 0, 0);
  std::lock_guard<std::mutex> lock(m);
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  // cuFFT's first dimension is the slowest: ours are fastest first, so they go in reverse. The
  // dims of one pass are nested (each stride the previous stride times its length), which is
  // cuFFT's advanced layout with the embeds equal to the lengths.
  long long n[max_rank], inembed[max_rank], onembed[max_rank];
  for (int i = 0; i < t.rank; ++i) {
    const iodim& d = t.dims[t.rank - 1 - i];
    n[i] = d.n;
    inembed[i] = t.kind == kind::c2r ? d.n / 2 + 1 : d.n;
    onembed[i] = t.kind == kind::r2c ? d.n / 2 + 1 : d.n;
  }
  for (int i = 0; i + 1 < t.rank; ++i) {
    if (t.dims[i + 1].is != t.dims[i].is * t.dims[i].n || t.dims[i + 1].os != t.dims[i].os * t.dims[i].n) {
      throw invalid_argument("tessera: internal: an FFT pass over non-nested dimensions (" + describe(t) +
                             ") cannot be one cuFFT plan");
    }
  }
  gpu_plan p{0, 0, -1};
  // With one batch the distances are unused; give cuFFT the spans anyway.
  long long batch = 1, idist = t.dims[0].is, odist = t.dims[0].os;
  for (int i = 0; i < t.rank; ++i) idist *= inembed[i], odist *= onembed[i];
  for (int i = 0; i < t.loops; ++i)
    if (p.batch_loop < 0 || t.loop[i].n > t.loop[p.batch_loop].n) p.batch_loop = i;
  if (p.batch_loop >= 0) {
    batch = t.loop[p.batch_loop].n, idist = t.loop[p.batch_loop].is, odist = t.loop[p.batch_loop].os;
  }
  const cufftType type = t.kind == kind::c2c ? (t.type == precision::f32 ? CUFFT_C2C : CUFFT_Z2Z)
                         : t.kind == kind::r2c ? (t.type == precision::f32 ? CUFFT_R2C : CUFFT_D2Z)
                                               : (t.type == precision::f32 ? CUFFT_C2R : CUFFT_Z2D);
  // The basic layout (unit strides, batches back to back) goes without embeds, as a plain
  // cufftPlanMany would: cuFFT then takes its contiguous code paths.
  long long in_span = 1, out_span = 1;
  for (int i = 0; i < t.rank; ++i) in_span *= inembed[i], out_span *= onembed[i];
  const bool basic = t.dims[0].is == 1 && t.dims[0].os == 1 && (batch == 1 || (idist == in_span && odist == out_span));
  if (basic) idist = in_span, odist = out_span;
  check(cufftCreate(&p.handle), "cufftCreate", device, t);
  try {
    // The runtime's allocator provides the work area (below), so that it counts against the
    // free-memory guard and returns to the device's cache.
    check(cufftSetAutoAllocation(p.handle, 0), "cufftSetAutoAllocation", device, t);
    check(cufftMakePlanMany64(p.handle, t.rank, n, basic ? nullptr : inembed, t.dims[0].is, idist,
                              basic ? nullptr : onembed, t.dims[0].os, odist, type, batch, &p.work_bytes),
          "cufftMakePlanMany64", device, t);
    check(cufftSetStream(p.handle, static_cast<cudaStream_t>(rt::stream(device))), "cufftSetStream", device, t);
  } catch (...) {
    (void)cufftDestroy(p.handle);
    throw;
  }
  return plans.emplace(key, p).first->second;
}

void gpu_fft(const FftTask& t, int device);

// A real pass over strided data (its transformed dim not the fastest one) goes through contiguous
// buffers: gathered by a strided copy on the device's stream, transformed in cuFFT's basic
// layout, scattered back. cuFFT refused the strided layout itself (cufftExecD2Z:
// CUFFT_INVALID_VALUE for an R2C of n = 8 along dim 1 of a 5 x 8 x 6 double array, on an H100).
void gpu_fft_packed(const FftTask& t, int device) {
  const std::int64_t n = t.dims[0].n;
  const std::int64_t nin = t.kind == kind::c2r ? n / 2 + 1 : n, nout = t.kind == kind::r2c ? n / 2 + 1 : n;
  // The longest loop goes next to the transformed dim: it becomes cuFFT's batch.
  int order[max_loops] = {0, 1};
  if (t.loops == 2 && t.loop[1].n > t.loop[0].n) order[0] = 1, order[1] = 0;
  std::int64_t ext_in[3] = {nin, 1, 1}, ext_out[3] = {nout, 1, 1};
  std::int64_t user_in[3] = {t.dims[0].is, 0, 0}, user_out[3] = {t.dims[0].os, 0, 0};
  std::int64_t packed_in[3] = {1, 0, 0}, packed_out[3] = {1, 0, 0};
  FftTask c = t;
  c.dims[0].is = 1, c.dims[0].os = 1;
  std::int64_t span_in = nin, span_out = nout;
  for (int i = 0; i < t.loops; ++i) {
    const iodim& l = t.loop[order[i]];
    ext_in[1 + i] = ext_out[1 + i] = l.n;
    user_in[1 + i] = l.is, user_out[1 + i] = l.os;
    packed_in[1 + i] = span_in, packed_out[1 + i] = span_out;
    c.loop[i] = {l.n, span_in, span_out};
    span_in *= l.n, span_out *= l.n;
  }
  const int nd = 1 + t.loops;
  const std::size_t ib = in_bytes(t), ob = out_bytes(t);
  const std::size_t in_total = static_cast<std::size_t>(span_in) * ib, out_total = static_cast<std::size_t>(span_out) * ob;
  void* in = rt::allocate(device, in_total, memory::device);
  void* out = nullptr;
  try {
    out = rt::allocate(device, out_total, memory::device);
    c.in = in, c.out = out;
    cuda::strided_copy(device, t.in, user_in, in, packed_in, ext_in, nd, static_cast<int>(ib));
    gpu_fft(c, device);
    cuda::strided_copy(device, out, packed_out, t.out, user_out, ext_out, nd, static_cast<int>(ob));
  } catch (...) {
    rt::deallocate(device, in, in_total, memory::device);
    if (out) rt::deallocate(device, out, out_total, memory::device);
    throw;
  }
  // Back to the device's cache in stream order: reused only after the work queued above.
  rt::deallocate(device, in, in_total, memory::device);
  rt::deallocate(device, out, out_total, memory::device);
}

void gpu_fft(const FftTask& t, int device) {
  if (t.kind != kind::c2c && (t.dims[0].is != 1 || t.dims[0].os != 1)) return gpu_fft_packed(t, device);
  rt::device_restorer restore;
  rt::set_device(device);  // cuFFT plans belong to the device current when they are made
  const gpu_plan& p = plan_for(t, device);
  work_area& a = area_of(device);
  std::lock_guard<std::mutex> lock(a.m);
  if (p.work_bytes > a.bytes) {
    void* grown = rt::allocate(device, p.work_bytes, memory::device);
    if (a.p != nullptr) rt::deallocate(device, a.p, a.bytes, memory::device);
    a.p = grown, a.bytes = p.work_bytes;
  }
  if (p.work_bytes > 0) check(cufftSetWorkArea(p.handle, a.p), "cufftSetWorkArea", device, t);
  const int host_loop = t.loops == 2 ? 1 - p.batch_loop : -1;
  const std::int64_t reps = host_loop >= 0 ? t.loop[host_loop].n : 1;
  const std::size_t ib = in_bytes(t), ob = out_bytes(t);
  for (std::int64_t r = 0; r < reps; ++r) {
    const std::int64_t io = host_loop >= 0 ? r * t.loop[host_loop].is : 0;
    const std::int64_t oo = host_loop >= 0 ? r * t.loop[host_loop].os : 0;
    void* in = const_cast<char*>(static_cast<const char*>(t.in)) + io * static_cast<std::int64_t>(ib);
    void* out = static_cast<char*>(t.out) + oo * static_cast<std::int64_t>(ob);
    const int dir = t.sign < 0 ? CUFFT_FORWARD : CUFFT_INVERSE;
    if (t.type == precision::f32) {
      if (t.kind == kind::c2c)
        check(cufftExecC2C(p.handle, static_cast<cufftComplex*>(in), static_cast<cufftComplex*>(out), dir),
              "cufftExecC2C", device, t);
      else if (t.kind == kind::r2c)
        check(cufftExecR2C(p.handle, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(out)), "cufftExecR2C",
              device, t);
      else
        check(cufftExecC2R(p.handle, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)), "cufftExecC2R",
              device, t);
    } else {
      if (t.kind == kind::c2c)
        check(cufftExecZ2Z(p.handle, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleComplex*>(out), dir),
              "cufftExecZ2Z", device, t);
      else if (t.kind == kind::r2c)
        check(cufftExecD2Z(p.handle, static_cast<cufftDoubleReal*>(in), static_cast<cufftDoubleComplex*>(out)),
              "cufftExecD2Z", device, t);
      else
        check(cufftExecZ2D(p.handle, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleReal*>(out)),
              "cufftExecZ2D", device, t);
    }
  }
}
#endif

// A host pass with a batch loop is cut along its longest loop into pieces run on the runtime's
// host thread pool (FFTW's execute is thread-safe; the built-in transforms share nothing), so one
// host device uses every host thread as the elementwise loops do. Pieces of at least 2^14
// elements: below that the pool's hand-off costs more than it saves.
inline constexpr std::int64_t host_piece_elements = std::int64_t(1) << 14;

struct host_split {
  const FftTask* task;
  int loop;
  std::int64_t pieces;
  void (*run)(const FftTask&);
};

void run_split(const FftTask& t, void (*run)(const FftTask&)) {
  std::int64_t total = 1;
  for (int i = 0; i < t.rank; ++i) total *= t.dims[i].n;
  int longest = -1;
  for (int i = 0; i < t.loops; ++i) {
    total *= t.loop[i].n;
    if (longest < 0 || t.loop[i].n > t.loop[longest].n) longest = i;
  }
  const std::int64_t threads = rt::host_threads();
  std::int64_t pieces = longest < 0 ? 1 : std::min({t.loop[longest].n, threads, total / host_piece_elements});
  if (pieces <= 1) {
    run(t);
    return;
  }
  const host_split ctx{&t, longest, pieces, run};
  rt::parallel_for(
      pieces,
      [](const void* c, std::int64_t i) {
        const host_split& h = *static_cast<const host_split*>(c);
        FftTask piece = *h.task;
        const iodim l = h.task->loop[h.loop];
        // Balanced pieces: the first n % pieces take one more index (at most two plan shapes).
        const std::int64_t base = l.n / h.pieces, extra = l.n % h.pieces;
        const std::int64_t first = i * base + std::min(i, extra);
        piece.loop[h.loop].n = base + (i < extra ? 1 : 0);
        piece.in = static_cast<const char*>(h.task->in) + first * l.is * static_cast<std::int64_t>(in_bytes(*h.task));
        piece.out = static_cast<char*>(h.task->out) + first * l.os * static_cast<std::int64_t>(out_bytes(*h.task));
        h.run(piece);
      },
      &ctx);
}

bool empty(const FftTask& t) {
  for (int i = 0; i < t.rank; ++i)
    if (t.dims[i].n == 0) return true;
  for (int i = 0; i < t.loops; ++i)
    if (t.loop[i].n == 0) return true;
  return false;
}

}  // namespace

const char* host_fft_name() {
#if TESSERA_HAS_FFTW
  return "FFTW3";
#else
  return "built-in (radix-2 for powers of two, O(n^2) DFT otherwise; no FFTW3 at configure time)";
#endif
}

}  // namespace tessera::detail::fft

namespace tessera::detail::host {

void run(const FftTask& t) {
  using namespace fft;
  if (empty(t)) return;
  run_split(t, t.type == precision::f32 ? &host_fft<float> : &host_fft<double>);
}

}  // namespace tessera::detail::host

namespace tessera::detail::cuda {

void run(const FftTask& t, int device, int shard) {
  (void)shard;
#if TESSERA_HAS_CUDA
  if (fft::empty(t)) return;
  fft::gpu_fft(t, device);
#else
  (void)t;
  throw error("tessera: this build has no CUDA, so an FFT cannot run on " + rt::info(device).name);
#endif
}

}  // namespace tessera::detail::cuda
