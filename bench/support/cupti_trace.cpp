// SPDX-License-Identifier: Apache-2.0
// A GPU timeline without Nsight Systems (not on the GPU machines): a CUPTI injection library
// (plain CUDA tooling, no Tessera). CUDA_INJECTION64_PATH=/path/cupti_trace.so makes the driver
// load it into any CUDA program; it records every kernel and copy with the GPU's own timestamps
// and writes them at exit to $TRACE_OUT (default trace.csv), one line each:
//   kind,device,stream,start_ns,end_ns,bytes,what
// kind: K kernel (what = its name), M copy (what = kind<CUpti_ActivityMemcpyKind>), P copy
// between GPUs (what = src->dst); with TRACE_API=1 also R / D, a CUDA runtime / driver call on
// the host (device = the calling thread's id, stream = 0, what = the call's name), in the same
// clock: where a thread's host time per operation goes. Kernels are recorded concurrently
// (CONCURRENT_KERNEL): the timeline is the program's own, give or take the tracing's cost per
// record (more with TRACE_API). scripts/timeline.py reads the file. Built and run by
// `gpu_check.sh trace`:
//   g++ -O2 -shared -fPIC -o cupti_trace.so cupti_trace.cpp -I$CUDA/include -L$CUDA/lib64 -lcupti
// Found with it (session 38): each wait of a main stream for another GPU's event cost about 3 us
// between two kernels (hide_communication's copies).
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

std::FILE* out = nullptr;
std::mutex mu;

void CUPTIAPI request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = std::size_t{8} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(mu);
  CUpti_Activity* r = nullptr;
  while (out != nullptr && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
        std::fprintf(out, "K,%u,%u,%llu,%llu,0,%.80s\n", k->deviceId, k->streamId,
                     static_cast<unsigned long long>(k->start), static_cast<unsigned long long>(k->end),
                     k->name != nullptr ? k->name : "?");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
        std::fprintf(out, "M,%u,%u,%llu,%llu,%llu,kind%u\n", m->deviceId, m->streamId,
                     static_cast<unsigned long long>(m->start), static_cast<unsigned long long>(m->end),
                     static_cast<unsigned long long>(m->bytes), static_cast<unsigned>(m->copyKind));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(r);
        std::fprintf(out, "P,%u,%u,%llu,%llu,%llu,%u->%u\n", m->deviceId, m->streamId,
                     static_cast<unsigned long long>(m->start), static_cast<unsigned long long>(m->end),
                     static_cast<unsigned long long>(m->bytes), m->srcDeviceId, m->dstDeviceId);
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(r);
        const bool runtime = r->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        const char* name = nullptr;
        if (cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name) !=
                CUPTI_SUCCESS ||
            name == nullptr)
          name = "?";
        std::fprintf(out, "%c,%u,0,%llu,%llu,0,%s\n", runtime ? 'R' : 'D', a->threadId,
                     static_cast<unsigned long long>(a->start), static_cast<unsigned long long>(a->end), name);
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

void finish() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(mu);
  if (out != nullptr) std::fclose(out);
  out = nullptr;
}

}  // namespace

// The driver's entry point for injection libraries.
extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("TRACE_OUT");
  out = std::fopen(path != nullptr ? path : "trace.csv", "w");
  if (out == nullptr) return 0;
  cuptiActivityRegisterCallbacks(request, complete);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2);
  if (const char* api = std::getenv("TRACE_API"); api != nullptr && api[0] == '1') {
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  std::atexit(finish);
  return 1;
}
