"""The engine's JSON event stream, to where `--event-log` points: a gRPC Events service or a file."""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any


class EventLog:
    """Streams events live; `close` ends the stream with the cancel event, as the CLI does."""

    def __init__(self, target: str | None) -> None:
        self.seq = 0
        self.handle = None
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.emitted: list[dict[str, Any]] = []
        if target and target.startswith("tcp://"):
            self.thread = threading.Thread(target=self._stream, args=(target[len("tcp://") :],), daemon=True)
            self.thread.start()
        elif target:
            self.handle = open(target, "a", encoding="utf-8")  # noqa: SIM115

    def _stream(self, address: str) -> None:
        import grpc
        from pulumi.runtime.proto import events_pb2, events_pb2_grpc

        def lines() -> Any:
            while True:
                line = self.queue.get()
                if line is None:
                    return
                yield events_pb2.EventRequest(event=line)

        with grpc.insecure_channel(address) as channel:
            events_pb2_grpc.EventsStub(channel).StreamEvents(lines())

    def emit(self, **event: Any) -> None:
        self.seq += 1
        body = {"sequence": self.seq, "timestamp": int(time.time()), **event}
        self.emitted.append(body)
        line = json.dumps(body)
        if self.handle is not None:
            self.handle.write(line + "\n")
            self.handle.flush()
        elif self.thread is not None:
            self.queue.put(line)

    def diagnostic(self, message: str, severity: str = "info", urn: str | None = None) -> None:
        event: dict[str, Any] = {"message": message + "\n", "color": "never", "severity": severity}
        if urn:
            event["urn"] = urn
        self.emit(diagnosticEvent=event)

    def close(self) -> None:
        self.emit(cancelEvent={})
        if self.handle is not None:
            self.handle.close()
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join(timeout=30)
