// hanpu's AMX tile configuration (kernels/gemm_amx.cpp): palette 1, tiles 0-7 of 16 rows x 64 bytes; the AMX
// kernels use tiles 0-3 for C (fp32 16 x 16), 4-5 for A (16 rows of 16 bf16 pairs), 6-7 for B (16 pair rows
// of 16 columns). Call only where amx_support().usable.
#pragma once

namespace hanpu {

// Loads that configuration on the calling thread unless it is already there (another library in the process,
// or nothing yet, may have configured the tiles differently): STTILECFG and a compare, about 10 ns, and
// LDTILECFG (50-100 ns) only when it differs.
void use_amx_tiles();

}  // namespace hanpu
