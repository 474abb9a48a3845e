"""Scheduling reports: what each cycle did and why jobs wait, as the cycle itself decided
(docs/reports.md). `cycle` records a cycle's figures as the leader writes them, `limits`
names the limits a reason speaks of, `compose` builds the scheduling, queue and job reports
from what storage kept, and `text` renders them for people."""
