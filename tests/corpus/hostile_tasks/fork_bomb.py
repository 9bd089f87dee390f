# trick: the module body forks without end, in every child too
# expect: internal_error
# failure: task_invalid
# candidate: ok
# message: did not finish
import os

while True:
    try:
        os.fork()
    except OSError:
        pass


class Model:  # never reached: the module body above does not end
    pass


def get_inputs():
    return []


def get_init_inputs():
    return []
