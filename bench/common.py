"""Shared by bench_writer and bench_reader: NSQ's bench flags and the result line."""

import argparse


def parser(program: str, **defaults) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=program, allow_abbrev=False)
    p.add_argument("--runfor", "-runfor", type=float, default=10.0, help="seconds to run (default 10)")
    p.add_argument("--tcp-address", "-tcp-address", default="127.0.0.1:4150", help="<addr>:<port> of nsqd")
    p.add_argument("--topic", "-topic", default="sub_bench", help="topic to use")
    p.add_argument("--size", "-size", type=int, default=200, help="message size in bytes")
    for name, value in defaults.items():
        flag = name.replace("_", "-")
        p.add_argument(f"--{flag}", f"-{flag}", type=type(value), default=value)
    return p


def hostport(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def report(program: str, messages: int, size: int, seconds: float) -> dict:
    rate = messages / seconds if seconds else 0.0
    mb = rate * size / 1024 / 1024
    print(f"[{program}] duration: {seconds:.1f}s - {mb:.3f}mb/s - {rate:.3f}ops/s - "
          f"{1e6 / rate if rate else 0:.3f}us/op ({messages} messages)", flush=True)
    return {"messages": messages, "seconds": seconds, "rate": rate, "mb": mb}
