#include "cuda/cupti.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "common/tuning.hpp"

#if __has_include(<cupti.h>)
#include <cupti.h>
#define KB_HAVE_CUPTI_H 1
#else
#define KB_HAVE_CUPTI_H 0
#endif

namespace kb::cuda {

#if KB_HAVE_CUPTI_H
namespace {

// The few CUPTI entry points kb uses, bound from libcupti at run time.
struct Cupti {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  std::string why;  // empty when usable
};

// Where libcupti may be: the tuning setting cupti_library (common/tuning.hpp), the loader's path, the toolkit's
// usual places (CUDA 13 keeps it in lib64; older toolkits in extras/CUPTI).
void* open_library(std::string* tried) {
  const std::string chosen = tuning::current().cupti_library;
  const char* names[] = {chosen.c_str(), "libcupti.so.13", "libcupti.so",
                         "/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so",
                         "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};
  for (const char* n : names) {
    if (!n || !*n) continue;
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += std::string(tried->empty() ? "" : ", ") + n;
  }
  return nullptr;
}

std::string status_text(const Cupti& c, CUptiResult r) {
  const char* s = nullptr;
  if (c.result_string && c.result_string(r, &s) == CUPTI_SUCCESS && s) return s;
  return fmt::format("CUPTI error {}", static_cast<int>(r));
}

// Records delivered by CUPTI's buffer callbacks, guarded by g_mu.
std::mutex g_mu;
std::vector<KernelSpan>* g_sink = nullptr;
constexpr std::size_t kBufferBytes = 1 << 20;
constexpr std::size_t kAlign = 8;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid);

const Cupti& cupti() {
  static Cupti c;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void* h = open_library(&tried);
    if (!h) {
      c.why = "libcupti not found (tried " + tried + "; KB_CUPTI_LIBRARY names another)";
      return;
    }
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && c.why.empty()) c.why = std::string("libcupti lacks ") + name;
    };
    bind(c.register_callbacks, "cuptiActivityRegisterCallbacks");
    bind(c.enable, "cuptiActivityEnable");
    bind(c.disable, "cuptiActivityDisable");
    bind(c.flush_all, "cuptiActivityFlushAll");
    bind(c.next_record, "cuptiActivityGetNextRecord");
    bind(c.result_string, "cuptiGetResultString");
    if (!c.why.empty()) return;
    if (CUptiResult r = c.register_callbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
      c.why = "cuptiActivityRegisterCallbacks: " + status_text(c, r);
  });
  return c;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  const Cupti& c = cupti();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    CUpti_Activity* record = nullptr;
    while (buffer && c.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
        continue;
      // kind, start and end sit at the same offsets in every kernel record
      // version since CUpti_ActivityKernel4; kb reads nothing else.
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (g_sink) g_sink->push_back(KernelSpan{k->start, k->end});
    }
  }
  std::free(buffer);
}

std::mutex g_recording;  // one KernelRecorder between begin() and end() at a time

}  // namespace

bool cupti_available(std::string* why) {
  const Cupti& c = cupti();
  if (why) *why = c.why;
  return c.why.empty();
}

KernelRecorder::~KernelRecorder() {
  if (active_) (void)end();
}

Status KernelRecorder::begin() {
  const Cupti& c = cupti();
  if (!c.why.empty()) return make_error(Code::unsupported, "CUPTI: " + c.why);
  if (active_) return make_error(Code::internal, "CUPTI: begin() twice");
  g_recording.lock();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    delete g_sink;
    g_sink = new std::vector<KernelSpan>();
  }
  if (CUptiResult r = c.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS) {
    g_recording.unlock();
    return make_error(Code::cuda_error, "cuptiActivityEnable: " + status_text(c, r));
  }
  active_ = true;
  return ok_status();
}

Result<std::vector<KernelSpan>> KernelRecorder::end() {
  if (!active_) return make_error(Code::internal, "CUPTI: end() without begin()");
  const Cupti& c = cupti();
  active_ = false;
  // Forced: deliver the buffers now, also ones not yet full.
  CUptiResult flushed = c.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  CUptiResult disabled = c.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  std::vector<KernelSpan> spans;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_sink) spans.swap(*g_sink);
    delete g_sink;
    g_sink = nullptr;
  }
  g_recording.unlock();
  if (flushed != CUPTI_SUCCESS) return make_error(Code::cuda_error, "cuptiActivityFlushAll: " + status_text(c, flushed));
  if (disabled != CUPTI_SUCCESS)
    return make_error(Code::cuda_error, "cuptiActivityDisable: " + status_text(c, disabled));
  return spans;
}

#else  // built without cupti.h

bool cupti_available(std::string* why) {
  if (why) *why = "kb was built without cupti.h";
  return false;
}
KernelRecorder::~KernelRecorder() = default;
Status KernelRecorder::begin() { return make_error(Code::unsupported, "CUPTI: kb was built without cupti.h"); }
Result<std::vector<KernelSpan>> KernelRecorder::end() {
  return make_error(Code::unsupported, "CUPTI: kb was built without cupti.h");
}

#endif

}  // namespace kb::cuda
