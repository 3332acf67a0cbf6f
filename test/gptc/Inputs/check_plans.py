"""Reads gptc plan's table: every plan's memory fits, tensor parallelism
stays within a node, and (with --pipelined) every plan has a pipeline."""
import re
import sys

path, usable, per_node = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rows = []
for line in open(path):
    m = re.match(r"\s+(\d+)\s+(\S+)\s.*\s([\d.]+) GiB\s+[\d.]+ GB$", line)
    if m:
        rows.append((m.group(2), float(m.group(3))))
fits = all(mem <= usable for _, mem in rows)
tp = max(int(dict(kv.split("=") for kv in mesh.split(",")).get("tp", 1))
         for mesh, _ in rows)
pipelined = all("pp=" in mesh for mesh, _ in rows)
print(f"{len(rows)} plans, {'all fit' if fits else 'NOT all fit'} in "
      f"{usable} GiB, tensor parallel <= {per_node if tp <= per_node else tp}"
      f"{'' if tp <= per_node else ' (beyond a node)'}, "
      f"{'all pipelined' if pipelined else 'not all pipelined'}")
