#!/usr/bin/env python3
"""The official RocketMQ 5 Python client (rocketmq-python-client, unchanged) against raftmq.

Usage: rocketmq_clients.py <host:port> <topic-prefix>

A Producer sends to two topics; a SimpleConsumer receives, postpones one message with
ChangeInvisibleDuration (it must come back with delivery attempt 2) and acks everything; a
PushConsumer consumes the other topic. Exit status 0 when every sent message was consumed
exactly as sent and no acked message came back; 1 with the reason otherwise.
"""

import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials,
                      FilterExpression, Message, MessageListener, Producer,
                      PushConsumer, SimpleConsumer)

COUNT = 10


def fail(why):
    print(f"FAIL: {why}", flush=True)
    sys.exit(1)


def produce(producer, topic, prefix):
    sent = {}
    for i in range(COUNT):
        m = Message()
        m.topic = topic
        m.body = f"{prefix}-{i}".encode()
        m.tag = "py"
        m.keys = f"key-{i}"
        m.add_property("n", str(i))
        receipt = producer.send(m)
        sent[receipt.message_id] = m.body
    return sent


def simple_consume(config, topic, sent):
    consumer = SimpleConsumer(config, "py-simple", {topic: FilterExpression("py")}, await_duration=2)
    consumer.startup()
    try:
        acked = set()
        postponed = None
        came_back = False
        deadline = time.time() + 60
        while len(acked) < len(sent):
            if time.time() > deadline:
                fail(f"simple consumer acked {len(acked)} of {len(sent)}")
            for m in consumer.receive(32, 10):
                if m.message_id not in sent:
                    fail(f"received {m.message_id}, never sent")
                if m.message_id in acked:
                    fail(f"acked message {m.message_id} delivered again")
                if m.body != sent[m.message_id]:
                    fail(f"body of {m.message_id} is {m.body!r}")
                if m.tag != "py" or m.properties.get("n") is None:
                    fail(f"tag or properties lost: {m.tag!r} {m.properties!r}")
                if postponed is None:
                    postponed = m.message_id
                    consumer.change_invisible_duration(m, 2)
                    continue
                if m.message_id == postponed:
                    if m.delivery_attempt < 2:
                        fail(f"postponed message back with attempt {m.delivery_attempt}")
                    came_back = True
                consumer.ack(m)
                acked.add(m.message_id)
        if not came_back:
            fail("the postponed message never came back")
        print(f"simple consumer: {len(acked)} received and acked, one postponed and redelivered", flush=True)
    finally:
        consumer.shutdown()


class Collect(MessageListener):
    def __init__(self):
        self.lock = threading.Lock()
        self.got = {}

    def consume(self, message):
        with self.lock:
            self.got[message.message_id] = message.body
        return ConsumeResult.SUCCESS


def push_consume(config, topic, sent):
    listener = Collect()
    consumer = PushConsumer(config, "py-push", listener, {topic: FilterExpression()})
    consumer.startup()
    try:
        deadline = time.time() + 60
        while True:
            with listener.lock:
                got = dict(listener.got)
            if set(got) >= set(sent):
                break
            if time.time() > deadline:
                fail(f"push consumer got {len(got)} of {len(sent)}")
            time.sleep(0.2)
        extra = set(got) - set(sent)
        if extra:
            fail(f"push consumer got messages never sent: {extra}")
        for mid, body in sent.items():
            if got[mid] != body:
                fail(f"push consumer: body of {mid} is {got[mid]!r}")
        print(f"push consumer: {len(got)} consumed", flush=True)
    finally:
        consumer.shutdown()


def main():
    # Optional access keys (an authenticated cluster): the producer's, then the consumers'.
    if len(sys.argv) not in (3, 7):
        fail("usage: rocketmq_clients.py <host:port> <topic-prefix> "
             "[<producer-ak> <producer-sk> <consumer-ak> <consumer-sk>]")
    addr, prefix = sys.argv[1], sys.argv[2]
    if len(sys.argv) == 7:
        producer_credentials = Credentials(sys.argv[3], sys.argv[4])
        consumer_credentials = Credentials(sys.argv[5], sys.argv[6])
    else:
        producer_credentials = consumer_credentials = Credentials()
    producer_config = ClientConfiguration(addr, producer_credentials, request_timeout=10)
    config = ClientConfiguration(addr, consumer_credentials, request_timeout=10)
    simple_topic, push_topic = f"{prefix}-simple", f"{prefix}-push"
    producer = Producer(producer_config, (simple_topic, push_topic))
    producer.startup()
    try:
        sent_simple = produce(producer, simple_topic, "simple")
        sent_push = produce(producer, push_topic, "push")
    finally:
        producer.shutdown()
    print(f"producer: {2 * COUNT} sent", flush=True)
    simple_consume(config, simple_topic, sent_simple)
    push_consume(config, push_topic, sent_push)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
