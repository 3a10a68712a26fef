// --transport=auto|shm|tcp for tools that join a group (docs/collective.md,
// "Shared memory: ranks on one host"). An unknown value fails the command
// line (exit 2) before any rank starts.
#ifndef MTB_COMMON_COLLECTIVE_TRANSPORT_FLAG_H_
#define MTB_COMMON_COLLECTIVE_TRANSPORT_FLAG_H_

#include "absl/flags/declare.h"
#include "common/collective/transport.h"

ABSL_DECLARE_FLAG(mtb::collective::Transport, transport);

#endif  // MTB_COMMON_COLLECTIVE_TRANSPORT_FLAG_H_
