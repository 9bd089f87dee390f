"""TRL GRPO with the kernel reward: one batch submission per reward call, `None` for our failures (TRL
drops those from the advantage). Needs a GPU for the policy; the reward side needs only the service.

    EVALSVC_URL=http://evalsvc:8000 EVALSVC_API_KEY=... python examples/rl/trl_grpo.py MODEL TASK_ID...
"""

import sys

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from evalsvc.rl.trl import kernel_reward

PROMPT = "Write a faster CUDA ModelNew for this KernelBench task (task id {task}). Answer in one ```python block."

model, tasks = sys.argv[1], sys.argv[2:]
rows = [{"prompt": PROMPT.format(task=t), "task_id": t} for t in tasks]  # the column kernel_reward reads
trainer = GRPOTrainer(
    model=model,
    reward_funcs=[kernel_reward],
    args=GRPOConfig(output_dir="grpo-kernels", num_generations=8, max_completion_length=4096),
    train_dataset=Dataset.from_list(rows),
)
trainer.train()
