// A normal build's kernel hooks: the defaults, the specified behaviour.
#include "corruptions/kernel_hooks.h"

namespace verity::corruptions {

const KernelHooks& ActiveKernelHooks() {
  static const KernelHooks hooks;
  return hooks;
}

}  // namespace verity::corruptions
