"""The what-if simulator: the server's own scheduling loop and simulated executor on a virtual
clock, over a workload (a YAML file, a named seeded generator, or a server's history), with
the figures an operator compares before changing a setting (report.py, page.py).

    workload.py     queues, nodes and job arrivals; generators.py makes them from a seed,
                    history.py from a server's export
    clock.py        virtual time: what the loop, storage and executor read instead of the clock
    ports.py        the server the simulation drives: its storage in-process (fast), or a
                    running server over gRPC (the comparison that shows they decide alike)
    jobs.py         an arrival as the submission items a client would send
    driver.py       the steps: arrivals, runs ending, executor syncs, one cycle per period
    run.py          one simulation: a workload under one configuration
    recording.py    what each step saw; report.py turns it into figures, page.py into HTML
    command.py      `armada-server simulate`
"""
