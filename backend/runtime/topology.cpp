// SPDX-License-Identifier: Apache-2.0
// print_topology: the devices, the peer-access matrix among GPUs and the copy path per pair.
#include <backend/runtime/state.hpp>
#include <tessera/device.hpp>

#include <cstdio>
#include <ostream>
#include <string>
#include <thread>

namespace tessera {
namespace {

std::string gib(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / double(1ull << 30));
  return buf;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

const char* path_name(detail::rt::copy_path p) {
  switch (p) {
    case detail::rt::copy_path::self: return "same device";
    case detail::rt::copy_path::nvlink: return "P2P (NVLink)";
    case detail::rt::copy_path::pcie: return "P2P (PCIe)";
    case detail::rt::copy_path::host_staged: return "staged via host";
  }
  return "?";
}

}  // namespace

void print_topology(std::ostream& os) {
  using namespace detail::rt;
  const state& s = get();
  const int g = s.gpu_count;
  // The default set first: it creates its host devices on demand, and they belong in the count.
  std::string default_set;
  try {
    for (const Device d : devices()) default_set += d.name() + ' ';
  } catch (const error& e) {
    default_set = std::string("unavailable: ") + e.what();
  }
  const int h = s.host_count.load(std::memory_order_acquire);
  os << "Tessera topology: " << g << " GPU(s), " << h << " host device(s)"
     << (built_with_cuda() ? "" : " (built without CUDA)") << "\n";
  os << "default device set: " << default_set << "\n";

  os << "  id  " << pad("device", 34) << pad("memory free / total", 24) << "SMs\n";
  for (int id = 0; id < g + h; ++id) {
    const device_info& d = s.table[static_cast<std::size_t>(id)];
    std::string mem;
    try {
      std::size_t free = 0, total = 0;
      memory_info(id, free, total);
      mem = gib(free) + " / " + gib(total);
    } catch (const error&) {
      mem = "unknown";
    }
    char idbuf[16];
    std::snprintf(idbuf, sizeof idbuf, "%4d  ", id);
    os << idbuf << pad(d.name, 34) << pad(mem, 24);
    if (d.kind == device_kind::cuda)
      os << d.sm_count << "\n";
    else
      os << "-\n";
  }

  if (g > 0) {
    os << "peer access among GPUs (Y: direct loads/stores/copies, -: none):\n" << pad("", 10);
    for (int b = 0; b < g; ++b) os << pad("cuda:" + std::to_string(b), 8);
    os << "\n";
    for (int a = 0; a < g; ++a) {
      os << "  " << pad("cuda:" + std::to_string(a), 8);
      for (int b = 0; b < g; ++b) os << pad(a == b ? "x" : can_access_peer(a, b) ? "Y" : "-", 8);
      os << "\n";
    }
    if (g > 1) {
      os << "copy paths:\n";
      for (int a = 0; a < g; ++a)
        for (int b = 0; b < g; ++b)
          if (a != b)
            os << "  cuda:" << a << " -> cuda:" << b << "  "
               << path_name(s.paths[static_cast<std::size_t>(a * g + b)]) << "\n";
    }
  }
  if (h > 0) {
    os << "host devices share the CPU (" << std::thread::hardware_concurrency()
       << " hardware threads) and host memory; copy path among them: memcpy (host)";
    if (g > 0) os << "; GPU <-> host device: staged through pinned host memory";
    os << "\n";
  }
}

}  // namespace tessera
