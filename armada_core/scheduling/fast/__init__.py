"""Fast scheduler: the same decisions as ``reference``, with work proportional to decisions.

The cycle (``cycle.py``) runs the phases of SEMANTICS.md over one ``CycleState``
(``state.py``, grouped into parts: jobs, shapes, nodes, queues, limits, evictions, gangs,
order, placing): inputs (``inputs.py``), fairness (``queues.py``), eviction
(``eviction.py``), order and lookback (``order.py``), then progressive filling
(``loop.py``), which places evicted jobs back (``putback.py``), queued jobs (``nodes.py``,
displacing through ``victims.py``) and queued gangs (``gangs.py``; topology in
``gang_topology.py``, trials in ``gang_trials.py``) within the limits (``limits.py``), and
records the outcomes (``outcomes.py``). Elastic pod groups are in ``elastic.py``; free space
per node and its best-fit index in ``free_space.py``. The modules have the names of their
counterparts in ``reference``, and imports go one way (no cycles).

How it stays fast without changing a single decision:

* jobs are grouped by interned shape and sorted once per cycle with numpy;
* queues sit in a heap keyed exactly like the reference's scan over queues; when a queue wins,
  the number of consecutive wins for a run of identical jobs (or of evicted jobs) is computed
  in one vectorised step, because the other queues' keys do not move meanwhile;
* identical jobs are placed by filling the best-fit node until full, then the next: for
  identical requests that equals placing them one by one;
* placements that displace nothing use a sorted index on free resources (``free_space``);
* evicted jobs go back to their own nodes in vectorised batches; with nothing queued and
  every node holding its running jobs, one vectorised check decides that nothing moves;
* a shape (or gang shape) that fits nowhere is remembered until urgency preemption frees
  space, since free space at the most permissive level only shrinks in between.

Anything unusual (urgency preemption, heterogeneous gangs, class limits on evicted jobs) goes
through a general path that follows the reference step by step on the same numpy state.
"""

from .cycle import fast_schedule

__all__ = ["fast_schedule"]
