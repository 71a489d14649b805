// The normal build's loader hooks (load_hooks.h): what the file says.
#include "engine/load_hooks.h"

namespace verity::hooks {

float Llama2cRopeTheta(float format_theta) { return format_theta; }

}  // namespace verity::hooks
