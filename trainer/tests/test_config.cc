#include "trainer/tests/test_config.h"

#include "trainer/config/config.h"

namespace mtb {

TrainConfig TinyConfig() {
  TrainConfig c;
  c.set_vocab_size(64);
  c.set_d_model(32);
  c.set_n_layers(2);
  c.set_n_heads(4);
  c.set_seq_len(16);
  c.set_batch_size(4);
  c.set_dropout(0.0);
  c.set_precision(TrainConfig::fp32);
  c.set_data("synthetic");
  c.set_lr(1e-3);
  c.set_beta1(0.9);
  c.set_beta2(0.999);
  c.set_eps(1e-8);
  c.set_weight_decay(0.01);
  c.set_lr_schedule(TrainConfig::constant);
  c.set_lr_warmup_steps(0);
  c.set_min_lr(0);
  c.set_grad_accum(1);
  c.set_max_grad_norm(0);
  c.set_steps(3);
  c.set_timing_warmup_steps(0);
  c.set_repeat(1);
  c.set_seed(7);
  c.set_intra_op_threads(1);
  c.set_log_every(1);
  c.set_strategy(TrainConfig::single);
  c.set_grad_sync("auto");
  c.set_bucket_cap_mb(25);
  c.set_peak_flops(1e12);  // nominal: no matmul measurement in tests
  ResolveConfig(&c, 1);
  return c;
}

}  // namespace mtb
