"""Executors: what turns the scheduler's leases into running pods (local, simulated, Kubernetes)."""
