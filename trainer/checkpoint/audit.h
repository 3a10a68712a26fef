// What a checkpoint root holds, every step directory verified: what a
// restarted job's rank 0 records before anything writes there (so the result
// shows that a crash left no half-published checkpoint behind), and what the
// fault matrix checks after a job that was not restarted.
#ifndef MTB_TRAINER_CHECKPOINT_AUDIT_H_
#define MTB_TRAINER_CHECKPOINT_AUDIT_H_

#include <string>

#include "trainer/train_result.pb.h"

namespace mtb::checkpoint {

// Lists `root`: what `latest` names, every step_NNNNNNNN directory (READY,
// Verify's verdict, run id, orphan: READY, newer than the checkpoint
// `latest` names and never named by it) and the staging directories saves
// left. Reads every file of every checkpoint (Verify hashes them). A root
// that does not exist is an empty audit.
CheckpointTreeAudit AuditCheckpointTree(const std::string& root);

// "step_00000002 (verified), step_00000004 (READY, fails verification:
// ...); latest: step_00000002; staging .step_00000006.tmp (a save that never
// published: ignored)". One line, for logs.
std::string DescribeAudit(const CheckpointTreeAudit& audit);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_AUDIT_H_
