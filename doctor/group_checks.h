// doctor's checks of a rank group: the world size it expected, exact results
// of a small all_reduce and an uneven all_to_allv, and the bandwidth the
// group reaches (loopback on one host, the network across hosts).
#ifndef MTB_DOCTOR_GROUP_CHECKS_H_
#define MTB_DOCTOR_GROUP_CHECKS_H_

#include <vector>

#include "common/collective/communicator.h"
#include "doctor/doctor.pb.h"

namespace mtb::doctor {

struct GroupCheckOptions {
  // 0: any world size.
  int expected_world_size = 0;
  // The all_reduce whose busbw is reported.
  int64_t bandwidth_bytes = 16 << 20;
  int bandwidth_iters = 5;
  // Test only: rank 1 adds 1 to one received all_to_allv element, as a
  // misrouting transport would.
  bool testonly_corrupt = false;
};

// Every rank calls it (collectives); every rank gets the same checks.
std::vector<DoctorCheck> CheckGroup(collective::Communicator& communicator,
                                    const GroupCheckOptions& options);

}  // namespace mtb::doctor

#endif  // MTB_DOCTOR_GROUP_CHECKS_H_
