"""NSQ's utilities (nsq_tail, nsq_stat, nsq_to_file, to_nsq, nsq_to_http,
nsq_to_nsq) on nsqpy's client, with NSQ's flags, output and file names.

One module per tool, and the pieces they share: ``app`` (the run, the stop,
one-line errors), ``options`` (the flags every consuming tool takes),
``clientopts`` (``--consumer-opt``/``--producer-opt``), ``consuming``
(subscribing and stopping consumers), ``lookupd`` (nsqlookupd's HTTP API),
``publishing`` (where to_nsq and nsq_to_nsq publish), ``hostpool`` (which
URL or nsqd gets the next message), ``timing`` (``--status-every`` lines),
``archive_file`` (nsq_to_file's files) and ``jsonfilter`` (nsq_to_nsq's
JSON filters).
"""
