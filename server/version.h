// The pkserve version, from the project() version in the root CMakeLists.txt.
#pragma once

namespace pkserve {

#ifndef PKSERVE_VERSION
#define PKSERVE_VERSION "0.0.0-dev"
#endif
inline constexpr const char* kVersion = PKSERVE_VERSION;

}  // namespace pkserve
