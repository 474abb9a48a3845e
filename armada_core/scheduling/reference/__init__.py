"""Reference scheduler: a plain transcription of the seed-000 cycle, one job and one node at a time.

It is deliberately simple and slow. It is the oracle the fast implementation is tested
against, so every tie is broken explicitly:

* nodes are ordered by the values of the topology levels, then of gang uniformity labels,
  then id (``node_order``); best
  fit takes the least free resources left (compared in resource order: cpu, memory, gpu,
  ...), then the node order;
* where jobs of a lower class give way, the node is chosen by the victims it needs, and
  urgency preempts a minimal set of them (``victims.by_victims``, ``victims.preempt_for``);
* queues compete on (-priority-class priority of the head gang, cost after the gang / weight,
  queue name): more urgent work first, progressive filling among equals;
* jobs inside a queue: by class priority, highest first; among equals, evicted gangs, then
  evicted members above a gang's minimum, then queued gangs; each by (job priority, [start
  time,] submit time, job id).

The modules follow SEMANTICS.md's sections, and ``cycle.reference_schedule`` runs them in
order over one ``state.CycleState``:

* ``state``: the cycle's inputs and what the phases update; save/restore for gang attempts;
* ``inputs``: which jobs take part;
* ``queues``: fairness (weights, usage offsets, protection, queue costs);
* ``eviction``: running gangs evicted to fair share or held on their nodes;
* ``order``: order inside a queue, lookback, progressive filling across queues;
* ``limits``: per-cycle limits, rate limits, per-queue class caps;
* ``putback``: evicted gangs back on their nodes, or preempted;
* ``gangs``: queued gangs all or nothing, on one value of their uniformity label;
* ``gang_topology``: the narrowest topology domain that holds a gang, within its maximum hops;
* ``gang_trials``: a gang's members tried in order on the live state;
* ``elastic``: elastic pod groups (role rules applied, late members, members left out);
* ``nodes``: one job's node at the first stage that fits, best fit;
* ``victims``: which jobs give way to a job of a higher class, minimal urgency preemption;
* ``cycle``: the phases in order, and the outcomes.

Imports go one way: ``cycle`` at the top, ``state`` at the bottom, no module importing one
that imports it back.
"""

from .cycle import reference_schedule
from .order import queued_order, running_order

__all__ = ["queued_order", "reference_schedule", "running_order"]
