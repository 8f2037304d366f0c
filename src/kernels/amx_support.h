// Whether this process may run AMX bf16 tile instructions, and if not, why: the check an AMX kernel set's
// provider makes before it registers its set, and what `hanpu bench` prints beside the bf16 unit in use.
//
// Three conditions, in the order Linux documents them (Documentation/arch/x86/xstate.rst, "Using XSTATE
// features in user space applications"):
//  1. the CPU has the instructions: CPUID.(EAX=7, ECX=0):EDX bit 24 (AMX-TILE) and bit 22 (AMX-BF16)
//     (GCC 12's cpuid.h bit_AMX_TILE, bit_AMX_BF16);
//  2. the OS enabled the tile state: CPUID.1:ECX bit 27 (OSXSAVE), then XCR0 (XGETBV 0) bits 17 (XTILECFG)
//     and 18 (XTILEDATA);
//  3. this process holds the permission for the dynamic XTILEDATA state (XSTATE component 18), which the
//     kernel grants only on request: arch_prctl(ARCH_REQ_XCOMP_PERM, 18) returns 0 (Linux 5.16 and later;
//     a tile instruction without it is fatal).
// A hypervisor may hide AMX from a guest on an AMX-capable host (condition 1 then fails: the KVM guests
// these sessions ran on showed no amx flags in /proc/cpuinfo).
#pragma once

#include <cstdint>
#include <string>

namespace hanpu {

struct AmxSupport {
  bool usable = false;
  std::string reason;  // why not, naming the failed condition; empty when usable
};

// What the three checks read. The permission request is made only when the first two pass.
struct AmxProbe {
  bool cpu_tile = false, cpu_bf16 = false, osxsave = false;
  uint64_t xcr0 = 0;
  bool perm_requested = false;
  long perm_rc = -1;
  int perm_errno = 0;
};

// The decision from a probe (pure: tested on made-up probes).
AmxSupport decide_amx_support(const AmxProbe& probe);

// One line for a report: "AMX tiles: usable by this process, ..." or "AMX tiles: not usable: REASON".
std::string amx_support_line(const AmxSupport& s);

// This machine's answer, probed once per process (the first call makes the permission request, which
// then holds for the process and the threads it starts).
const AmxSupport& amx_support();

}  // namespace hanpu
