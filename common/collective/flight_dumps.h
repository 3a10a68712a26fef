// When flight recorders (flight_recorder.h) are dumped by signal: on SIGTERM
// (the launcher's teardown, a kill) and on the fatal signals a process can
// catch (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT). A collective failure or
// timeout dumps from the communicator itself (communicator_internal.h). A
// SIGKILLed rank leaves no dump: `profiler_agg forensics` says which are
// missing.
//
// Note [dumping from a signal]: serializing JSON is not async-signal-safe, so
// the handler only writes the signal number into a pipe; a dumper thread of
// its own dumps every registered recorder, then lets the signal take its
// previous course: for SIGTERM it restores the previous disposition and sends
// the signal again (by default the process still dies of SIGTERM, as the
// launcher expects); a fatal signal's handler waits (at most 5 s) for the
// dump, restores the previous disposition and re-raises, so the process
// still dies of it (a core where it would have left one).
#ifndef MTB_COMMON_COLLECTIVE_FLIGHT_DUMPS_H_
#define MTB_COMMON_COLLECTIVE_FLIGHT_DUMPS_H_

#include <memory>

#include "common/collective/flight_recorder.h"

namespace mtb::collective {

// Adds `recorder` (which has a dump path) to the process's dump list. The
// first registration installs the handlers (a signal the process was
// started with ignored stays ignored) and starts the dumper thread; a handler
// installed before is chained as described above. A tool that installs its
// own SIGTERM handler after the communicator exists (e.g. one that saves a
// checkpoint first) calls RequestFlightRecorderDumps from it.
void RegisterForSignalDumps(std::shared_ptr<FlightRecorder> recorder);
void UnregisterFromSignalDumps(const FlightRecorder* recorder);

// Asks the dumper thread to dump every registered recorder, with the
// signal's name as the reason. Async-signal-safe (one write(2)); does not
// wait. A no-op before the first registration.
void RequestFlightRecorderDumps(int signal_number);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_FLIGHT_DUMPS_H_
