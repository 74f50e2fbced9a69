// SPDX-License-Identifier: Apache-2.0
// Plain-CUDA baselines of bench/reduce.cpp: every cub*, cuda* and nccl* call that benchmark
// needs lives here, so that the program holds none. Include only from translation units compiled
// by nvcc (guard the #include with #if defined(__CUDACC__)).
//
//  * cub_sum: plain cub::DeviceReduce::Sum of one slice of floats on one GPU, with its temporary
//    storage allocated once, outside any timing.
//  * cub_sum_ms / cub_sum_to_host_ms: that sum timed with CUDA events, alone (kernels only) or
//    with the result copied to the host and waited for (what a host scalar costs).
//  * plain_host_sum: one sum over slices on one or several GPUs with the result on the host, by
//    the plain paths a CUDA programmer would write: a copy per GPU, NCCL then a copy, or CUB
//    writing straight into mapped pinned host memory.
//  * nccl_comms / nccl_allreduce_ms: communicators from ncclCommInitAll, and raw in-place
//    ncclAllReduce timed with CUDA events.
//
// Everything runs on Tessera's per-device streams (the event timer of cuda_support.cuh times
// those), on data the caller passes by pointer: the baselines read the very buffers Tessera
// reads. Every call is checked; a failure throws backend_error naming the call and the device.
// Allocations check the device's free memory first and throw out_of_memory when they do not fit.
#pragma once
#if !defined(__CUDACC__)
#error "bench/support/reduce_support.cuh needs nvcc; guard its #include with #if defined(__CUDACC__)"
#endif
#include <bench/support/cuda_support.cuh>

#include <cub/device/device_reduce.cuh>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace tessera::bench::cuda {

inline void check_nccl(ncclResult_t r, const char* call, const std::string& where) {
  if (r == ncclSuccess) return;
  throw backend_error(std::string("bench: ") + call + " failed on " + where + ": " + ncclGetErrorString(r));
}

// NCCL switches devices with cudaSetDevice behind the runtime's back; this refreshes the
// runtime's cached current device so that the next rt::set_device really switches.
inline void resync_current_device() { (void)detail::rt::get_cuda_device(); }

// NVLink SHARP (NVLS) multicast stays off on the lent machines; set before any communicator
// is made (does not override a value the user exported).
inline void disable_nvls() { ::setenv("NCCL_NVLS_ENABLE", "0", 0); }

// A contiguous run of floats on one GPU: what one plain sum reads.
struct float_slice {
  Device device;
  const float* data;
  std::size_t n;
};

// Calls f with n as int (what a plain user passes) when it fits, as int64_t otherwise.
template <class F>
void with_count(std::size_t n, F&& f) {
  if (n < (std::size_t(1) << 31)) f(static_cast<int>(n));
  else f(static_cast<std::int64_t>(n));
}

// Plain cub::DeviceReduce::Sum of one slice on its device's stream. Construction queries and
// allocates the temporary storage and a device result slot once (cudaMalloc), so that a call
// queues the CUB kernels and nothing else.
class cub_sum {
 public:
  explicit cub_sum(float_slice s) : s_(s) {
    detail::rt::set_device(s.device.id());
    std::size_t bytes = 0;
    with_count(s.n, [&](auto n) {
      check(cub::DeviceReduce::Sum(nullptr, bytes, s.data, static_cast<float*>(nullptr), n, stream_of(s.device)),
            "cub::DeviceReduce::Sum (temporary storage query)", s.device);
    });
    temp_bytes_ = bytes;
    detail::rt::check_free(s.device.id(), 256 + bytes + (std::size_t(16) << 20));
    buf_ = std::make_unique<device_buffer>(s.device, 256 + bytes);
  }

  // Queues the sum on Tessera's stream of the slice's device; the result lands in `out`
  // (device memory or mapped host memory), by default in this object's device slot.
  void launch(float* out = nullptr) const {
    detail::rt::set_device(s_.device.id());
    float* dst = out ? out : device_result();
    void* temp = static_cast<char*>(buf_->get()) + 256;
    std::size_t bytes = temp_bytes_;
    with_count(s_.n, [&](auto n) {
      check(cub::DeviceReduce::Sum(temp, bytes, s_.data, dst, n, stream_of(s_.device)), "cub::DeviceReduce::Sum",
            s_.device);
    });
  }

