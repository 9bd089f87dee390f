#!/usr/bin/env bash
# OpenRLHF with the service as its remote reward model: the reward server speaks --remote_rm_url's
# protocol ({"query", "prompts", "labels"} in, {"rewards", "scores", "extra_logs"} out); --label_key names
# the dataset column that holds each prompt's task id.
set -euo pipefail
export EVALSVC_URL=${EVALSVC_URL:-http://127.0.0.1:8000}
evalsvc rl-reward-server --host 0.0.0.0 --port 5000 &
python -m openrlhf.cli.train_ppo_ray \
  --pretrain "$1" --prompt_data "$2" --input_key prompt --label_key task_id \
  --remote_rm_url http://127.0.0.1:5000/get_reward \
  --advantage_estimator group_norm --n_samples_per_prompt 8 "${@:3}"
