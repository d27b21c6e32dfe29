"""Replicated nsqd (``--replication-factor`` 2 or 3, coordinated by etcd):
no acknowledged message is lost when a whole node dies, for every NSQ
client, unchanged.

The design, and why
===================

NSQ has no leader and no partitions: a topic lives on every nsqd a
producer publishes to, and consumers read from all of them. Replication
keeps that shape. **Each nsqd is the origin of the messages it accepted,
and copies them to R-1 peers**, its successors in the order of the live
members' names. A copy is a *shadow*, kept per origin and epoch, never
delivered: no client sees a second nsqd for a topic, no message is
delivered twice while nothing fails, and a node's speed does not depend
on a leader elsewhere.

- **Publish.** PUB, MPUB, DPUB and HTTP ``/pub`` ``/mpub`` queue the
  messages locally as before, and are answered OK once every successor
  has said OK to the ``REPL`` batch that carries them
  (``protocol/replication.py``; one batch per peer per event-loop turn,
  on a V2 connection to the peer's TCP port). A publish that cannot have
  ``--replication-min-copies`` copies (by default the replication factor)
  is refused before it is queued (E_PUB_FAILED, HTTP 503), or answered
  with that error when a peer is lost with no other to take its place;
  ``/ping`` says NOK while publishes are refused. Copies keep the message id,
  timestamp, deferral and the channels the origin handed them to (an
  MPUB's body travels as it came). With ``--replication-ack=disk`` a peer
  answers once the batch is fsynced in its shadow log (``shadowlog.py``).
- **Outcomes.** When a channel is through with a message (FIN, a
  dead-letter, an expiry) the origin tells its peers within the same
  turn; channels created, deleted, emptied, paused or unpaused travel the
  same way. A shadow thus holds exactly what the origin still owes, per
  channel. REQ and TOUCH change nothing a survivor needs (it delivers
  again anyway).
- **Successors change.** When a peer goes, or a member joins between a
  node and its successor, or the node restarts with its messages kept,
  each new successor gets a copy of everything the node still holds
  (``snapshot.py``: queued in memory and on disk, in flight, deferred;
  fixed in that turn, sent in slices no faster than the peer answers),
  and once it is whole answers for the publishes the lost one had not
  answered yet. A link
  that starts again first resets what its peer held of this epoch.
- **Membership and death** live in etcd (``membership.py``): each nsqd
  holds a lease (its *epoch*) and a member key on it, renewed every sixth
  of ``--replication-lease``. A node whose lease ends is dead to the
  others, whatever it thinks. The member key and a key for its
  ``--node-id`` are created together, only if both are absent: a second
  nsqd that advertises a live node's address, or takes its node id, is
  refused, however close together the two start.
- **Who may speak REPL.** A link proves it is a member before its first
  batch (``RAUTH``: the cluster's secret answering a nonce the peer made
  for that connection; ``--replication-secret-file``, or, only when the
  operator says ``--replication-secret-in-etcd``, a secret made once and
  kept in etcd), so a client that reaches port 4150 cannot
  change what a peer holds, nor replay a proof it saw. With
  ``--tls-required`` links upgrade to TLS as any NSQ client does, with the
  node's own certificate for peers that ask for one; REPL needs no AUTH
  (``--auth-http-address``): the proof says who sent it.
- **Takeover.** Every peer holding a shadow of an epoch that left the
  members races for ``takeover/<node>/<epoch>`` with an etcd transaction
  (create if absent); the winner adopts its shadow into its own topics
  and channels (``takeover.py``), where consumers find it through
  nsqlookupd, and copies it on to its own peers. Losers hand theirs to the
  winner, which adopts only the ids it lacks. The decision is etcd's, not
  ours: no election of our own.
  A survivor whose owner's own epoch ended before it took the copies
  held here (it died, or was cut off, meanwhile) claims the epoch from
  it, by a transaction that compares who owns it, and adopts them.
- **Fencing.** A node counts its lease's *deadline* from when it sent its
  last renewal that etcd took, a clock-drift margin short of the TTL;
  survivors claim an ended epoch only that margin after they saw its
  lease gone (``membership.py``, Leases and clocks). Past its deadline a
  node answers no publish OK (checked as each OK is written, so a node
  frozen and resumed acknowledges nothing queued before) and its
  channels deliver nothing, until a renewal goes through again: no
  survivor ever owns what its origin still acknowledges or hands out.
  A node that finds its lease ended (frozen, cut off) claims its own
  epoch: if a survivor owns it already, the node hands it what it holds
  (the survivor adopts what it lacks), drops it all and joins again
  under a new epoch.
  A restarted node does the same for the epoch its data dir names, under
  the address it had then, whatever its address now: it waits for that
  lease to end (a crashed node renews it no more), a moment for a
  survivor's claim, and keeps its data only when nobody took it (or the
  one that took it has left the cluster since); until then it delivers
  nothing and acknowledges nothing. A lease that is still renewed means a live
  nsqd runs with this data dir (a cloned VM, a volume snapshot): the
  copy is refused at start and changes nothing. A clean stop owns
  its epoch before it leaves: its messages stay in its data dir, as in
  NSQ, and so do the copies it holds for others (``shadowlog.py``), read
  back and taken over at the next start if their origin is gone.
- **etcd unavailable.** A node cannot tell etcd down from etcd cut off
  from it alone, while the others may still reach it: publishes go on
  until its lease's deadline, then are refused (E_PUB_FAILED, HTTP 503)
  and nothing is delivered until etcd answers again (etcd extends every
  lease when it comes back), with a loud line every few seconds. A node
  that has not reached etcd yet is no member: its publishes are refused.
  With ``--replication-min-copies`` below the factor, a publish is
  answered with the copies there are (by a member within its deadline,
  or by a node that never joined), and ``under_replicated_messages``
  counts the messages held with fewer than the factor.

What it costs: every accepted byte crosses loopback or the LAN once per
peer, a publish waits one round trip to its peers, and a peer keeps each
copy until the origin's channels are through with it: in memory up to
``--mem-queue-size`` per topic, the bodies of the rest on disk
(``shadowspill.py``), the ids in memory.
Bounds: a message finished in the last turn before a crash may be
delivered again by the survivor (same id); so may one that was in flight
at a fenced node when its deadline came (at most what its consumers'
RDY allowed in flight), delivered by both nodes. A survivor that claims
an epoch from an owner that died may deliver again what that owner had
adopted and handed on (same ids). A node that dies in
the moment between a clean restart and its successors' copy of what it
kept (one snapshot, sent as it joins) has those messages in its data dir
only, as NSQ would, until it starts again.

A peer that stays a member but stops answering (a disk whose fsync hangs)
holds its origin's publishes for a lease's time at most: then its link
goes and the next successor answers in its place.

Not covered yet: messages dropped by a drop-oldest limit stay in the shadows
until the origin's next restart; a restarted node whose epoch a survivor
took over drops its data dir's messages of that epoch, including any it
had acknowledged with fewer copies (``--replication-min-copies`` below
the factor). A proved connection is not encrypted: on a network that
others can watch (or write into), use TLS.
"""
