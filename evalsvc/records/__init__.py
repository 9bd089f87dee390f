"""Redis as the system of record, one module per kind of record.

- `documents`: the request, state and view documents (pydantic, no Redis: the SDK imports them too);
- `keys`: the keys more than one store writes (a job's hash, the tenant's in-flight count, the sweeps'
  indexes, the channel a job's end is announced on) and ids;
- `tasks` (`TaskStore`): task documents and who may see them;
- `jobs` (`JobStore`): jobs, their creation, progress and end (Lua scripts), the sweeps' indexes,
  admission's facts and queue depths; `salvage`: what is left of a job record that no longer reads;
- `cancellation` (`Canceller`): a tenant ending its own unfinished jobs, atomically against workers;
- `idempotency` (`IdempotencyKeys`), `batches` (`BatchStore`), `profiles` (`ProfileStore`);
- `workers` (`WorkerRegistry`): heartbeats, the device classes served, the choice of a GPU queue;
- `catalog` (`PoolStore`): where tasks came from, vet records, suites;
- `stores` (`Records`): one of each over one Redis client.

Nothing is imported here, so that importing `documents` costs no Redis client.
"""
