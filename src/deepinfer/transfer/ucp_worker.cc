#include "deepinfer/transfer/ucp_worker.h"

#include <poll.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "deepinfer/base/timer.h"
#include "deepinfer/transfer/address.h"

namespace deepinfer::transfer {
namespace {

struct ConfigDefault {
  const char* name;  // for ucp_config_modify
  const char* value;
  const char* env[3];  // the UCX_* variables that, when set, take precedence over our value
};

// Our defaults for UCX settings that the environment leaves unset.
constexpr ConfigDefault kConfigDefaults[] = {
    {"TLS", kDefaultUcxTransports, {"UCX_TLS", nullptr, nullptr}},
    // Endpoints need peer-failure handling (UCP_ERR_HANDLING_MODE_PEER), which UCX grants a
    // shared-memory transport only when told to; the peer's death is then found by keepalive
    // (a check that the peer process still exists). Without it UCX falls back to TCP on
    // loopback (ucx_perftest, 4 MiB: 0.8 GB/s over TCP, 3.8 GB/s over shared memory).
    {"MM_ERROR_HANDLING",
     "y",
     {"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING", "UCX_SYSV_ERROR_HANDLING"}},
    // How soon keepalive notices a dead peer on a transport that cannot tell by itself
    // (UCX's default is 20 s).
    {"KEEPALIVE_INTERVAL", "1s", {"UCX_KEEPALIVE_INTERVAL", nullptr, nullptr}},
};

bool set_in_environment(const ConfigDefault& d) {
  for (const char* name : d.env)
    if (name != nullptr && std::getenv(name) != nullptr) return true;
  return false;
}

// Whether the transports in use include shared memory (MM_ERROR_HANDLING is an invalid setting,
// and UCX warns about it, otherwise).
bool uses_shared_memory() {
  const char* tls = std::getenv("UCX_TLS");
  const std::string t = tls != nullptr ? tls : kDefaultUcxTransports;
  for (const char* mm : {"sm", "shm", "mm", "posix", "sysv", "all"})
    if (t.find(mm) != std::string::npos) return true;
  return false;
}

// ucp_config_read applies the UCX_* environment; our defaults only fill what it leaves unset.
Result<ucp_config_t*> read_config() {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return io_error("UCX: reading the configuration failed: {}", ucs_error(st));
  for (const ConfigDefault& d : kConfigDefaults) {
    if (set_in_environment(d)) continue;
    if (std::string_view(d.name) == "MM_ERROR_HANDLING" && !uses_shared_memory()) continue;
    st = ucp_config_modify(config, d.name, d.value);
    if (st != UCS_OK) {
      ucp_config_release(config);
      return io_error("UCX: setting {}={} failed: {}", d.name, d.value, ucs_error(st));
    }
  }
  return config;
}

}  // namespace

std::string ucs_error(ucs_status_t status) {
  return fmt::format("{} ({})", ucs_status_string(status), static_cast<int>(status));
}

Result<std::unique_ptr<UcpWorker>> UcpWorker::create(const std::string& name) {
  std::unique_ptr<UcpWorker> w(new UcpWorker());
  DI_ASSIGN_OR_RETURN(ucp_config_t * config, read_config());
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.name = name.c_str();
  ucs_status_t st = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  if (st != UCS_OK) return io_error("UCX: ucp_init failed: {}", ucs_error(st));

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(w->context_, &wp, &w->worker_);
  if (st != UCS_OK) return io_error("UCX: ucp_worker_create failed: {}", ucs_error(st));
  st = ucp_worker_get_efd(w->worker_, &w->event_fd_);
  if (st != UCS_OK) return io_error("UCX: ucp_worker_get_efd failed: {}", ucs_error(st));

  ucp_address_t* address = nullptr;
  size_t length = 0;
  st = ucp_worker_get_address(w->worker_, &address, &length);
  if (st != UCS_OK) return io_error("UCX: ucp_worker_get_address failed: {}", ucs_error(st));
  w->address_hex_ = hex_encode(address, length);
  ucp_worker_release_address(w->worker_, address);
  return w;
}

UcpWorker::~UcpWorker() {
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
}

bool UcpWorker::progress() {
  bool any = false;
  // Bounded so that a flood of events cannot starve the caller's own queue.
  for (int i = 0; i < 1024 && ucp_worker_progress(worker_) != 0; ++i) any = true;
  return any;
}

void UcpWorker::pace(bool did_work, std::chrono::milliseconds sleep_timeout) {
  const double now = now_seconds();
  if (did_work) last_work_ = now;
  if (now - last_work_ < kSpinSeconds) {
    std::this_thread::yield();
    return;
  }
  // BUSY: events arrived since the last progress; the caller progresses again at once.
  if (ucp_worker_arm(worker_) != UCS_OK) return;
  pollfd p{event_fd_, POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(sleep_timeout.count()));
}

void UcpWorker::signal() { ucp_worker_signal(worker_); }

}  // namespace deepinfer::transfer
