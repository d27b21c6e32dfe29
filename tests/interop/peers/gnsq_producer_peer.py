"""gnsq Producer publishing for nsqpy's Consumer. argv: tcp_address topic count"""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

import gnsq  # noqa: E402

address, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = gnsq.Producer([address])
producer.start()
half = count // 2
for i in range(half):
    producer.publish(topic, b"g%d" % i)
producer.multipublish(topic, [b"g%d" % i for i in range(half, count)])
producer.close()
producer.join()
