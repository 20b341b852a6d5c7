// Which build of the kernels a measured hardware spec describes. `lathe probe` and
// `lathe calibrate` write `measured_with = "<id>"` into the specs they produce; the id
// is a hash of the sources that set the backend's kernel speed (emitters, prelude,
// runtime loops, probe) and of the cost model the measured efficiencies plug into, so
// a spec measured by another build (kernels since made faster or slower) is flagged
// rather than silently mispredicting.
#pragma once

#include <string_view>

namespace lathe {

std::string_view cpu_kernels_id();   // "cpu:<12 hex digits>"
std::string_view cuda_kernels_id();  // "cuda:<12 hex digits>"

}  // namespace lathe
