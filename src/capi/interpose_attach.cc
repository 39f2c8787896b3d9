// The engine's half of the lazily loaded interposer: when
// libuepoll-interpose.so is in the process, this library hands it the
// table of its entry points as it is loaded (capi/interpose_hooks.h).
// Whether the interposer loaded the engine (dlopen at the first uepoll
// object) or the program linked it, there is one engine.
//
// The constructor runs after the rest of the library's: src/CMakeLists.txt
// links this file last, and an ELF library runs its constructors in link
// order. The interposer calls back into the engine from it (the signal
// handlers installed before the engine, the fork mode).
#include <uepoll/uepoll.h>

#include "capi/interpose_hooks.h"

namespace {

const uepoll_engine_calls kCalls = {sizeof(uepoll_engine_calls),
#define UEPOLL_ENGINE_ENTRY(name) &::name,
                                    UEPOLL_ENGINE_CALLS(UEPOLL_ENGINE_ENTRY)
#undef UEPOLL_ENGINE_ENTRY
};

__attribute__((constructor)) void AttachToInterposer() {
  if (&uepoll_interpose_attach != nullptr) uepoll_interpose_attach(&kCalls);
}

}  // namespace
