// Where a corruption build (CORRUPTIONS.md) changes the kernels. Each hook's
// default is the specified behaviour, and a normal build uses the defaults
// (kernels_none.cc). A corruption that lives at this layer is one file,
// corruptions/<name>.cc, that overrides the one hook it needs and defines
// ActiveKernelHooks(); CMake compiles exactly one such definition
// (corruptions/corruptions.cmake). No other source selects a corruption.
#pragma once

#include <memory>

#include "kernels/kernels.h"

namespace verity::corruptions {

class KernelHooks {
 public:
  virtual ~KernelHooks() = default;
  // The fast backend as the dispatcher hands it out: itself, or a wrapper
  // that changes one step (ForwardingBackend) and passes as "fast".
  virtual std::unique_ptr<kernels::Backend> WrapFast(std::unique_ptr<kernels::Backend> fast) const { return fast; }
  // Extra mass in a softmax denominator whose row maximum is `max_val` (the
  // exps are taken after subtracting it), in code every backend shares.
  virtual float SoftmaxExtraMass(float max_val) const {
    (void)max_val;
    return 0.0f;
  }
};

// The kernel hooks of this build.
const KernelHooks& ActiveKernelHooks();

}  // namespace verity::corruptions
