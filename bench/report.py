"""Turn a pytest-benchmark JSON of test_bench_place.py into the Markdown tables of RESULTS.md."""
from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    data = json.load(open(path))
    kernel, reference, other = {}, {}, []
    for b in data["benchmarks"]:
        info = b["extra_info"]
        median = b["stats"]["median"]
        if info.get("kind") in ("kernel", "reference"):
            key = (info["nodes"], info["shape"], info["policy"])
            (kernel if info["kind"] == "kernel" else reference)[key] = (median / info["pods"], info)
        else:
            other.append((info, median))
    print("| nodes | shape | policy | kernel µs/pod | reference µs/pod | speed-up | placed (kernel, of 10k) |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for key in sorted(kernel):
        k, kinfo = kernel[key]
        r = reference.get(key, (float("nan"), {}))[0]
        print(f"| {key[0]:,} | {key[1]} | {key[2]} | {k * 1e6:.2f} | {r * 1e6:.1f} | {r / k:,.0f}× | {kinfo['placed']:,} |")
    print()
    for info, median in other:
        extra = ", ".join(f"{k}={v}" for k, v in info.items() if k != "kind")
        print(f"- {info['kind']}: median {median:.3f} s ({extra})")


if __name__ == "__main__":
    main(sys.argv[1])
