"""nsqadmin: the web UI and JSON API over a cluster of nsqd and nsqlookupd.

Rooms: ``options`` (NSQ's flags), ``upstream`` (HTTP calls to the daemons),
``cluster`` (fan-out and discovery), ``aggregate`` (per-node stats into the
shapes Go's nsqadmin answers), ``history`` (sampled stats for charts),
``notify`` (admin-action notifications), ``api`` (JSON routes), ``pages``
(HTML), ``figures`` (how pages word numbers), ``server`` (the daemon).
"""