  float* device_result() const { return static_cast<float*>(buf_->get()); }
  const float_slice& slice() const { return s_; }

 private:
  float_slice s_;
  std::size_t temp_bytes_ = 0;
  std::unique_ptr<device_buffer> buf_;
};

// Pinned host memory for `count` floats, one 64-byte slot each (so that GPUs writing their own
// slot over the bus never share a cache line). `mapped`: also mapped into every GPU's address
// space (cudaHostAllocMapped | cudaHostAllocPortable), for kernels that write results straight
// to the host.
class pinned_floats {
 public:
  pinned_floats(std::size_t count, bool mapped, Device d) {
    const unsigned flags = cudaHostAllocPortable | (mapped ? cudaHostAllocMapped : 0u);
    detail::rt::set_device(d.id());
    check(cudaHostAlloc(&p_, (count ? count : 1) * slot, flags), "cudaHostAlloc", d);
  }
  ~pinned_floats() {
    (void)cudaFreeHost(p_);
    (void)cudaGetLastError();
  }
  pinned_floats(const pinned_floats&) = delete;
  pinned_floats& operator=(const pinned_floats&) = delete;

  float* host(std::size_t i) const { return reinterpret_cast<float*>(static_cast<char*>(p_) + i * slot); }
  // The device address of slot i as seen by `d` (memory allocated with mapped = true only).
  float* device(std::size_t i, Device d) const {
    detail::rt::set_device(d.id());
    void* dp = nullptr;
    check(cudaHostGetDevicePointer(&dp, host(i), 0), "cudaHostGetDevicePointer", d);
    return static_cast<float*>(dp);
  }

 private:
  static constexpr std::size_t slot = 64;
  void* p_ = nullptr;
};

// ms per plain CUB sum (kernels only, the result stays on the device), timed like Tessera's
// asynchronous work: `batch` sums back to back per sample behind the spin kernel.
inline std::vector<double> cub_sum_ms(const float_slice& s, int warmup, int reps, int batch, double spin_us,
                                      int* late = nullptr) {
  cub_sum sum(s);
  auto ms = time_ms(
      DeviceSet{s.device}, warmup, reps,
      [&] {
        for (int k = 0; k < batch; ++k) sum.launch();
      },
      spin_us, late);
  check(cudaStreamSynchronize(stream_of(s.device)), "cudaStreamSynchronize", s.device);
  for (auto& m : ms) m /= batch;
  return ms;
}

// ms per plain CUB sum with the result on the host: CUB, cudaMemcpyAsync of the 4-byte result
// into pinned host memory on the same stream, cudaStreamSynchronize. Timed exactly like a
// Tessera call that returns a host scalar: one call per sample, queued behind the spin kernel,
// the stop event recorded once the host has the value (so the host's wake-up is included on
// both sides, the host's launch latency on neither). `value` receives the last result.
inline std::vector<double> cub_sum_to_host_ms(const float_slice& s, int warmup, int reps, double spin_us,
                                              float* value = nullptr) {
  cub_sum sum(s);
  pinned_floats result(1, false, s.device);
  const cudaStream_t st = stream_of(s.device);
  auto ms = time_ms(
      DeviceSet{s.device}, warmup, reps,
      [&] {
        sum.launch();
        check(cudaMemcpyAsync(result.host(0), sum.device_result(), sizeof(float), cudaMemcpyDeviceToHost, st),
              "cudaMemcpyAsync", s.device);
        check(cudaStreamSynchronize(st), "cudaStreamSynchronize", s.device);
      },
      spin_us, nullptr);  // no `late` count: the host waits inside every sample by design
  if (value) *value = *result.host(0);
  return ms;
}

