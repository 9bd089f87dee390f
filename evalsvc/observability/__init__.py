"""Observability: Prometheus metrics of the workers, GPU health through NVML, structured logs.

The gateway's HTTP metrics are in `evalsvc.api.metrics`; how it all fits together: docs/observability.md.
"""
