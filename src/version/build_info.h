// What this binary is: the release, the commit it was built from, how it was
// built, and which CPU path the compute kernels run on. `matricxon --version`,
// the `serve` start-up line, GET /health and the status page show it, so a
// bug report can quote one line that pins the build down.
//
// The values are fixed at build time (write_build_info.cmake, run on every
// build so the commit is never stale); the kernel path is read at run time
// (kernels.h ActiveIsa, which honours MATRICXON_KERNELS). Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mx::version {

struct BuildInfo {
  std::string_view version;     // the release, "0.1.0" (CMake's project version)
  std::string_view git_commit;  // "9f44489", "9f44489-dirty" (uncommitted changes), or "unknown"
  std::string_view build_type;  // CMAKE_BUILD_TYPE: "Release", "Debug", ...
  std::string_view compiler;    // "GNU 12.2.0"
  std::string_view processor;   // the target CPU family, "x86_64"
};

// The values this binary was built with.
const BuildInfo& Build();

struct KernelInfo {
  std::string path;                   // the path the kernels run on now: "scalar", "avx2", "avx512"
  std::vector<std::string> features;  // the CPU features that path uses ("avx512f", "fma", ...)
  std::vector<std::string> available;  // the paths this CPU can run, scalar first, best last
};

// The kernels' instruction-set path as it is now (first call picks it, as
// the first kernel call would).
KernelInfo Kernels();

// "matricxon 0.1.0 (commit 9f44489, Release)": one line for logs.
std::string OneLine();

// What `matricxon --version` prints: the one line, then the kernels' path with
// its CPU features and the other paths this CPU has, then the compiler.
std::string VersionText();

}  // namespace mx::version
