"""A worker that holds a valid worker certificate (a compromised host, or a tenant who
stole one) and reports on another worker's job: log lines, metric points, an exit, a
failed assignment. Registers under its certificate's name, sends the reports, then waits
for the acknowledgement of a heartbeat sent after them (the coordinator handles one
stream's messages in order), and prints "sent".

Usage: rogue_worker.py ADDRESS CA CERT KEY WORKER_ID JOB GENERATION
"""
import queue
import sys

import grpc

from baton.v1 import job_pb2, worker_service_pb2, worker_service_pb2_grpc

PROTOCOL_VERSION = 4


def main():
    address, ca, cert, key, worker_id, job, generation = sys.argv[1:8]
    generation = int(generation)
    creds = grpc.ssl_channel_credentials(open(ca, "rb").read(), open(key, "rb").read(),
                                         open(cert, "rb").read())
    channel = grpc.secure_channel(address, creds)
    stub = worker_service_pb2_grpc.WorkerServiceStub(channel)
    outgoing = queue.Queue()

    def requests():
        while True:
            msg = outgoing.get()
            if msg is None:
                return
            yield msg

    replies = stub.Connect(requests(), timeout=60)
    reg = worker_service_pb2.WorkerMessage()
    reg.register.worker_id = worker_id
    reg.register.hostname = worker_id
    reg.register.resources.slots = 1
    reg.register.protocol_version = PROTOCOL_VERSION
    outgoing.put(reg)
    first = next(replies)
    assert first.HasField("registered"), first

    logs = worker_service_pb2.WorkerMessage()
    logs.logs.job_id = job
    line = logs.logs.lines.add()
    line.generation, line.rank, line.text = generation, 0, "planted by " + worker_id
    line.stream = job_pb2.LogLine.STREAM_STDERR
    outgoing.put(logs)

    metrics = worker_service_pb2.WorkerMessage()
    metrics.metrics.job_id = job
    point = metrics.metrics.points.add()
    point.generation, point.rank, point.step = generation, 0, 999999
    point.values["loss"] = 0.0
    outgoing.put(metrics)

    exited = worker_service_pb2.WorkerMessage()
    exited.process_exited.job_id = job
    exited.process_exited.generation = generation
    exited.process_exited.rank = 0
    exited.process_exited.exit.exit_code = 1
    outgoing.put(exited)

    failed = worker_service_pb2.WorkerMessage()
    failed.assignment_failed.job_id = job
    failed.assignment_failed.generation = generation
    failed.assignment_failed.reason = "PathNotAllowed"
    failed.assignment_failed.message = "planted"
    outgoing.put(failed)

    hb = worker_service_pb2.WorkerMessage()
    hb.heartbeat.seq = 7
    outgoing.put(hb)
    for reply in replies:
        if reply.HasField("heartbeat_ack") and reply.heartbeat_ack.seq == 7:
            break
    outgoing.put(None)
    channel.close()
    print("sent")


if __name__ == "__main__":
    main()
