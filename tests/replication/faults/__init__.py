"""Fault injection for replicated nsqd, Jepsen's idea at our scale.

A cluster of replicated nsqd (``cluster.py``), each reaching etcd through
a proxy of its own and optionally fronted by proxies for its clients and
peers (``tests/support/proxy.py``), runs a workload of publishers of
several kinds, each recording the bodies answered OK, and consumers
recording every delivery with the nsqd it came from (``workload.py``),
while a schedule of faults (``schedule.py``) cuts, kills, freezes, stops
and restarts nodes (``faults.py``). Once everything is healed and the
consumers have drained, ``checker.py`` counts per channel what was
acknowledged and never delivered: the one number that must be 0.

Why our own: the guarantees page states what survives which failure;
these runs check each promise with real processes, real sockets and real
etcd, against publishers and consumers that know nothing of replication.
"""
