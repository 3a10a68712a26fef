// What the planner needs to know about a strategy, read from its registry
// entry (trainer/strategy/registry.h) rather than from its name, so a new
// entry is costed without touching the planner:
//   - the flags that apply to it (fsdp's prefetch and reshard switches);
//   - whether its parameters are gathered per unit in forward and backward
//     (the entries that take --reshard_after_forward);
//   - whether it synchronises gradients by all-reduce (nothing is gathered
//     after the optimizer: the entry has no gather byte form);
//   - the largest world it runs on.
#ifndef MTB_PLANNER_STRATEGY_TRAITS_H_
#define MTB_PLANNER_STRATEGY_TRAITS_H_

#include <string>

#include "trainer/strategy/registry.h"

namespace mtb::planner {

// True when `flag` (without "--") is one of the entry's strategy-scoped flags.
bool FlagApplies(StrategyKind kind, const std::string& flag);
// False for a name that is not a strategy.
bool FlagApplies(const std::string& strategy, const std::string& flag);

bool GathersParametersPerUnit(StrategyKind kind);
bool GathersParametersPerUnit(const std::string& strategy);

bool SyncsGradientsByAllReduce(StrategyKind kind);
bool SyncsGradientsByAllReduce(const std::string& strategy);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_STRATEGY_TRAITS_H_
