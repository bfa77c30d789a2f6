# Overrides that keep the distributed tests short on the test model (sourced).
TEST_SETS=(
  --set "calibration.samples=8" --set "calibration.seq_len=128"
  --set "evaluation.context=128" --set "evaluation.batch=8"
  --set "evaluation.calib_slice_tokens=1024"
  --set "curriculum.target_bits=[2.0]" --set "curriculum.min_updates=1"
  --set "curriculum.max_updates=${WQ_TEST_UPDATES:-3}"
  --set "training.episodes_per_update=4" --set "training.checkpoint_every_updates=1"
  --set "training.warm_start=none"
  --set "ppo.hidden=[32,32]" --set "ppo.minibatch_size=64" --set "ppo.epochs=2"
  --set "service.evaluation_timeout_ms=60000" --set "service.rpc_deadline_ms=20000"
)