// Communicators over `gpus` (rank r = gpus[r]) made by ncclCommInitAll.
class nccl_comms {
 public:
  explicit nccl_comms(DeviceSet gpus) : devs_(std::move(gpus)) {
    if (devs_.empty()) throw invalid_argument("bench: nccl_comms needs at least one GPU");
    disable_nvls();
    std::vector<int> ordinals;
    for (auto d : devs_) ordinals.push_back(d.ordinal());
    comms_.assign(devs_.size(), nullptr);
    const int saved = detail::rt::get_cuda_device();
    const ncclResult_t r = ncclCommInitAll(comms_.data(), static_cast<int>(devs_.size()), ordinals.data());
    detail::rt::restore_cuda_device(saved);
    if (r != ncclSuccess) comms_.clear();
    check_nccl(r, "ncclCommInitAll", detail::device_list(devs_));
  }
  ~nccl_comms() {
    for (auto c : comms_)
      if (c) (void)ncclCommDestroy(c);
    resync_current_device();
  }
  nccl_comms(const nccl_comms&) = delete;
  nccl_comms& operator=(const nccl_comms&) = delete;

  ncclComm_t operator[](std::size_t r) const { return comms_[r]; }
  const DeviceSet& devices() const { return devs_; }
  std::size_t size() const { return devs_.size(); }

 private:
  DeviceSet devs_;
  std::vector<ncclComm_t> comms_;
};

// Queues one in-place ncclAllReduce (sum) of `count` floats per rank, one NCCL group over all
// ranks, on Tessera's streams.
inline void nccl_allreduce_sum(const nccl_comms& comms, const std::vector<float*>& buffers, std::size_t count) {
  check_nccl(ncclGroupStart(), "ncclGroupStart", detail::device_list(comms.devices()));
  for (std::size_t r = 0; r < comms.size(); ++r) {
    const Device d = comms.devices()[r];
    check_nccl(ncclAllReduce(buffers[r], buffers[r], count, ncclFloat, ncclSum, comms[r], stream_of(d)),
               "ncclAllReduce", d.name());
  }
  const ncclResult_t r = ncclGroupEnd();
  resync_current_device();
  check_nccl(r, "ncclGroupEnd", detail::device_list(comms.devices()));
}

// Zeroed cudaMalloc buffers of `count` floats, one per GPU; every GPU's free memory is checked
// before anything is allocated.
class device_floats {
 public:
  device_floats(const DeviceSet& gpus, std::size_t count) {
    for (auto d : gpus) detail::rt::check_free(d.id(), count * sizeof(float) + (std::size_t(64) << 20));
    for (auto d : gpus) {
      bufs_.push_back(std::make_unique<device_buffer>(d, count * sizeof(float)));
      check(cudaMemsetAsync(bufs_.back()->get(), 0, count * sizeof(float), stream_of(d)), "cudaMemsetAsync", d);
      ptrs_.push_back(static_cast<float*>(bufs_.back()->get()));
    }
  }
  const std::vector<float*>& pointers() const { return ptrs_; }

 private:
  std::vector<std::unique_ptr<device_buffer>> bufs_;
  std::vector<float*> ptrs_;
};

// ms per raw in-place ncclAllReduce of `count` floats on each buffers[r], event-timed on every
// rank's stream (start on the first rank's, stop when the last rank's stream is done), `batch`
// collectives back to back per sample.
inline std::vector<double> nccl_allreduce_ms(const nccl_comms& comms, const std::vector<float*>& buffers,
                                             std::size_t count, int warmup, int reps, int batch, double spin_us,
                                             int* late = nullptr) {
  if (buffers.size() != comms.size()) throw invalid_argument("bench: nccl_allreduce_ms needs one buffer per rank");
  auto ms = time_ms(
      comms.devices(), warmup, reps,
      [&] {
        for (int k = 0; k < batch; ++k) nccl_allreduce_sum(comms, buffers, count);
      },
      spin_us, late);
  for (auto d : comms.devices()) {
    detail::rt::set_device(d.id());
    check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize", d);
  }
  for (auto& m : ms) m /= batch;
  return ms;
}

