"""Task pools: importers (KernelBench, Ops-6K, our folder format), vetting, reports."""
