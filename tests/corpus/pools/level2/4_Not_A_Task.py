import torch


def helper(x):
    """Refused at import: no Model, get_inputs or get_init_inputs."""
    return x
