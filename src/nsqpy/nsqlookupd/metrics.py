"""nsqlookupd's Prometheus figures, read from the registration database at
scrape time (see ``nsqpy.metrics``): what a discovery outage would hide."""

from prometheus_client.core import GaugeMetricFamily


class LookupdCollector:
    def __init__(self, lookupd):
        self.lookupd = lookupd

    def collect(self):
        lookupd = self.lookupd
        db = lookupd.db
        timeout = lookupd.options.inactive_producer_timeout
        yield GaugeMetricFamily(
            "nsqlookupd_nsqd_nodes", f"nsqd nodes registered and heard from within {timeout:g}s.",
            value=len(db.live(db.find_producers("client", "", ""), timeout)))
        yield GaugeMetricFamily("nsqlookupd_topics", "Topics registered.",
                                value=len(db.find_registrations("topic", "*", "")))
        yield GaugeMetricFamily("nsqlookupd_channels", "Channels registered, over all topics.",
                                value=len(db.find_registrations("channel", "*", "*")))
        producers = GaugeMetricFamily("nsqlookupd_topic_producers",
                                      "Active (not tombstoned, not inactive) nsqd nodes per topic.",
                                      labels=["topic"])
        for registration in db.find_registrations("topic", "*", ""):
            active = db.active(list(db.registrations[registration].values()), timeout,
                               lookupd.options.tombstone_lifetime)
            producers.add_metric([registration[1]], len(active))
        yield producers
