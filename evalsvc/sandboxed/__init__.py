"""What runs inside the isolated processes: a candidate's runner, a task's process, the Nsight Compute
target. Code here serves untrusted code and is answered with data only; the judge (evalsvc.engine)
believes nothing from it without a check of its own."""
