// Corruption builds only (CORRUPTIONS.md): the loader hooks of load_hooks.h
// with the deliberate bug this build was configured with; every other hook
// returns what the file says.
#include "engine/load_hooks.h"

namespace verity::hooks {

float Llama2cRopeTheta(float format_theta) {
#ifdef VERITY_CORRUPTION_ROPE_THETA_DEFAULT
  // CORRUPTION (configuration read wrong): the loader's default RoPE base is
  // Llama 3's 500000, used where the llama2.c format fixes 10000. Both
  // backends read the same config, so they agree with each other.
  (void)format_theta;
  return 500000.0f;
#else
  return format_theta;
#endif
}

}  // namespace verity::hooks
