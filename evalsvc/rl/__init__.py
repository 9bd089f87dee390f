"""Reward adapters for RL trainers, each in its framework's own shape: `evalsvc.rl.verl.compute_score`,
`evalsvc.rl.trl.kernel_reward`, `evalsvc.rl.openrlhf.reward_func`. They extract the candidate from the
completion (`evalsvc.rl.extract`), score it through a running service (EVALSVC_URL, EVALSVC_API_KEY) and
mask our own failures instead of scoring them -1 (`evalsvc.rl.judge`)."""
