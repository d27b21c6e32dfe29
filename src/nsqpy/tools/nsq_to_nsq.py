"""nsq_to_nsq: consume topics and republish every message to other nsqd.

Messages that arrive in one loop turn for one topic go out as MPUBs, one
share per destination, each to the destination ``--mode`` picks (NSQ's tool
sends a PUB each; same messages, fewer round trips). A message is FINished
only once its destination acknowledged it; a refused publish REQs the batch
(with backoff). If nsqd rejects a batch as such (a message too big, say),
its messages are sent one by one so only the bad one stays behind. A
destination that is down, even at start, is waited for as NSQ's tool waits:
the messages stay at the source and flow once it answers. With JSON
filters, a body that is not a JSON object is dropped with an error line, as
NSQ's tool drops it, but one such line per ten seconds at most.

With ``--publish-keys`` each message is published keyed by where it came
from (its topic and id: protocol/keyed.py; an id is unique to its nsqd's
``--node-id``, and a replicated survivor delivers a dead node's messages
with their ids), so a message published again after a crash between the
destination's OK and the source's FIN, or after its FIN was lost, is
queued once at the destination.
"""

import asyncio
import dataclasses
import time

from ..client import Consumer, ProtocolError
from ..options import option
from .app import ToolError, user_agent
from .clientopts import DELIVERING_DEFAULTS, client_config
from .consuming import stop_all, subscribe
from .hostpool import MODES
from .jsonfilter import JsonFilter, Verdict
from .options import SourceOptions, check_names, check_sources, check_topic
from .publishing import PUBLISH_ERRORS, Destinations
from ..ratelog import RateLimitedLog, shown
from .timing import StatusEvery

BATCH_BYTES = 1 << 20


@dataclasses.dataclass
class NsqToNsqOptions(SourceOptions):
    topics: list[str] = option([], "nsq topic (may be given multiple times)", flag="topic")
    channel: str = option("nsq_to_nsq", "nsq channel")
    destination_nsqd_tcp_addresses: list[str] = option([], "destination nsqd TCP address (may be given "
                                                       "multiple times)", flag="destination-nsqd-tcp-address")
    destination_topic: str = option("", "use this destination topic for all consumed topics "
                                    "(default is consumed topic name)")
    mode: str = option("hostpool", "the upstream request mode options: round-robin, hostpool (default), "
                       "epsilon-greedy")
    status_every: int = option(250, "the # of requests between logging status (per destination), 0 disables")
    require_json_field: str = option("", "for JSON messages: only pass messages that contain this field")
    require_json_value: str = option("", "for JSON messages: only pass messages in which the required field "
                                     "has this value")
    whitelist_json_fields: list[str] = option([], "for JSON messages: pass this field (may be given multiple "
                                              "times)", flag="whitelist-json-field")
    producer_opts: list[str] = option([], "option to passthrough to nsq.Producer, name,value (may be given "
                                      "multiple times, go-nsq's Config names)", flag="producer-opt")
    publish_keys: bool = option(False, "beyond NSQ: publish each message keyed by its source topic and id (KPUB, "
                                "KMPUB), so one republished after a crash or a lost FIN is queued once at the "
                                "destination (an nsqpy nsqd) within its --publish-key-window")


def source_key(message, source_topic: str) -> str:
    """What makes a consumed message unique, whichever way it was reached:
    its topic and its id (which carries its nsqd's node id)."""
    return f"{source_topic}/{message.id.decode('ascii')}"


