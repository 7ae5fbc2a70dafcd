"""Two fixes for hypercorn 0.18, installed where hypercorn looks its classes up (`install()`).

**Closed connections kept for 120 s.** When a client closes an idle keep-alive connection (or
one that never completed a head), `TCPServer` stops reading but its task group still waits for
the keep-alive timer, so the socket sits in CLOSE-WAIT, holding a descriptor, for
`keep_alive_timeout`. Our `TCPServer` stops that timer once reading has ended, so the socket is
closed at once; app.admission relies on it (a connection it shuts down is gone, not parked).

**HTTP/2 `KeyError`** (pgjones/hypercorn#329, fixes not merged). When a response completes
before the request body has arrived (a 401 to an upload, a 413 for an oversized one), hypercorn
forgets the stream; the client's next DATA frame for it then raises
`KeyError` in `H2Protocol._handle_events`, which ends the whole connection and every other
stream on it, SSE streams included.

`H2Protocol` below discards such a DATA frame and hands its flow-control credit back (stream and
connection: without it the whole connection would stall once 64 KiB were discarded), so the
client finishes its body and reads the response it already has. Resetting the stream with
NO_ERROR (RFC 9113 §8.1) would spare that upload, but httpx (httpcore) then fails the request
instead of returning the 401 or 413 it received. Every other event goes to hypercorn unchanged,
one at a time and in order, so a stream created earlier in the same batch is found. `install()`
puts the class where hypercorn's `ProtocolWrapper` looks it up (ALPN `h2` and h2c prior knowledge
alike). Offering only HTTP/1.1 through ALPN was the alternative: it would not cover h2c prior
knowledge on plaintext listeners, and it costs multiplexing.

Remove each once hypercorn ships its fix.
"""

from __future__ import annotations

import h2.events
import hypercorn.asyncio.run as hypercorn_run
import hypercorn.protocol as hypercorn_protocol
from hypercorn.asyncio.tcp_server import TCPServer as _HypercornTCPServer
from hypercorn.protocol.h2 import H2Protocol as _HypercornH2Protocol


class TCPServer(_HypercornTCPServer):
    """hypercorn's connection handler, closing the socket as soon as the peer is gone."""

    async def _read_data(self) -> None:
        await super()._read_data()
        await self.idle_task.stop()


class H2Protocol(_HypercornH2Protocol):
    """hypercorn's HTTP/2 protocol, tolerant of request bodies that outlive their response."""

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self._discard(event)
                await self._flush()
                continue
            await super()._handle_events([event])

    def _discard(self, event: h2.events.DataReceived) -> None:
        assert event.stream_id is not None
        self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)


def install() -> None:
    """Make hypercorn use our `TCPServer` and `H2Protocol` (idempotent)."""
    hypercorn_run.TCPServer = TCPServer  # type: ignore[attr-defined]
    hypercorn_protocol.H2Protocol = H2Protocol  # type: ignore[attr-defined]
