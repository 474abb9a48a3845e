"""Durable storage: jobs, runs, queues, retry policies and the job-set event log."""