class Forwarder:
    def __init__(self, destinations: Destinations, json_filter: JsonFilter, status_every: int, log,
                 publish_keys: bool = False):
        self.destinations = destinations
        self.publish_keys = publish_keys
        self.json_filter = json_filter
        self.log = log
        self._undecodable = RateLimitedLog(log)
        self._status = StatusEvery(status_every, "[aggregate]:", log)
        self._per_destination = {address: StatusEvery(status_every, f"[{address}]:", log)
                                 for address in destinations.addresses}
        self.consumers: dict[str, Consumer] = {}  # by source topic
        self._pending: dict[tuple[str, str], list] = {}  # (source, destination topic) -> [(message, body, key)]
        self._scheduled = False
        self._tasks: set[asyncio.Task] = set()

    def handler(self, source_topic: str, destination_topic: str):
        json_filter = self.json_filter

        async def handle(message) -> None:
            body = message.body
            if json_filter.active:
                verdict, body, why = json_filter.apply(body)
                if verdict is Verdict.INVALID:
                    self._undecodable.error(f"Unable to decode json: {shown(body)}")
                if verdict in (Verdict.DROP, Verdict.INVALID):
                    return  # FINished: filtered out
                if verdict is Verdict.BACKOFF:
                    self.log.error("%s: requeueing %s", why, message.id.decode())
                    message.disable_auto_response()
                    message.requeue()
                    return
            message.disable_auto_response()
            key = source_key(message, source_topic) if self.publish_keys else None
            self._pending.setdefault((source_topic, destination_topic), []).append((message, body, key))
            if not self._scheduled:
                self._scheduled = True
                asyncio.get_running_loop().call_soon(self._flush)

        return handle

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        for (source, topic), items in pending.items():
            consumer = self.consumers[source]
            # a share per destination, so --mode spreads even one turn's messages
            share = -(-len(items) // self.destinations.shares)
            start, size = 0, 0
            for index, (_, body, _) in enumerate(items):
                size += len(body)
                if index > start and (size > BATCH_BYTES or index - start == share):
                    self._spawn(consumer, topic, items[start:index])
                    start, size = index, len(body)
            self._spawn(consumer, topic, items[start:])

    def _spawn(self, consumer: Consumer, topic: str, items: list) -> None:
        task = asyncio.get_running_loop().create_task(self._forward(consumer, topic, items))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forward(self, consumer: Consumer, topic: str, items: list) -> None:
        messages = [message for message, _, _ in items]
        started = time.monotonic()
        keys = [key for _, _, key in items] if self.publish_keys else None
        try:
            address = await self.destinations.publish(topic, [body for _, body, _ in items], keys)
        except ProtocolError as error:
            if len(items) > 1:
                for item in items:
                    await self._forward(consumer, topic, [item])
                return
            self._requeue(messages, topic, error)
        except PUBLISH_ERRORS as error:
            self._requeue(messages, topic, error)
        else:
            consumer.finish_all(messages)
            elapsed = time.monotonic() - started
            self._status.record(elapsed, len(messages))
            if address in self._per_destination:
                self._per_destination[address].record(elapsed, len(messages))

    def _requeue(self, messages: list, topic: str, error: Exception) -> None:
        self.log.warning("publishing %d message(s) to %s failed, requeued: %s", len(messages), topic,
                         error or type(error).__name__)
        for message in messages:
            message.requeue()


def check(options: NsqToNsqOptions, log) -> None:
    check_names(options.topics, options.channel)
    check_sources(options)
    if options.destination_topic:
        check_topic("--destination-topic", options.destination_topic)
    if not options.destination_nsqd_tcp_addresses:
        raise ToolError("--destination-nsqd-tcp-address required")
    if options.mode not in MODES:
        log.warning("--mode %r is none of %s: every message goes to every destination (as NSQ does)",
                    options.mode, ", ".join(MODES))


async def run(options: NsqToNsqOptions, stop: asyncio.Event, log) -> int:
    check(options, log)
    agent = user_agent("nsq_to_nsq")
    consumer_config = client_config(agent, "consumer-opt", options.consumer_opts, defaults=DELIVERING_DEFAULTS,
                                    max_in_flight=options.max_in_flight)
    destinations = Destinations(options.destination_nsqd_tcp_addresses,
                                client_config(agent, "producer-opt", options.producer_opts), options.mode)
    forwarder = Forwarder(destinations, JsonFilter(options.require_json_field, options.require_json_value,
                                                   options.whitelist_json_fields), options.status_every, log,
                          options.publish_keys)
    for topic in options.topics:
        handler = forwarder.handler(topic, options.destination_topic or topic)
        forwarder.consumers[topic] = Consumer(topic, options.channel, handler, config=consumer_config)
    consumers = list(forwarder.consumers.values())
    try:
        for problem in await destinations.unreachable():
            log.warning("%s; messages wait at the source until it answers", problem)
        await subscribe(consumers, options)
        await stop.wait()
    finally:
        await stop_all(consumers)
        await destinations.close()
    return 0
