"""NSQ's utilities (nsq_tail, nsq_stat, nsq_to_file, to_nsq, nsq_to_http,
nsq_to_nsq) on nsqpy's client, with NSQ's flags, output and file names.

One module per tool, and the pieces they share: ``app`` (the run, the stop,
one-line errors), ``options`` (the flags every consumer tool takes),
``clientopts`` (``--consumer-opt``/``--producer-opt``), ``lookupd``,
``publishing`` (where tools publish), ``hostpool`` (which URL or nsqd gets
the next message) and ``timing`` (``--status-every`` lines).
"""