// The plain ways to get sum(a) onto the host when a is split into slices over GPUs. The copies
// are cudaMemcpyAsync on the slice's stream followed by cudaStreamSynchronize: a plain cudaMemcpy
// runs on the legacy default stream, which does not wait for Tessera's non-blocking streams.
enum class host_sum_path {
  copy_each,       // CUB on every GPU, then cudaMemcpyAsync of each result to pinned host memory
  nccl_allreduce,  // CUB on every GPU, ncclAllReduce of the partials, copy rank 0's result
  mapped,          // CUB writes each partial straight into mapped pinned host memory
};

inline const char* host_sum_path_name(host_sum_path p) {
  switch (p) {
    case host_sum_path::copy_each: return "cub + cudaMemcpyAsync each";
    case host_sum_path::nccl_allreduce: return "cub + ncclAllReduce + copy";
    default: return "cub into mapped pinned";
  }
}

// One sum over `slices` with the result on the host, by one plain path. Construction allocates
// everything (temporary storage, pinned and mapped memory); each call queues the work on every
// GPU first, then waits, and returns the total (partials added on the host in double).
class plain_host_sum {
 public:
  plain_host_sum(const std::vector<float_slice>& slices, host_sum_path path, const nccl_comms* comms = nullptr)
      : path_(path) {
    if (slices.empty()) throw invalid_argument("bench: plain_host_sum needs at least one slice");
    for (auto& s : slices) sums_.emplace_back(s);
    host_ = std::make_unique<pinned_floats>(slices.size(), path == host_sum_path::mapped, slices[0].device);
    if (path == host_sum_path::mapped)
      for (std::size_t i = 0; i < slices.size(); ++i) mapped_.push_back(host_->device(i, slices[i].device));
    if (path == host_sum_path::nccl_allreduce) {
      if (!comms || comms->size() != slices.size())
        throw invalid_argument("bench: the NCCL path needs communicators over the slices' GPUs");
      for (std::size_t i = 0; i < slices.size(); ++i)
        if (!(comms->devices()[i] == slices[i].device))
          throw invalid_argument("bench: slice " + std::to_string(i) + " is not on rank " + std::to_string(i));
      for (auto& s : sums_) partials_.push_back(s.device_result());
    }
    comms_ = comms;
  }

  float operator()() {
    const std::size_t G = sums_.size();
    switch (path_) {
      case host_sum_path::copy_each:
        for (std::size_t i = 0; i < G; ++i) {
          const Device d = sums_[i].slice().device;
          sums_[i].launch();
          check(cudaMemcpyAsync(host_->host(i), sums_[i].device_result(), sizeof(float), cudaMemcpyDeviceToHost,
                                stream_of(d)),
                "cudaMemcpyAsync", d);
        }
        wait(G);
        return total(G);
      case host_sum_path::nccl_allreduce: {
        for (auto& s : sums_) s.launch();
        nccl_allreduce_sum(*comms_, partials_, 1);
        const Device d0 = sums_[0].slice().device;
        detail::rt::set_device(d0.id());
        check(cudaMemcpyAsync(host_->host(0), partials_[0], sizeof(float), cudaMemcpyDeviceToHost, stream_of(d0)),
              "cudaMemcpyAsync", d0);
        wait(1);  // rank 0 holds the total once its stream is done; the others finish on their own
        return *static_cast<volatile float*>(host_->host(0));
      }
      default:
        for (std::size_t i = 0; i < G; ++i) sums_[i].launch(mapped_[i]);
        wait(G);
        return total(G);
    }
  }

 private:
  void wait(std::size_t count) const {
    for (std::size_t i = 0; i < count; ++i) {
      const Device d = sums_[i].slice().device;
      detail::rt::set_device(d.id());
      check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize", d);
    }
  }
  float total(std::size_t count) const {
    double t = 0;
    for (std::size_t i = 0; i < count; ++i) t += *static_cast<volatile float*>(host_->host(i));
    return static_cast<float>(t);
  }

  host_sum_path path_;
  std::vector<cub_sum> sums_;
  std::unique_ptr<pinned_floats> host_;
  std::vector<float*> mapped_, partials_;
  const nccl_comms* comms_ = nullptr;
};

}  // namespace tessera::bench::cuda
