#include "kernels/amx_support.h"

#include <cerrno>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
#include <asm/prctl.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace hanpu {

namespace {

constexpr int kXtileCfg = 17, kXtileData = 18;  // XSTATE components (XCR0 bits)
#if defined(__x86_64__) && defined(__linux__)
// CPUID.(EAX=7, ECX=0):EDX bits 22 (AMX-BF16) and 24 (AMX-TILE), CPUID.1:ECX bit 27 (OSXSAVE): spelled out
// here because not every compiler's cpuid.h names the AMX bits (GCC 12's bit_AMX_*; clang 14's has none).
constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24, kOsxsave = 1u << 27;

AmxProbe probe_this_machine() {
  AmxProbe p;
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    p.cpu_tile = (d & kAmxTile) != 0;
    p.cpu_bf16 = (d & kAmxBf16) != 0;
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) p.osxsave = (c & kOsxsave) != 0;
  if (p.osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    p.xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  const uint64_t tiles = (uint64_t{1} << kXtileCfg) | (uint64_t{1} << kXtileData);
  if (p.cpu_tile && p.cpu_bf16 && (p.xcr0 & tiles) == tiles) {
    p.perm_requested = true;
    p.perm_rc = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, kXtileData);
    p.perm_errno = p.perm_rc == 0 ? 0 : errno;
  }
  return p;
}
#endif

}  // namespace

AmxSupport decide_amx_support(const AmxProbe& p) {
  AmxSupport s;
  if (!p.cpu_tile || !p.cpu_bf16) {
    s.reason = std::string("the CPU reports no ") + (!p.cpu_tile && !p.cpu_bf16 ? "AMX-TILE or AMX-BF16"
                                                     : !p.cpu_tile               ? "AMX-TILE"
                                                                                 : "AMX-BF16") +
               " in CPUID leaf 7 (a hypervisor may hide them from a guest)";
    return s;
  }
  if (!p.osxsave) {
    s.reason = "the OS has not enabled XSAVE (CPUID.1:ECX OSXSAVE is clear)";
    return s;
  }
  for (int bit : {kXtileCfg, kXtileData}) {
    if (!(p.xcr0 >> bit & 1)) {
      s.reason = std::string("the OS has not enabled the tile state (XCR0 bit ") + std::to_string(bit) + ", " +
                 (bit == kXtileCfg ? "XTILECFG" : "XTILEDATA") + ", is clear)";
      return s;
    }
  }
  if (!p.perm_requested || p.perm_rc != 0) {
    s.reason = std::string("the kernel refused the tile data permission (arch_prctl(ARCH_REQ_XCOMP_PERM, "
                           "XTILEDATA): ") +
               (p.perm_requested ? std::strerror(p.perm_errno) : "not requested") +
               "; Linux 5.16 or later grants it)";
    return s;
  }
  s.usable = true;
  return s;
}

std::string amx_support_line(const AmxSupport& s) {
  return s.usable ? "AMX tiles: usable by this process (the AVX3+AMX kernel set runs the bf16 GEMMs on them)"
                  : "AMX tiles: not usable: " + s.reason + " (the bf16 GEMMs run on the vector unit)";
}

const AmxSupport& amx_support() {
#if defined(__x86_64__) && defined(__linux__)
  static const AmxSupport s = decide_amx_support(probe_this_machine());
#else
  static const AmxSupport s{false, "not an x86-64 Linux machine"};
#endif
  return s;
}

}  // namespace hanpu
