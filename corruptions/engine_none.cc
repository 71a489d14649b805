// A normal build's engine hooks: the defaults, the specified behaviour.
#include "corruptions/engine_hooks.h"

namespace verity::corruptions {

const EngineHooks& ActiveEngineHooks() {
  static const EngineHooks hooks;
  return hooks;
}

}  // namespace verity::corruptions
