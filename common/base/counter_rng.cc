#include "common/base/counter_rng.h"

#include <cmath>

#include "glog/logging.h"

namespace mtb {
namespace {

constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;  // 2^-53
constexpr double kTwoTo64 = 18446744073709551616.0;          // 2^64

}  // namespace

uint64_t CounterKey(std::initializer_list<uint64_t> words) {
  uint64_t h = Mix64(static_cast<uint64_t>(words.size()) + kGoldenGamma);
  for (uint64_t word : words) h = Mix64(h ^ word) + kGoldenGamma;
  return h;
}

double CounterUniform(uint64_t key, uint64_t counter) {
  return static_cast<double>(CounterDraw(key, counter) >> 11) * kTwoToMinus53;
}

uint64_t CounterBelow(uint64_t key, uint64_t counter, uint64_t n) {
  CHECK_GE(n, 1u);
  const unsigned __int128 product =
      static_cast<unsigned __int128>(CounterDraw(key, counter)) * n;
  return static_cast<uint64_t>(product >> 64);
}

double CounterNormal(uint64_t key, uint64_t counter) {
  const uint64_t a = CounterDraw(key, 2 * counter);
  const uint64_t b = CounterDraw(key, 2 * counter + 1);
  const double u1 = static_cast<double>((a >> 11) + 1) * kTwoToMinus53;
  const double u2 = static_cast<double>(b >> 11) * kTwoToMinus53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t DropThreshold(double p) {
  CHECK(p >= 0.0 && p < 1.0) << "dropout probability " << p;
  return static_cast<uint64_t>(p * kTwoTo64);
}

}  // namespace mtb
