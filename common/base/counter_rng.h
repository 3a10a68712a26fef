// Counter-based random numbers: every value is a pure function of a key (a
// tuple of integers naming what the value is for) and a counter (which element
// of that stream). Nothing is stateful, so any value can be regenerated alone,
// in any order, on any thread, rank or device: data batches for any (step,
// sample), dropout masks recomputed in backward, or a shard of a mask that
// another rank computes in full.
//
// Vocabulary. A *key* is CounterKey({word, word, ...}); by convention the words
// are (seed, stream, ...) with `stream` one of RngStream, so data, dropout and
// initialisation never share a key. A *draw* is CounterDraw(key, counter): the
// counter-th output of SplitMix64 started at `key` (Steele, Lea, Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014), which passes
// BigCrush and is a bijection of the counter for a fixed key.
//
// The exact arithmetic is part of our formats (docs/trainer.md): the PyTorch
// reference (trainer/testdata/reference_gpt.py) and later tools reproduce it
// bit for bit. Do not change it without changing them and the golden files.
//
// Thread safety: all functions are pure.
#ifndef MTB_COMMON_BASE_COUNTER_RNG_H_
#define MTB_COMMON_BASE_COUNTER_RNG_H_

#include <cstdint>
#include <initializer_list>

namespace mtb {

// SplitMix64's increment (2^64 / golden ratio, odd).
inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output function: a bijection on 64-bit words with full
// avalanche (every input bit flips each output bit with probability ~1/2).
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Domain tags: the second word of every key.
enum class RngStream : uint64_t {
  kData = 1,     // (seed, kData, step, global sample index)
  kDropout = 2,  // (seed, kDropout, step, global sample index, layer, site)
  kInit = 3,     // (seed, kInit, parameter index)
};

// Folds the words into one key:
//   h = Mix64(n + kGoldenGamma);  for each word w: h = Mix64(h ^ w) + kGoldenGamma
// where n is the number of words. Distinct tuples give distinct keys except with
// probability ~2^-64 per pair.
uint64_t CounterKey(std::initializer_list<uint64_t> words);

// The counter-th draw of the stream `key`.
constexpr uint64_t CounterDraw(uint64_t key, uint64_t counter) {
  return Mix64(key + (counter + 1) * kGoldenGamma);
}

// A double uniform in [0, 1): the draw's top 53 bits times 2^-53.
double CounterUniform(uint64_t key, uint64_t counter);

// An integer uniform in [0, n), n >= 1: floor(draw * n / 2^64) (multiply-shift;
// the bias is below n / 2^64, far under anything measurable here).
uint64_t CounterBelow(uint64_t key, uint64_t counter, uint64_t n);

// A standard normal by Box-Muller from draws 2*counter and 2*counter + 1:
// u1 = (top53(draw_a) + 1) * 2^-53 in (0, 1], u2 = top53(draw_b) * 2^-53,
// z = sqrt(-2 ln u1) * cos(2 pi u2).
double CounterNormal(uint64_t key, uint64_t counter);

// The threshold below which a draw means "drop" for dropout probability p in
// [0, 1): floor(p * 2^64). An element is kept iff draw >= threshold, so it is
// kept with probability 1 - p (to within 2^-64).
uint64_t DropThreshold(double p);

}  // namespace mtb

#endif  // MTB_COMMON_BASE_COUNTER_RNG_H_
