"""``streamlab-hub`` / ``python -m streamlab.hub``: run the local Event Hubs emulator.

Prints the connection string on one line once it accepts connections, and stops
cleanly (connections closed, storage flushed, exit code 0) on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from .server import DEFAULT_EVENTHUBS, KEY_NAME, KEY_VALUE, HubConfig, HubServer, is_loopback
from .storage import Policy


def _eventhub(text: str) -> tuple[str, int]:
    name, sep, count = text.rpartition(":")
    try:
        if not sep or not name:
            raise ValueError
        partitions = int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME:PARTITIONS, got {text!r}") from None
    return name, partitions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: where to listen, what to serve and keep, and the key."""
    parser = argparse.ArgumentParser(
        prog="streamlab-hub", description="Local Azure Event Hubs emulator (AMQP 1.0)."
    )
    _listening_options(parser)
    _storage_options(parser)
    _key_options(parser)
    parser.add_argument("--log-level", default="WARNING", help="logging level")
    return parser.parse_args(argv)


def _listening_options(parser: argparse.ArgumentParser) -> None:
    """Where the hub listens."""
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, loopback only)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=5672,
        help="port to listen on; 0 picks a free one (default: 5672)",
    )


def _storage_options(parser: argparse.ArgumentParser) -> None:
    """What the hub serves and how it keeps the events."""
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="directory for durable storage (default: a temporary one)",
    )
    parser.add_argument(
        "--eventhub",
        type=_eventhub,
        action="append",
        default=None,
        metavar="NAME:PARTITIONS",
        help="an event hub to serve (repeatable; default: heartbeats:4, status:1 and alerts:1)",
    )
    parser.add_argument(
        "--retention-hours",
        type=float,
        default=24.0,
        help="delete events older than this (default: 24)",
    )
    parser.add_argument(
        "--retention-mb",
        type=float,
        default=256.0,
        help="keep at most this many MiB per partition (default: 256)",
    )
    parser.add_argument(
        "--segment-mb",
        type=float,
        default=8.0,
        help="size of one log segment file in MiB (default: 8)",
    )
    parser.add_argument(
        "--fsync", action="store_true", help="fsync every append (survives power loss, slower)"
    )


def _key_options(parser: argparse.ArgumentParser) -> None:
    """The shared access policy a client's tokens are signed with."""
    parser.add_argument(
        "--key-name", default=KEY_NAME, help=f"shared access policy name (default: {KEY_NAME})"
    )
    parser.add_argument(
        "--key",
        default=KEY_VALUE,
        help=f"the policy's key; tokens must be signed with it (default: "
        f"{KEY_VALUE}, the public key of Microsoft's emulator: set your "
        "own when the hub listens beyond this machine)",
    )


async def _serve(config: HubConfig) -> None:
    server = HubServer(config)
    conn_str = await server.start()
    if not is_loopback(config.host):
        default = " with the public default key: pass --key" if config.key == KEY_VALUE else ""
        print(
            f"streamlab-hub: listening on {config.host}:{server.port}, beyond this machine; "
            f"anyone who can reach it and holds the key can use it{default}",
            file=sys.stderr,
            flush=True,
        )
    print(conn_str, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # e.g. Windows: Ctrl-C still works
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(stop.set))
    try:
        await stop.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    mib = 1024 * 1024
    try:
        config = HubConfig(
            host=args.host,
            port=args.port,
            data_dir=args.data_dir,
            eventhubs=dict(args.eventhub) if args.eventhub else dict(DEFAULT_EVENTHUBS),
            policy=Policy(
                segment_bytes=max(4096, int(args.segment_mb * mib)),
                retention_bytes=int(args.retention_mb * mib),
                retention_seconds=args.retention_hours * 3600.0,
                fsync=args.fsync,
            ),
            key_name=args.key_name,
            key=args.key,
        )
        asyncio.run(_serve(config))
    except KeyboardInterrupt:
        pass
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"streamlab-hub: {exc}", file=sys.stderr)
        return 1
    print("streamlab-hub: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
