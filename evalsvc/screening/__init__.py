"""Static screening: what a solution's source shows before any of it runs (rules in `checks`)."""
